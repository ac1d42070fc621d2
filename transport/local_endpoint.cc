// local_endpoint.cc: creation and mapping of endpoints (process memory or POSIX shm).
#include "transport/local_endpoint.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <type_traits>
#include <map>
#include <mutex>
#include <new>

namespace strata {
namespace {

constexpr uint32_t kEndpointMagic = 0x4c4f4341;  // "LOCA"

size_t alignUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

size_t controlBytes(int nranks) {
  return alignUp(sizeof(EndpointHeader) + sizeof(ChannelCtrl) * static_cast<size_t>(nranks), 4096);
}

struct Registry {
  std::mutex mu;
  std::map<std::pair<uint64_t, int>, std::shared_ptr<Endpoint>> map;
};
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

std::string endpointShmName(uint64_t commTag, int rank, int pid) {
  return fmt::format("/strata-{:016x}-{}-{}", commTag, rank, pid);
}

int removeStaleSegments() {
  DIR* dir = opendir("/dev/shm");
  if (!dir) return 0;
  int removed = 0;
  while (dirent* e = readdir(dir)) {
    unsigned long long tag = 0;
    int rank = 0, pid = 0, used = 0;
    if (std::sscanf(e->d_name, "strata-%16llx-%d-%d%n", &tag, &rank, &pid, &used) != 3 ||
        e->d_name[used] != '\0' || pid <= 0)
      continue;
    if (kill(pid, 0) != 0 && errno == ESRCH && shm_unlink((std::string("/") + e->d_name).c_str()) == 0) ++removed;
  }
  closedir(dir);
  return removed;
}

void Endpoint::layout(void* base, bool withData) {
  base_ = base;
  header_ = static_cast<EndpointHeader*>(base);
  channels_ = reinterpret_cast<ChannelCtrl*>(static_cast<char*>(base) + sizeof(EndpointHeader));
  data_ = withData ? static_cast<char*>(base) + controlBytes(header_->nranks) : nullptr;
}

char* Endpoint::slotData(int sender, uint64_t slot) const {
  const size_t slots = header_->slots, bytes = header_->slotBytes;
  return data_ + (static_cast<size_t>(sender) * slots + slot % slots) * bytes;
}

Status Endpoint::create(const std::string& shmName, int rank, int nranks, int slots, size_t slotBytes,
                        bool withData, std::shared_ptr<Endpoint>* out) {
  std::shared_ptr<Endpoint> ep(new Endpoint());
  size_t size = controlBytes(nranks) + (withData ? static_cast<size_t>(nranks) * slots * slotBytes : 0);
  void* base = nullptr;
  if (shmName.empty()) {
    base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return systemError("mmap({} bytes): {}", size, strerror(errno));
  } else {
    int fd = shm_open(shmName.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return systemError("shm_open({}): {}", shmName, strerror(errno));
    if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
      int e = errno;
      ::close(fd);
      shm_unlink(shmName.c_str());
      return systemError("ftruncate({}, {} bytes): {} (is /dev/shm large enough?)", shmName, size, strerror(e));
    }
    base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    ::close(fd);
    if (base == MAP_FAILED) {
      shm_unlink(shmName.c_str());
      return systemError("mmap({}): {}", shmName, strerror(e));
    }
    ep->shm_ = true;
    ep->name_ = shmName;
  }
  ep->size_ = size;
  EndpointHeader* h = new (base) EndpointHeader();
  h->rank = rank;
  h->nranks = nranks;
  h->pid = getpid();
  h->slots = static_cast<uint32_t>(slots);
  h->slotBytes = slotBytes;
  h->probeAddr = reinterpret_cast<uint64_t>(&h->magic);
  h->failed.store(0);
  // The channels are not constructed one by one: a fresh mapping is zero pages, and a zeroed
  // ChannelCtrl is its initial state. So a channel costs memory only once a peer uses it, and an
  // endpoint of a large communicator stays small.
  static_assert(std::is_trivially_destructible_v<ChannelCtrl>);
  ep->layout(base, withData);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  h->magic = kEndpointMagic;
  *out = std::move(ep);
  return OkStatus();
}

Status Endpoint::open(const std::string& shmName, int expectRank, std::shared_ptr<Endpoint>* out) {
  int fd = shm_open(shmName.c_str(), O_RDWR, 0600);
  if (fd < 0) return systemError("shm_open({}) for rank {}: {}", shmName, expectRank, strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(EndpointHeader))) {
    ::close(fd);
    return systemError("shared segment {} of rank {} is truncated", shmName, expectRank);
  }
  size_t size = static_cast<size_t>(st.st_size);
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  ::close(fd);
  if (base == MAP_FAILED) return systemError("mmap({}): {}", shmName, strerror(e));
  auto* h = static_cast<EndpointHeader*>(base);
  if (h->magic != kEndpointMagic || h->rank != expectRank) {
    munmap(base, size);
    return internalError("shared segment {} does not hold rank {}'s endpoint", shmName, expectRank);
  }
  std::shared_ptr<Endpoint> ep(new Endpoint());
  ep->size_ = size;
  ep->shm_ = true;
  ep->layout(base, size > controlBytes(h->nranks));
  *out = std::move(ep);
  return OkStatus();
}

void Endpoint::unlink() {
  if (shm_ && !name_.empty()) {
    shm_unlink(name_.c_str());
    name_.clear();
  }
}

Endpoint::~Endpoint() {
  unlink();
  if (base_) munmap(base_, size_);
}

void registerLocalEndpoint(uint64_t commTag, int rank, std::shared_ptr<Endpoint> ep) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.map[{commTag, rank}] = std::move(ep);
}

std::shared_ptr<Endpoint> findLocalEndpoint(uint64_t commTag, int rank) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.map.find({commTag, rank});
  return it == r.map.end() ? nullptr : it->second;
}

void unregisterLocalEndpoint(uint64_t commTag, int rank) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.map.erase({commTag, rank});
}

}  // namespace strata
