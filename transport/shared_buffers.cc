// shared_buffers.cc: the registry of this process's shareable host regions (memfd + MAP_SHARED),
// and the cache of peers' regions mapped here. Both are guarded by a mutex; the transport keeps
// its own one-entry caches in front of them, so the hot path rarely gets here.
#include "transport/shared_buffers.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace strata {
namespace {

struct Region {
  uintptr_t base;
  size_t size;
  int fd;
  uint64_t inode;
};

struct Registry {
  std::mutex mu;
  std::vector<Region> regions;  ///< sorted by base
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: buffers may be freed during exit
  return *r;
}

struct PeerMap {
  const char* base;
  size_t size;
  uint64_t inode;
};

struct PeerCache {
  std::mutex mu;
  std::map<std::pair<int, int>, PeerMap> maps;
};

PeerCache& peerCache() {
  static PeerCache* c = new PeerCache;
  return *c;
}

}  // namespace

Status allocShared(void** p, size_t bytes) {
  *p = nullptr;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (bytes > SIZE_MAX - page) return invalidArgument("MemAlloc: size {} too large", bytes);
  const size_t size = std::max<size_t>(1, (bytes + page - 1) / page) * page;
  int fd = memfd_create("strata-buffer", MFD_CLOEXEC);
  if (fd < 0) return systemError("MemAlloc: memfd_create failed: {}", strerror(errno));
  struct stat st {};
  if (ftruncate(fd, static_cast<off_t>(size)) != 0 || fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return systemError("MemAlloc: cannot size a {}-byte shared region: {}", size, strerror(e));
  }
  void* m = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    int e = errno;
    close(fd);
    return systemError("MemAlloc: cannot map {} bytes: {}", size, strerror(e));
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  Region reg{reinterpret_cast<uintptr_t>(m), size, fd, static_cast<uint64_t>(st.st_ino)};
  auto it = std::lower_bound(r.regions.begin(), r.regions.end(), reg.base,
                             [](const Region& a, uintptr_t b) { return a.base < b; });
  r.regions.insert(it, reg);
  *p = m;
  return OkStatus();
}

bool freeShared(void* p) {
  Registry& r = registry();
  Region reg{};
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = std::lower_bound(r.regions.begin(), r.regions.end(), reinterpret_cast<uintptr_t>(p),
                               [](const Region& a, uintptr_t b) { return a.base < b; });
    if (it == r.regions.end() || it->base != reinterpret_cast<uintptr_t>(p)) return false;
    reg = *it;
    r.regions.erase(it);
  }
  munmap(reinterpret_cast<void*>(reg.base), reg.size);
  close(reg.fd);
  return true;
}

bool findShared(const void* p, size_t bytes, int* fd, uint64_t* offset, uint64_t* inode) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.regions.empty()) return false;
  // The last region whose base is <= a.
  auto it = std::upper_bound(r.regions.begin(), r.regions.end(), a,
                             [](uintptr_t x, const Region& b) { return x < b.base; });
  if (it == r.regions.begin()) return false;
  --it;
  if (a - it->base > it->size || bytes > it->size - (a - it->base)) return false;
  *fd = it->fd;
  *offset = a - it->base;
  *inode = it->inode;
  return true;
}

const char* mapPeerRegion(int pid, int fd, uint64_t inode, uint64_t minBytes, size_t* size, std::string* why) {
  PeerCache& c = peerCache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto key = std::make_pair(pid, fd);
  auto it = c.maps.find(key);
  if (it != c.maps.end() && it->second.inode == inode && it->second.size >= minBytes) {
    *size = it->second.size;
    return it->second.base;
  }
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  int f = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f < 0) {
    *why = "open " + path + ": " + strerror(errno);
    return nullptr;
  }
  struct stat st {};
  if (fstat(f, &st) != 0) {
    *why = "fstat " + path + ": " + strerror(errno);
    close(f);
    return nullptr;
  }
  if (static_cast<uint64_t>(st.st_ino) != inode || static_cast<uint64_t>(st.st_size) < minBytes) {
    *why = path + " is not the region the peer described (inode or size differ)";
    close(f);
    return nullptr;
  }
  *size = static_cast<size_t>(st.st_size);
  void* m = mmap(nullptr, *size, PROT_READ, MAP_SHARED | MAP_POPULATE, f, 0);
  close(f);
  if (m == MAP_FAILED) {
    *why = "mmap " + path + ": " + strerror(errno);
    return nullptr;
  }
  if (it != c.maps.end()) munmap(const_cast<char*>(it->second.base), it->second.size);  // fd number reused
  c.maps[key] = PeerMap{static_cast<const char*>(m), *size, inode};
  return static_cast<const char*>(m);
}

bool canMapPeerRegions(int pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(path.c_str());
  if (!d) return false;
  closedir(d);
  return true;
}

size_t sharedRegionCount() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.regions.size();
}

Status allocHostBuffer(void** p, size_t bytes) {
  if (allocShared(p, bytes).ok()) return OkStatus();
  const size_t align = 4096;
  if (bytes > SIZE_MAX - align) return invalidArgument("MemAlloc: size {} too large", bytes);
  if (posix_memalign(p, align, (bytes + align - 1) / align * align) != 0)
    return Status(strataSystemError, fmt::format("MemAlloc: cannot allocate {} bytes", bytes));
  return OkStatus();
}

void freeHostBuffer(void* p) {
  if (!freeShared(p)) free(p);
}

}  // namespace strata
