// op_ring.cc: the per-communicator operation ring, the process's registry of rings, the SIGUSR1
// watcher and the dump writer (see op_ring.h).
#include "collectives/op_ring.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "collectives/schedule.h"
#include "kernels/host_reduce.h"
#include "topology/host_identity.h"
#include "transport/config.h"
#include "transport/log.h"

namespace strata {
namespace {

int64_t coarseNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

struct Registry {
  std::mutex mu;  ///< guards `rings` and serialises dumps
  std::vector<const OpRing*> rings;
};
Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: rings may go during exit
  return *r;
}

// ---- SIGUSR1: the handler writes a byte to a pipe; a watcher thread dumps. ----

std::atomic<int> gSignalPipeWrite{-1};
std::mutex gWatcherMu;
pid_t gWatcherPid = 0;  ///< the process whose watcher runs (a forked child starts its own)

void onDumpSignal(int) {
  const int saved = errno;
  const int fd = gSignalPipeWrite.load(std::memory_order_relaxed);
  if (fd >= 0) {
    const char b = 1;
    ssize_t w = write(fd, &b, 1);  // async-signal-safe; a full pipe already holds a request
    (void)w;
  }
  errno = saved;
}

void watch(int readFd) {
  char buf[64];
  for (;;) {
    ssize_t r = read(readFd, buf, sizeof(buf));  // several signals in a row: one dump
    if (r > 0) dumpOpRings("signal", /*stderrWithoutDir=*/true);
    else if (r < 0 && errno == EINTR) continue;
    else return;
  }
}

void forgetWatcherInChild() {
  // The watcher thread does not survive fork(): the child's first communicator starts its own,
  // and until then the parent's pipe must not receive the child's signals.
  gSignalPipeWrite.store(-1, std::memory_order_relaxed);
}

void startSignalWatcher() {
  if (!config().dumpSignal) return;
  std::lock_guard<std::mutex> lock(gWatcherMu);
  if (gWatcherPid == getpid()) return;
  struct sigaction old;
  std::memset(&old, 0, sizeof(old));
  if (sigaction(SIGUSR1, nullptr, &old) != 0) return;
  const bool ours = !(old.sa_flags & SA_SIGINFO) && old.sa_handler == onDumpSignal;
  if (!ours && !(old.sa_flags & SA_SIGINFO) && old.sa_handler != SIG_DFL) {
    log::debug("SIGUSR1 has a handler already: op-ring dumps on SIGUSR1 are off");
    gWatcherPid = getpid();
    return;
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return;
  fcntl(fds[1], F_SETFL, O_NONBLOCK);
  static std::once_flag atfork;
  std::call_once(atfork, [] { pthread_atfork(nullptr, nullptr, forgetWatcherInChild); });
  std::thread(watch, fds[0]).detach();
  gSignalPipeWrite.store(fds[1], std::memory_order_relaxed);
  if (!ours) {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_handler = onDumpSignal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, nullptr);
  }
  gWatcherPid = getpid();
}

std::string dumpText(const char* reason) {
  hang::ProcessDump d;
  d.host = topology::hostName();
  d.pid = getpid();
  d.reason = reason;
  d.now = static_cast<double>(coarseNowNs()) * 1e-9;
  for (const OpRing* r : registry().rings) d.comms.push_back(r->snapshot());
  return hang::formatDump(d);
}

bool writeAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t w = write(fd, s.data() + done, s.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

OpRing::~OpRing() {
  if (!attached_) return;
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  reg.rings.erase(std::remove(reg.rings.begin(), reg.rings.end(), this), reg.rings.end());
}

void OpRing::attach(uint64_t commId, int rank, int nranks, const std::string& name) {
  {
    Registry& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mu);
    commId_ = commId;
    rank_ = rank;
    nranks_ = nranks;
    name_ = name;
    if (!attached_) reg.rings.push_back(this);
    attached_ = true;
  }
  startSignalWatcher();
}

OpRing::Record& OpRing::open(uint32_t index) {
  Record& r = recs_[index % kEntries];
  r.version.store(r.version.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  return r;
}

void OpRing::close(Record& r) { r.version.store(r.version.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

int64_t OpRing::clockNs() { return coarseNowNs(); }


uint32_t OpRing::beginP2P(uint64_t transfers, uint32_t nsteps) {
  return begin(++p2pSeq_, 0, transfers, kRunning | (1u << 2), nsteps);
}

void OpRing::noteWaiting(uint32_t index, uint32_t step, const hang::Wait* waits, uint32_t n) {
  Record& r = open(index);
  n = std::min(n, kMaxWaits);
  for (uint32_t i = 0; i < n; ++i) waits_[i].store(waits[i].peer * 2 + (waits[i].send ? 1 : 0), std::memory_order_relaxed);
  // The record of `index` started last (only the newest operation waits).
  waitOwner_.store(begun_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  const uint32_t nsteps = static_cast<uint32_t>(r.progress.load(std::memory_order_relaxed) & 0xffffff);
  r.progress.store(packProgress(nsteps, step, n), std::memory_order_relaxed);
  close(r);
}



void OpRing::setError(const std::string& message) {
  std::lock_guard<std::mutex> lock(errMu_);
  if (error_.empty()) error_ = message;
}

hang::CommDump OpRing::snapshot() const {
  hang::CommDump c;
  c.id = fmt::format("{:#x}", commId_);
  c.rank = rank_;
  c.nranks = nranks_;
  c.name = name_;
  c.lastSeq = collSeq_.load(std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(errMu_);
    c.error = error_;
  }
  const uint64_t n = begun_.load(std::memory_order_acquire);
  const uint64_t first = n > kEntries ? n - kEntries : 0;
  for (uint64_t i = first; i < n; ++i) {
    const Record& r = recs_[i % kEntries];
    hang::OpEntry op;
    for (int attempt = 0; attempt < 1000; ++attempt) {
      const uint32_t v1 = r.version.load(std::memory_order_acquire);
      if (v1 & 1) continue;
      const uint32_t attrs = r.attrs.load(std::memory_order_acquire);
      const CallTag tag{r.tagWord.load(std::memory_order_relaxed), r.count.load(std::memory_order_relaxed)};
      op = hang::OpEntry{};
      op.seq = r.seq.load(std::memory_order_relaxed);
      op.p2p = (attrs >> 2) & 1;
      op.count = tag.count;
      const uint32_t state = attrs & 3;
      op.state = state == kRunning ? "running" : state == kDone ? "done" : "failed";
      op.start = static_cast<double>(r.startNs.load(std::memory_order_relaxed)) * 1e-9;
      const int64_t endNs = r.endNs.load(std::memory_order_relaxed);
      op.end = endNs ? static_cast<double>(endNs) * 1e-9 : -1;
      const uint64_t progress = r.progress.load(std::memory_order_relaxed);
      op.nsteps = static_cast<uint32_t>(progress & 0xffffff);
      op.step = state == kDone ? op.nsteps : static_cast<uint32_t>((progress >> 24) & 0xffffff);
      const uint32_t nw = state == kDone ? 0 : std::min(static_cast<uint32_t>(progress >> 48) & 0xff, kMaxWaits);
      const bool ownsWaits = waitOwner_.load(std::memory_order_relaxed) == i;
      for (uint32_t w = 0; ownsWaits && w < nw; ++w) {
        const int32_t x = waits_[w].load(std::memory_order_relaxed);
        op.waits.push_back(hang::Wait{x / 2, (x & 1) != 0});
      }
      if (op.p2p) {
        op.coll = "send/recv";
      } else {
        const CallFields f = decodeCallTag(tag);
        op.coll = callCodeName(f.code);
        op.dtype = kernels::dtypeName(static_cast<strataDataType_t>(f.dtype));
        const char* opName = callOpName(f.op);
        op.op = opName ? opName : "";
        op.root = f.root == kCallNoRoot ? -1 : static_cast<long>(f.root);
        op.algo = algoName(static_cast<Algo>((attrs >> 8) & 0xff));
      }
      std::atomic_thread_fence(std::memory_order_acquire);
      if (r.version.load(std::memory_order_relaxed) == v1) break;
    }
    c.ops.push_back(std::move(op));
  }
  return c;
}

std::string opRingDumpText(const char* reason) {
  std::lock_guard<std::mutex> lock(registry().mu);
  return dumpText(reason);
}

void dumpOpRings(const char* reason, bool stderrWithoutDir) {
  const std::string& dir = config().dumpDir;
  if (dir.empty() && !stderrWithoutDir) return;
  std::lock_guard<std::mutex> lock(registry().mu);
  const std::string text = dumpText(reason);
  if (dir.empty()) {
    (void)writeAll(2, text);
    return;
  }
  (void)mkdir(dir.c_str(), 0755);  // one level, if missing
  const std::string path = dir + "/" + hang::dumpFileName(topology::hostName(), getpid());
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && writeAll(fd, text);
  if (fd >= 0) ::close(fd);
  ok = ok && rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) log::warn("cannot write the op-ring dump {}: {}", path, strerror(errno));
  else log::info("op-ring dump ({}) written to {}", reason, path);
}

}  // namespace strata
