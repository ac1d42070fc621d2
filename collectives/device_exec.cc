// device_exec.cc: the CUDA path of the executor (see device_exec.h): buffer classification,
// per-communicator device connections (arena exchange over the bootstrap, CUDA IPC or direct
// pointers, the network proxy for peers on other nodes), stream-ordered enqueueing of planned
// kernels, and the watchdog.
#include "collectives/device_exec.h"
#include "transport/shared_buffers.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "collectives/comm.h"
#include "collectives/device_plan.h"
#include "collectives/device_proxy.h"
#include "kernels/device/device_launch.h"
#include "kernels/host_reduce.h"
#include "transport/config.h"
#include "transport/log.h"

namespace strata {
namespace {

Status cudaFailure(cudaError_t e, const char* what) {
  cudaGetLastError();  // clear the sticky-free error state of the runtime
  return Status(strataUnhandledCudaError, fmt::format("{}: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e)));
}

#define STRATA_CUDA_TRY(call)                                   \
  do {                                                          \
    const cudaError_t e_ = (call);                              \
    if (e_ != cudaSuccess) return cudaFailure(e_, #call);       \
  } while (0)

/// Restores the caller's current device on scope exit.
struct DeviceGuard {
  int prev = -1;
  explicit DeviceGuard(int dev) {
    if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
    if (prev != dev) cudaSetDevice(dev);
  }
  ~DeviceGuard() {
    int cur = -1;
    if (prev >= 0 && cudaGetDevice(&cur) == cudaSuccess && cur != prev) cudaSetDevice(prev);
  }
};

/// What each rank tells the others at setup.
struct ArenaInfo {
  cudaIpcMemHandle_t handle;
  uint64_t base = 0;  ///< the arena in the owner's address space (for threads of one process)
  uint64_t hostHash = 0, processHash = 0;
  uint64_t total = 0, slotBytes = 0, llSlotBytes = 0;
  int32_t device = -1, pid = 0, nch = 0, ok = 0;
  int32_t proxied = 0;  ///< peers this rank reaches through the network proxy
  char error[192] = {};
};

/// The proxy's shadows: pinned host memory mapped into the device address space, which kernels
/// read and write over the bus and the proxy thread hands to the network transports.
class PinnedMappedMemory final : public ProxyMemory {
 public:
  Status alloc(size_t bytes, char** host, char** device) override {
    void* h = nullptr;
    STRATA_CUDA_TRY(cudaHostAlloc(&h, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(h, 0, bytes);
    void* d = nullptr;
    const cudaError_t e = cudaHostGetDevicePointer(&d, h, 0);
    if (e != cudaSuccess) {
      cudaFreeHost(h);
      return cudaFailure(e, "cudaHostGetDevicePointer (device proxy shadows)");
    }
    *host = static_cast<char*>(h);
    *device = static_cast<char*>(d);
    return OkStatus();
  }
  void free(char* host) override {
    cudaFreeHost(host);
    cudaGetLastError();
  }
};

bool isCapturing(cudaStream_t s) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(s, &st) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return st != cudaStreamCaptureStatusNone;
}

}  // namespace

struct DeviceState {
  Comm* comm = nullptr;
  int device = -1;
  int threads = 512;
  dev::ArenaLayout layout;
  char* arena = nullptr;
  std::vector<char*> opened;  ///< peer arenas mapped through CUDA IPC (closed at the end)
  dev::PeerConn* conns = nullptr;
  uint32_t* flags = nullptr;  ///< pinned, mapped: [0] abort (host -> kernels), [1] error (kernels -> host)
  cudaStream_t setupStream = nullptr;
  std::vector<cudaEvent_t> joinEvents;  ///< for groups whose operations use several streams
  std::vector<int> peerPids;            ///< pid per rank when it is another process of this machine, else 0
  std::unique_ptr<DeviceProxy> proxy;   ///< peers on other nodes (null when every peer is mapped)
  DevPlanParams params;
  std::vector<DevLaunch> launches;
  std::vector<DevP2P> p2p;
  char* scratch = nullptr;  ///< staging for in-place all-to-all (grows, outside capture only)
  size_t scratchBytes = 0;
  struct PreCopy {
    size_t beforeLaunch;
    const void* src;
    void* dst;
    size_t bytes;
  };
  std::vector<PreCopy> preCopies;

  std::mutex mu;  ///< guards the fields below against the watchdog
  cudaEvent_t lastEvent = nullptr;
  cudaStream_t lastStream = nullptr;
  bool haveLast = false;
  std::chrono::steady_clock::time_point lastEnqueue;

  std::thread watchdog;
  std::mutex stopMu;
  std::condition_variable stopCv;
  bool stop = false;

  void raiseAbort() {
    if (flags) __atomic_store_n(&flags[0], 1u, __ATOMIC_RELEASE);
  }
  /// Enqueued device work has not completed yet.
  bool workPending() {
    std::lock_guard<std::mutex> lock(mu);
    if (!haveLast) return false;
    const cudaError_t q = cudaEventQuery(lastEvent);
    if (q != cudaSuccess && q != cudaErrorNotReady) cudaGetLastError();
    return q == cudaErrorNotReady;
  }
  void watch();
  ~DeviceState();
};

void DeviceState::watch() {
  bool reported = false;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(stopMu);
      if (stopCv.wait_for(lock, std::chrono::milliseconds(20), [&] { return stop; })) return;
    }
    if (comm->aborted() || comm->failed()) raiseAbort();
    if (!reported && __atomic_load_n(&flags[1], __ATOMIC_ACQUIRE) != 0) {
      reported = true;
      comm->fail(Status(strataRemoteError, fmt::format("rank {}: a device collective stopped waiting for its peers "
                                                       "(the communicator was aborted or a peer failed)",
                                                       comm->rank())));
    }
    bool pending = false;
    std::chrono::steady_clock::time_point since;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (haveLast) {
        const cudaError_t q = cudaEventQuery(lastEvent);
        pending = q == cudaErrorNotReady;
        if (q != cudaSuccess && q != cudaErrorNotReady) cudaGetLastError();
        since = lastEnqueue;
      }
    }
    if (!pending || comm->failed()) continue;
    for (int p = 0; p < static_cast<int>(peerPids.size()); ++p) {
      if (peerPids[p] == 0) continue;
      if (::kill(peerPids[p], 0) != 0 && errno == ESRCH) {
        comm->fail(Status(strataRemoteError, fmt::format("rank {}: peer rank {} (pid {}) exited while a device "
                                                         "collective was waiting on it",
                                                         comm->rank(), p, peerPids[p])));
        raiseAbort();
        break;
      }
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
    if (!comm->failed() && waited > config().timeoutSec) {
      comm->fail(Status(strataTimeout, fmt::format("rank {}: device work enqueued {:.0f} s ago has not completed "
                                                   "(STRATA_TIMEOUT={}); peers stopped participating",
                                                   comm->rank(), waited, config().timeoutSec)));
      raiseAbort();
    }
  }
}

DeviceState::~DeviceState() {
  {
    std::lock_guard<std::mutex> lock(stopMu);
    stop = true;
  }
  stopCv.notify_all();
  if (watchdog.joinable()) watchdog.join();
  DeviceGuard guard(device >= 0 ? device : 0);
  if (comm && (comm->aborted() || comm->failed())) raiseAbort();
  if (haveLast) {
    // Let enqueued work finish (or give up, once aborted) before its memory goes away.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(config().timeoutSec);
    while (cudaEventQuery(lastEvent) == cudaErrorNotReady) {
      if (std::chrono::steady_clock::now() > deadline) raiseAbort();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    cudaGetLastError();
  }
  proxy.reset();  // sends what the kernels posted, says goodbye; then its shadows go
  for (char* p : opened) cudaIpcCloseMemHandle(p);
  if (conns) cudaFree(conns);
  if (scratch) cudaFree(scratch);
  if (arena) cudaFree(arena);
  if (flags) cudaFreeHost(flags);
  if (lastEvent) cudaEventDestroy(lastEvent);
  for (cudaEvent_t e : joinEvents) cudaEventDestroy(e);
  if (setupStream) cudaStreamDestroy(setupStream);
  cudaGetLastError();
}

void DeviceStateDeleter::operator()(DeviceState* s) const { delete s; }

int cudaDeviceCountCached() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

Status classifyBuffers(const char* what, const void* a, const void* b, int* device) {
  *device = -1;
  if (cudaDeviceCountCached() == 0) return OkStatus();
  auto where = [](const void* p) {
    if (!p) return -2;  // not given
    cudaPointerAttributes at{};
    if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
      cudaGetLastError();
      return -1;
    }
    return (at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged) ? at.device : -1;
  };
  const int da = where(a), db = where(b);
  if (da != -2 && db != -2 && da != db) {
    auto name = [](int d) { return d < 0 ? std::string("host memory") : fmt::format("memory of CUDA device {}", d); };
    return invalidArgument("{}: sendbuff is {} but recvbuff is {}; both must be host memory or both on one device",
                           what, name(da), name(db));
  }
  *device = da >= 0 ? da : (db >= 0 ? db : -1);
  return OkStatus();
}

Status memAlloc(void** ptr, size_t size) {
  if (cudaDeviceCountCached() > 0) {
    STRATA_CUDA_TRY(cudaMalloc(ptr, size));
    return OkStatus();
  }
  return allocHostBuffer(ptr, size);
}

Status memFree(void* ptr) {
  if (!ptr) return OkStatus();
  if (cudaDeviceCountCached() > 0) {
    cudaPointerAttributes at{};
    if (cudaPointerGetAttributes(&at, ptr) == cudaSuccess && at.type == cudaMemoryTypeDevice) {
      STRATA_CUDA_TRY(cudaFree(ptr));
      return OkStatus();
    }
    cudaGetLastError();
  }
  freeHostBuffer(ptr);
  return OkStatus();
}

int commCudaDevice(Comm& c) {
  if (c.device()) return c.device()->device;
  int dev = -1;
  if (cudaDeviceCountCached() == 0 || cudaGetDevice(&dev) != cudaSuccess) return -1;
  return dev;
}

namespace {

/// Collective: allocates and exchanges this rank's FIFO arena, maps the peers' arenas.
Status setupDevice(Comm& c, int device, std::unique_ptr<DeviceState, DeviceStateDeleter>* out) {
  std::unique_ptr<DeviceState, DeviceStateDeleter> s(new DeviceState);
  s->comm = &c;
  s->device = device;
  const Config& cfg = config();
  const int n = c.nranks(), r = c.rank();
  s->threads = cfg.cudaThreads;
  s->layout.nranks = n;
  s->layout.nch = cfg.cudaChannels;
  s->layout.slotBytes = cfg.cudaSlotBytes;
  s->layout.llSlotBytes = cfg.cudaLLSlotBytes;
  s->params = DevPlanParams::fromConfig(r, n);
  s->params.deterministic = c.deterministic();  // the same on every rank (comm.h)
  DeviceGuard guard(device);
  // Capture-safe: allocation and zeroing on a private stream, allowed while another stream captures.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  ArenaInfo mine;
  const RankInfo& self = c.bootstrap().infos()[r];
  mine.hostHash = self.hostHash;
  mine.processHash = self.processHash;
  mine.pid = self.pid;
  mine.device = device;
  mine.nch = s->layout.nch;
  mine.slotBytes = s->layout.slotBytes;
  mine.llSlotBytes = s->layout.llSlotBytes;
  mine.total = s->layout.totalBytes();
  // Peers the host path reaches over the network (other nodes, virtual nodes, or every peer under
  // STRATA_TRANSPORT=tcp) cannot be mapped: their connections go through the network proxy.
  const std::vector<uint8_t> proxied = proxiedPeers(c.transports(), n);
  for (uint8_t x : proxied) mine.proxied += x;
  Status local = [&]() -> Status {
    STRATA_CUDA_TRY(cudaStreamCreateWithFlags(&s->setupStream, cudaStreamNonBlocking));
    STRATA_CUDA_TRY(cudaHostAlloc(reinterpret_cast<void**>(&s->flags), 64, cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(s->flags, 0, 64);
    STRATA_CUDA_TRY(cudaEventCreateWithFlags(&s->lastEvent, cudaEventDisableTiming));
    if (mine.total > 0) {
      STRATA_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&s->arena), mine.total));
      STRATA_CUDA_TRY(cudaMemsetAsync(s->arena, 0, mine.total, s->setupStream));
      STRATA_CUDA_TRY(cudaStreamSynchronize(s->setupStream));
      STRATA_CUDA_TRY(cudaIpcGetMemHandle(&mine.handle, s->arena));
    }
    mine.base = reinterpret_cast<uint64_t>(s->arena);
    return OkStatus();
  }();
  mine.ok = local.ok() ? 1 : 0;
  if (!local.ok()) std::snprintf(mine.error, sizeof mine.error, "%s", local.message().c_str());
  std::vector<ArenaInfo> all(static_cast<size_t>(n));
  Status st = c.bootstrap().allGather(&mine, all.data(), sizeof(ArenaInfo));
  cudaThreadExchangeStreamCaptureMode(&mode);
  if (!st.ok()) return st;
  for (int p = 0; p < n; ++p) {
    if (!all[p].ok) return Status(strataUnhandledCudaError, fmt::format("rank {} could not set up device memory: {}", p, all[p].error));
    if (all[p].nch != mine.nch || all[p].slotBytes != mine.slotBytes || all[p].llSlotBytes != mine.llSlotBytes)
      return invalidUsage("rank {} uses different STRATA_CUDA_CHANNELS/SLOT_BYTES/LL_SLOT_BYTES than rank {}; set them "
                          "alike on every rank", p, r);
    if (all[p].hostHash != mine.hostHash && !proxied[p])
      return internalError("device collectives: rank {} is on another machine than rank {} but not reached over "
                           "the network", p, r);
  }
  bool anyProxied = false;
  for (int p = 0; p < n; ++p) anyProxied = anyProxied || all[p].proxied > 0;
  s->params.simpleOnly = anyProxied;  // the proxy forwards whole Simple steps (device_plan.h)
  if (anyProxied && r == 0 && cfg.cudaProto == "ll")
    log::warn("STRATA_CUDA_PROTO=ll does not apply: peers on other nodes go through the network proxy, which "
              "carries the Simple protocol only");
  std::vector<char*> bases(static_cast<size_t>(n), nullptr);
  s->peerPids.assign(static_cast<size_t>(n), 0);
  bases[r] = s->arena;
  std::vector<dev::PeerConn> conns(static_cast<size_t>(s->layout.nch) * n);
  cudaThreadExchangeStreamCaptureMode(&mode);
  Status mapped = [&]() -> Status {
    for (int p = 0; p < n; ++p) {
      if (p == r || proxied[p]) continue;
      if (all[p].processHash == mine.processHash) {
        bases[p] = reinterpret_cast<char*>(all[p].base);
        if (all[p].device != device) {
          int can = 0;
          STRATA_CUDA_TRY(cudaDeviceCanAccessPeer(&can, device, all[p].device));
          if (!can)
            return invalidUsage("rank {} (device {}) cannot access rank {}'s device {} directly (no P2P between them)",
                                r, device, p, all[p].device);
          const cudaError_t e = cudaDeviceEnablePeerAccess(all[p].device, 0);
          if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) return cudaFailure(e, "cudaDeviceEnablePeerAccess");
          cudaGetLastError();
        }
      } else {
        void* ptr = nullptr;
        STRATA_CUDA_TRY(cudaIpcOpenMemHandle(&ptr, all[p].handle, cudaIpcMemLazyEnablePeerAccess));
        bases[p] = static_cast<char*>(ptr);
        s->opened.push_back(bases[p]);
        s->peerPids[p] = all[p].pid;
      }
    }
    s->layout.buildConns(r, bases.data(), conns.data());
    STRATA_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&s->conns), conns.size() * sizeof(dev::PeerConn)));
    return OkStatus();
  }();
  cudaThreadExchangeStreamCaptureMode(&mode);
  // Every rank must have zeroed and mapped before any kernel writes into a peer's arena.
  int okMine = mapped.ok() ? 1 : 0;
  std::vector<int> oks(static_cast<size_t>(n));
  st = c.bootstrap().allGather(&okMine, oks.data(), sizeof(int));
  if (!st.ok()) return st;
  if (!mapped.ok()) return mapped;
  for (int p = 0; p < n; ++p)
    if (!oks[p]) return Status(strataUnhandledCudaError, fmt::format("rank {} could not map its peers' device memory", p));
  DeviceState* raw = s.get();
  // The proxy (collective: every rank takes part when any rank has a proxied peer), then the
  // connection table, which points proxied connections at its shadows.
  cudaThreadExchangeStreamCaptureMode(&mode);
  Status wired = [&]() -> Status {
    if (anyProxied) {
      ProxyGeometry g;
      g.rank = r;
      g.nranks = n;
      g.nch = s->layout.nch;
      g.slotBytes = s->layout.slotBytes;
      ProxyHooks hooks;
      hooks.abortFlag = s->flags;
      hooks.onError = [raw](const Status& failure) {
        raw->comm->fail(failure);
        raw->raiseAbort();
      };
      hooks.busy = [raw] { return raw->workPending(); };
      STRATA_RETURN_IF_ERROR(DeviceProxy::create(c.bootstrap(), c.layout(), g, proxied,
                                                 std::make_unique<PinnedMappedMemory>(), std::move(hooks), &s->proxy));
      s->proxy->wire(conns.data());
    }
    STRATA_CUDA_TRY(cudaMemcpyAsync(s->conns, conns.data(), conns.size() * sizeof(dev::PeerConn),
                                    cudaMemcpyHostToDevice, s->setupStream));
    STRATA_CUDA_TRY(cudaStreamSynchronize(s->setupStream));
    return OkStatus();
  }();
  cudaThreadExchangeStreamCaptureMode(&mode);
  okMine = wired.ok() ? 1 : 0;
  st = c.bootstrap().allGather(&okMine, oks.data(), sizeof(int));
  if (!st.ok()) return st;
  if (!wired.ok()) return wired;
  for (int p = 0; p < n; ++p)
    if (!oks[p]) return Status(strataUnhandledCudaError, fmt::format("rank {} could not set up its device proxy", p));
  s->watchdog = std::thread([raw] { raw->watch(); });
  log::info("rank {}: device connections ready on CUDA device {} ({} channels, {} KiB arena{})", r, device,
            s->layout.nch, mine.total >> 10,
            s->proxy ? fmt::format("; {} peers through the network proxy, {} KiB of pinned host memory", mine.proxied,
                                   s->proxy->layout().totalBytes() >> 10)
                     : std::string());
  *out = std::move(s);
  return OkStatus();
}

}  // namespace

Status prepareDevice(const std::vector<Comm*>& comms, const std::vector<int>& devices) {
  std::vector<size_t> todo;
  for (size_t i = 0; i < comms.size(); ++i)
    if (!comms[i]->device()) todo.push_back(i);
  if (todo.empty()) return OkStatus();
  std::vector<Status> results(todo.size());
  if (todo.size() == 1) {
    results[0] = setupDevice(*comms[todo[0]], devices[todo[0]], &comms[todo[0]]->device());
  } else {
    std::vector<std::thread> threads;
    for (size_t k = 0; k < todo.size(); ++k)
      threads.emplace_back([&, k] { results[k] = setupDevice(*comms[todo[k]], devices[todo[k]], &comms[todo[k]]->device()); });
    for (auto& t : threads) t.join();
  }
  for (const Status& st : results)
    if (!st.ok()) return st;
  return OkStatus();
}

namespace {

Status toDevCall(Comm& c, const CollCall& k, DevCall* out) {
  out->coll = k.coll;
  out->send = k.sendbuff;
  out->recv = k.recvbuff;
  out->count = k.count;
  out->dtype = k.dtype;
  out->root = k.root;
  switch (k.op) {
    case strataSum: out->op = kernels::RedKind::Sum; break;
    case strataProd: out->op = kernels::RedKind::Prod; break;
    case strataMax: out->op = kernels::RedKind::Max; break;
    case strataMin: out->op = kernels::RedKind::Min; break;
    case strataAvg: out->op = kernels::RedKind::Sum; out->avg = true; break;
    default: {
      const CustomOp* op = c.customOp(k.op);
      if (!op) return invalidArgument("{}: op {} is not a live custom op", collName(k.coll), static_cast<int>(k.op));
      out->op = kernels::RedKind::Sum;
      out->premul = true;
      std::memcpy(&out->scalarBits, op->scalar, kernels::dtypeSize(k.dtype));
    }
  }
  return OkStatus();
}

}  // namespace

namespace {

/// Makes the staging buffer at least `bytes`: waits for this communicator's enqueued work before
/// freeing a smaller one. Not while capturing (allocation would not be part of the graph).
Status growScratch(DeviceState& s, size_t bytes, bool capturing) {
  if (s.scratchBytes >= bytes) return OkStatus();
  if (capturing)
    return invalidUsage("in-place device all-to-all of {} bytes inside a CUDA graph capture needs a staging buffer: "
                        "run it once outside the capture first", bytes);
  if (s.scratch) {
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (s.haveLast) STRATA_CUDA_TRY(cudaEventSynchronize(s.lastEvent));
    }
    STRATA_CUDA_TRY(cudaFree(s.scratch));
    s.scratch = nullptr;
    s.scratchBytes = 0;
  }
  STRATA_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&s.scratch), bytes));
  s.scratchBytes = bytes;
  return OkStatus();
}

}  // namespace

Status enqueueDeviceOps(Comm& c, const std::vector<DeviceOp>& ops) {
  DeviceState* s = c.device().get();
  if (!s) return internalError("device operations enqueued before the device setup");
  if (ops.empty()) return OkStatus();
  const cudaStream_t leader = static_cast<cudaStream_t>(ops[0].stream);
  const bool capturing = isCapturing(leader);
  std::vector<cudaStream_t> others;
  for (const DeviceOp& op : ops) {
    const cudaStream_t st = static_cast<cudaStream_t>(op.stream);
    if (st != leader && std::find(others.begin(), others.end(), st) == others.end()) others.push_back(st);
  }
  if (capturing && !others.empty())
    return invalidUsage("a group captured into a CUDA graph must put all of a communicator's operations on one stream");

  // Plan first, then enqueue.
  DeviceGuard guard(s->device);
  s->launches.clear();
  s->p2p.clear();
  s->preCopies.clear();
  // In-place all-to-alls stage their input (sends would read overwritten data): one buffer, grown
  // once for the group's largest, since they run one after the other on the stream.
  size_t stage = 0;
  for (const DeviceOp& op : ops)
    if (op.isColl && op.coll.coll == CollType::AllToAll && op.coll.sendbuff == op.coll.recvbuff && c.nranks() > 1)
      stage = std::max(stage, op.coll.count * kernels::dtypeSize(op.coll.dtype) * c.nranks());
  if (stage) STRATA_RETURN_IF_ERROR(growScratch(*s, stage, capturing));
  for (const DeviceOp& op : ops) {
    if (op.device != s->device)
      return invalidArgument("{}: the buffers are on CUDA device {} but this communicator's device work runs on device {}",
                             op.isColl ? collName(op.coll.coll) : (op.p2p.isSend ? "Send" : "Recv"), op.device, s->device);
    if (op.isColl) {
      DevCall call;
      STRATA_RETURN_IF_ERROR(toDevCall(c, op.coll, &call));
      if (call.coll == CollType::AllToAll && call.send == call.recv && call.count > 0 && c.nranks() > 1) {
        const size_t bytes = call.count * kernels::dtypeSize(call.dtype) * c.nranks();
        s->preCopies.push_back({s->launches.size(), call.send, s->scratch, bytes});
        call.send = s->scratch;
      }
      STRATA_RETURN_IF_ERROR(planDeviceCollective(s->params, call, &s->launches));
    } else {
      s->p2p.push_back(DevP2P{op.p2p.isSend, op.p2p.buf, op.p2p.count * kernels::dtypeSize(op.p2p.dtype), op.p2p.peer});
    }
  }
  if (!s->p2p.empty()) STRATA_RETURN_IF_ERROR(planDeviceP2P(s->params, s->p2p, &s->launches));
  if (s->proxy)  // proxied connections have no LL slots: a kernel using them would fault
    for (const DevLaunch& l : s->launches) {
      bool ll = l.work.coll != dev::Coll::P2P && l.work.proto == dev::Proto::LL;
      for (int i = 0; i < l.work.nops; ++i) ll = ll || l.work.ops[i].proto == dev::Proto::LL;
      if (ll) return internalError("device launch with the LL protocol on a communicator with proxied peers");
    }

  std::lock_guard<std::mutex> lock(s->mu);
  // Streams join the leader; the leader follows this communicator's previous operation.
  while (s->joinEvents.size() < others.size()) {
    cudaEvent_t e;
    STRATA_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    s->joinEvents.push_back(e);
  }
  for (size_t i = 0; i < others.size(); ++i) {
    STRATA_CUDA_TRY(cudaEventRecord(s->joinEvents[i], others[i]));
    STRATA_CUDA_TRY(cudaStreamWaitEvent(leader, s->joinEvents[i], 0));
  }
  if (!capturing && s->haveLast && s->lastStream != leader) STRATA_CUDA_TRY(cudaStreamWaitEvent(leader, s->lastEvent, 0));
  size_t pre = 0;
  for (size_t li = 0; li < s->launches.size(); ++li) {
    for (; pre < s->preCopies.size() && s->preCopies[pre].beforeLaunch == li; ++pre) {
      const DeviceState::PreCopy& k = s->preCopies[pre];
      STRATA_CUDA_TRY(cudaMemcpyAsync(k.dst, k.src, k.bytes, cudaMemcpyDeviceToDevice, leader));
    }
    DevLaunch& l = s->launches[li];
    l.work.conns = s->conns;
    l.work.abortFlag = s->flags;
    l.work.errorFlag = s->flags + 1;
    if (s->proxy) s->proxy->wantLaunch(l.work);  // connect send/recv peers before the kernel needs them
    const int e = dev::launchWork(l.work, l.blocks, s->threads, leader);
    if (e != 0) return cudaFailure(static_cast<cudaError_t>(e), "collective kernel launch");
  }
  if (s->proxy) s->proxy->kick();
  if (capturing) return OkStatus();
  STRATA_CUDA_TRY(cudaEventRecord(s->lastEvent, leader));
  for (cudaStream_t o : others) STRATA_CUDA_TRY(cudaStreamWaitEvent(o, s->lastEvent, 0));
  s->lastStream = leader;
  s->haveLast = true;
  s->lastEnqueue = std::chrono::steady_clock::now();
  return OkStatus();
}

}  // namespace strata
