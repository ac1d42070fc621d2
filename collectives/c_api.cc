// c_api.cc: the native C API (strata.h) over the communicator core: argument checks, error
// reporting (return code + last-error text), group semantics, and the blocking calls.
#include <algorithm>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "collectives/arg_check.h"
#include "collectives/comm.h"
#include "collectives/tuner.h"
#include "collectives/launch_env.h"
#include "collectives/task.h"
#include "kernels/host_reduce.h"
#include "strata/strata.h"
#include "transport/bootstrap.h"
#include "transport/config.h"
#include "transport/shared_buffers.h"

#define STRATA_API extern "C" __attribute__((visibility("default")))

namespace strata {
namespace {

thread_local std::string tlsLastError;

strataResult_t report(Comm* c, const Status& st) {
  if (!st.ok()) {
    tlsLastError = st.message();
    if (c) c->setLastError(st.message());
  }
  return st.code();
}

/// Checks a handle; on success *out is the live communicator.
Status checkComm(strataComm_t handle, Comm** out) {
  if (handle == nullptr) return invalidArgument("communicator is NULL");
  if (!isLiveComm(handle)) return invalidArgument("communicator {} is not live (destroyed or never created)",
                                                  static_cast<void*>(handle));
  Comm* c = static_cast<Comm*>(handle);
  if (c->failed()) {
    Status f = c->failedStatus();
    return Status(c->asyncError(), "communicator failed earlier: " + f.message());
  }
  *out = c;
  return OkStatus();
}

struct ActiveCall {
  explicit ActiveCall(Comm* c) : c_(c) { if (c_) c_->activeCalls()++; }
  ~ActiveCall() { if (c_) c_->activeCalls()--; }
  ActiveCall(const ActiveCall&) = delete;
  ActiveCall& operator=(const ActiveCall&) = delete;
  Comm* c_;
};

bool isRooted(CollType c) {
  return c == CollType::Broadcast || c == CollType::Reduce || c == CollType::Gather || c == CollType::Scatter;
}

Status validateColl(Comm& c, const CollCall& k) {
  const char* name = collName(k.coll);
  if (k.dtype < 0 || k.dtype >= strataNumTypes)
    return invalidArgument("{}: invalid datatype {}", name, static_cast<int>(k.dtype));
  const size_t es = kernels::dtypeSize(k.dtype);
  if (isReduction(k.coll)) {
    if (k.op < 0) return invalidArgument("{}: invalid reduction op {}", name, static_cast<int>(k.op));
    if (k.op >= strataNumOps) {
      const CustomOp* op = c.customOp(k.op);
      if (!op) return invalidArgument("{}: invalid reduction op {} (not built in, not a live custom op)", name,
                                      static_cast<int>(k.op));
      if (op->dtype != k.dtype)
        return invalidArgument("{}: op {} was created for {} but the call uses {}", name, static_cast<int>(k.op),
                               kernels::dtypeName(op->dtype), kernels::dtypeName(k.dtype));
    }
  }
  const int n = c.nranks(), r = c.rank();
  if (isRooted(k.coll) && (k.root < 0 || k.root >= n))
    return invalidArgument("{}: root {} is out of range [0, {})", name, k.root, n);
  if (k.count > (SIZE_MAX / 2) / es / static_cast<size_t>(n))
    return invalidArgument("{}: count {} overflows the address space", name, k.count);
  if (k.count == 0) return OkStatus();
  const bool root = r == k.root;
  bool needSend = true, needRecv = true;
  switch (k.coll) {
    case CollType::Broadcast: needSend = root; break;
    case CollType::Scatter: needSend = root; break;
    case CollType::Reduce: needRecv = root; break;
    case CollType::Gather: needRecv = root; break;
    default: break;
  }
  if (needSend && !k.sendbuff) return invalidArgument("{}: sendbuff is NULL with count {}", name, k.count);
  if (needRecv && !k.recvbuff) return invalidArgument("{}: recvbuff is NULL with count {}", name, k.count);
  return OkStatus();
}

struct GroupOp {
  Comm* comm;
  bool isColl;
  CollCall coll;
  P2PCall p2p;
  int cudaDev = -1;        ///< >= 0: device buffers on this CUDA device (enqueued on `stream`)
  void* stream = nullptr;
};

struct GroupState {
  int depth = 0;
  std::vector<GroupOp> ops;
  std::vector<std::unique_ptr<Task>> pool;
  std::vector<std::vector<Task*>> lists;
  std::vector<Comm*> comms;
  std::vector<P2PCall> p2p;
  std::vector<DeviceOp> deviceOps;
  std::vector<int> devices;
  RunScratch run;
  strataComm_t lastComm = nullptr;  ///< last handle found live, valid while the generation holds
  uint64_t lastGeneration = 0;
  Task* task(size_t i) {
    while (pool.size() <= i) pool.push_back(std::make_unique<Task>());
    return pool[i].get();
  }
};
thread_local GroupState tlsGroup;

Status runHostGroup(GroupState& g);

/// Enqueues the group's device operations: sets up device connections where missing (all comms
/// together), then per communicator its operations in call order; removes them from g.ops.
Status enqueueDeviceGroup(GroupState& g) {
  g.comms.clear();
  g.devices.clear();
  for (const GroupOp& op : g.ops)
    if (op.cudaDev >= 0 && std::find(g.comms.begin(), g.comms.end(), op.comm) == g.comms.end()) {
      g.comms.push_back(op.comm);
      g.devices.push_back(op.cudaDev);
    }
  Status st = prepareDevice(g.comms, g.devices);
  for (size_t ci = 0; ci < g.comms.size() && st.ok(); ++ci) {
    g.deviceOps.clear();
    for (const GroupOp& op : g.ops)
      if (op.cudaDev >= 0 && op.comm == g.comms[ci])
        g.deviceOps.push_back(DeviceOp{op.isColl, op.coll, op.p2p, op.stream, op.cudaDev});
    st = enqueueDeviceOps(*g.comms[ci], g.deviceOps);
    if (!st.ok()) g.comms[ci]->setLastError(st.message());
  }
  g.ops.erase(std::remove_if(g.ops.begin(), g.ops.end(), [](const GroupOp& op) { return op.cudaDev >= 0; }),
              g.ops.end());
  return st;
}

/// Runs the queued ops: device ones are enqueued on their streams; host ones run per
/// communicator, collectives in call order then its sends/receives as one batch; all
/// communicators concurrently.
Status runGroup(GroupState& g) {
  Status deviceSt = OkStatus();
  for (const GroupOp& op : g.ops)
    if (op.cudaDev >= 0) {
      deviceSt = enqueueDeviceGroup(g);
      break;
    }
  if (g.ops.empty()) return deviceSt;
  Status hostSt = runHostGroup(g);
  return deviceSt.ok() ? hostSt : deviceSt;
}

Status runHostGroup(GroupState& g) {
  if (g.ops.size() == 1 && g.ops[0].isColl && !config().checkArgs) {
    // A blocking collective outside a group: one comm, one task.
    Comm* c = g.ops[0].comm;
    Task* t = g.task(0);
    t->setCollective(*c, g.ops[0].coll);
    g.lists.resize(1);
    g.lists[0].clear();
    g.lists[0].push_back(t);
    c->activeCalls()++;
    Status st = runTasks(g.lists, g.run);
    c->activeCalls()--;
    if (!st.ok()) c->setLastError(st.message());
    g.ops.clear();
    return st;
  }
  g.comms.clear();
  for (const GroupOp& op : g.ops)
    if (std::find(g.comms.begin(), g.comms.end(), op.comm) == g.comms.end()) g.comms.push_back(op.comm);
  g.lists.resize(g.comms.size());
  size_t used = 0;
  for (size_t ci = 0; ci < g.comms.size(); ++ci) {
    Comm* c = g.comms[ci];
    auto& list = g.lists[ci];
    list.clear();
    g.p2p.clear();
    for (const GroupOp& op : g.ops) {
      if (op.comm != c) continue;
      if (op.isColl) {
        Task* t = g.task(used++);
        t->setCollective(*c, op.coll);
        list.push_back(t);
      } else {
        g.p2p.push_back(op.p2p);
      }
    }
    if (!g.p2p.empty()) {
      Task* t = g.task(used++);
      t->setP2P(*c, g.p2p);
      list.push_back(t);
    }
  }
  // Debug mode: all ranks must issue the same collectives (one communicator per group only: with
  // several, one thread drives several ranks and a blocking exchange would deadlock).
  if (config().checkArgs && g.comms.size() == 1) {
    std::vector<const CollCall*> calls;
    for (const GroupOp& op : g.ops)
      if (op.isColl) calls.push_back(&op.coll);
    Status st = checkSameCollectives(*g.comms[0], calls);
    if (!st.ok()) {
      g.ops.clear();
      g.comms[0]->setLastError(st.message());
      return st;
    }
  }
  for (Comm* c : g.comms) c->activeCalls()++;
  Status st = runTasks(g.lists, g.run);
  for (Comm* c : g.comms) c->activeCalls()--;
  g.lists.resize(g.comms.size());
  if (!st.ok())
    for (Comm* c : g.comms) c->setLastError(st.message());
  g.ops.clear();
  return st;
}

/// checkComm with a per-thread cache of the last handle found live (see commRegistryGeneration).
Status checkCommCached(GroupState& g, strataComm_t handle, Comm** out) {
  const uint64_t gen = commRegistryGeneration();
  if (handle != nullptr && handle == g.lastComm && gen == g.lastGeneration) {
    Comm* c = static_cast<Comm*>(handle);
    if (!c->failed()) {
      *out = c;
      return OkStatus();
    }
  }
  Status st = checkComm(handle, out);
  if (st.ok()) {
    g.lastComm = handle;
    g.lastGeneration = gen;
  }
  return st;
}

/// The buffers a rank uses in a collective (others may be anything, as in NCCL).
void usedBuffers(const Comm& c, const CollCall& k, const void** a, const void** b) {
  const bool root = c.rank() == k.root;
  *a = k.sendbuff;
  *b = k.recvbuff;
  if ((k.coll == CollType::Broadcast || k.coll == CollType::Scatter) && !root) *a = nullptr;
  if ((k.coll == CollType::Reduce || k.coll == CollType::Gather) && !root) *b = nullptr;
}

strataResult_t submitColl(strataComm_t handle, const CollCall& call, void* stream = nullptr) {
  Comm* c = nullptr;
  Status st = checkCommCached(tlsGroup, handle, &c);
  if (st.ok()) st = validateColl(*c, call);
  int cudaDev = -1;
  if (st.ok() && call.count > 0) {
    const void *a, *b;
    usedBuffers(*c, call, &a, &b);
    st = classifyBuffers(collName(call.coll), a, b, &cudaDev);
  }
  if (!st.ok()) return report(c, st);
  GroupState& g = tlsGroup;
  g.ops.push_back(GroupOp{c, true, call, {}, cudaDev, stream});
  if (g.depth > 0) return strataSuccess;
  return report(c, runGroup(g));
}

strataResult_t submitP2P(strataComm_t handle, const P2PCall& call, void* stream = nullptr) {
  Comm* c = nullptr;
  Status st = checkCommCached(tlsGroup, handle, &c);
  const char* name = call.isSend ? "Send" : "Recv";
  if (st.ok() && (call.dtype < 0 || call.dtype >= strataNumTypes))
    st = invalidArgument("{}: invalid datatype {}", name, static_cast<int>(call.dtype));
  if (st.ok() && (call.peer < 0 || call.peer >= c->nranks()))
    st = invalidArgument("{}: peer {} is out of range [0, {})", name, call.peer, c->nranks());
  if (st.ok() && call.count > 0 && !call.buf) st = invalidArgument("{}: buffer is NULL with count {}", name, call.count);
  int cudaDev = -1;
  if (st.ok() && call.count > 0) st = classifyBuffers(name, call.buf, nullptr, &cudaDev);
  if (!st.ok()) return report(c, st);
  GroupState& g = tlsGroup;
  g.ops.push_back(GroupOp{c, false, {}, call, cudaDev, stream});
  if (g.depth > 0) return strataSuccess;
  return report(c, runGroup(g));
}

}  // namespace
}  // namespace strata

using namespace strata;

STRATA_API void strataConfigInit(strataConfig_t* config) {
  if (!config) return;
  std::memset(config, 0, sizeof(*config));
  config->size = sizeof(*config);
  config->blocking = 1;
}

STRATA_API strataResult_t strataGetVersion(int* version) {
  if (!version) return report(nullptr, invalidArgument("strataGetVersion: version is NULL"));
  *version = STRATA_VERSION_CODE;
  return strataSuccess;
}

STRATA_API strataResult_t strataGetUniqueId(strataUniqueId* uniqueId) {
  if (!uniqueId) return report(nullptr, invalidArgument("strataGetUniqueId: uniqueId is NULL"));
  Status st = configStatus();
  if (!st.ok()) return report(nullptr, st);
  // Under strata-run every rank gets the job's id, served by the launcher.
  const std::string& jobId = config().uniqueId;
  if (!jobId.empty()) {
    if (!uniqueIdFromHex(jobId, uniqueId))
      return report(nullptr, invalidArgument("STRATA_UNIQUE_ID is set but is not a valid strata id"));
    return strataSuccess;
  }
  return report(nullptr, createUniqueId(uniqueId, /*persistent=*/false));
}

STRATA_API strataResult_t strataCommInitRankConfig(strataComm_t* comm, int nranks, strataUniqueId uniqueId, int rank,
                                                   const strataConfig_t* config) {
  if (!comm) return report(nullptr, invalidArgument("CommInitRank: comm is NULL"));
  *comm = nullptr;
  if (nranks < 1) return report(nullptr, invalidArgument("CommInitRank: nranks {} < 1", nranks));
  if (rank < 0 || rank >= nranks)
    return report(nullptr, invalidArgument("CommInitRank: rank {} is out of range [0, {})", rank, nranks));
  std::unique_ptr<Comm> c;
  Status st = Comm::create(uniqueId, nranks, rank, config, &c);
  if (!st.ok()) return report(nullptr, st);
  registerComm(c.get());
  *comm = c.release();
  return strataSuccess;
}

STRATA_API strataResult_t strataCommInitRank(strataComm_t* comm, int nranks, strataUniqueId uniqueId, int rank) {
  return strataCommInitRankConfig(comm, nranks, uniqueId, rank, nullptr);
}

STRATA_API strataResult_t strataCommInitAll(strataComm_t* comms, int nranks) {
  if (!comms) return report(nullptr, invalidArgument("CommInitAll: comms is NULL"));
  if (nranks < 1) return report(nullptr, invalidArgument("CommInitAll: nranks {} < 1", nranks));
  strataUniqueId id;
  Status st = createUniqueId(&id, false);
  if (!st.ok()) return report(nullptr, st);
  std::vector<std::unique_ptr<Comm>> made(static_cast<size_t>(nranks));
  std::vector<Status> results(static_cast<size_t>(nranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] { results[r] = Comm::create(id, nranks, r, nullptr, &made[r]); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < nranks; ++r)
    if (!results[r].ok()) return report(nullptr, results[r]);
  for (int r = 0; r < nranks; ++r) {
    registerComm(made[r].get());
    comms[r] = made[r].release();
  }
  return strataSuccess;
}

STRATA_API strataResult_t strataCommInitFromEnv(strataComm_t* comm, const strataConfig_t* config) {
  if (!comm) return report(nullptr, invalidArgument("CommInitFromEnv: comm is NULL"));
  *comm = nullptr;
  LaunchInfo li;
  Status st = readLaunchEnv(&li);
  if (!st.ok()) return report(nullptr, st);
  return strataCommInitRankConfig(comm, li.nranks, li.id, li.rank, config);
}

STRATA_API strataResult_t strataCommSplit(strataComm_t comm, int color, int key, strataComm_t* newcomm,
                                          const strataConfig_t* config) {
  Comm* c = nullptr;
  Status st = checkComm(comm, &c);
  if (st.ok() && !newcomm) st = invalidArgument("CommSplit: newcomm is NULL");
  if (st.ok() && color < 0 && color != STRATA_SPLIT_NOCOLOR)
    st = invalidArgument("CommSplit: color {} is negative (use STRATA_SPLIT_NOCOLOR to opt out)", color);
  if (!st.ok()) return report(c, st);
  *newcomm = nullptr;  // also when the split fails
  ActiveCall guard(c);
  std::unique_ptr<Comm> out;
  st = c->split(color, key, config, &out);
  if (!st.ok()) return report(c, st);
  if (out) {
    registerComm(out.get());
    *newcomm = out.release();
  }
  return strataSuccess;
}

STRATA_API strataResult_t strataCommShrink(strataComm_t comm, const int* excludeRanks, int excludeCount,
                                           strataComm_t* newcomm, const strataConfig_t* config, int shrinkFlags) {
  // A failed communicator may be shrunk: that is what shrink is for.
  if (!comm || !isLiveComm(comm)) return report(nullptr, invalidArgument("CommShrink: communicator is not live"));
  Comm* c = static_cast<Comm*>(comm);
  Status st;
  if (!newcomm) st = invalidArgument("CommShrink: newcomm is NULL");
  else if ((shrinkFlags & ~STRATA_SHRINK_DETECT) != STRATA_SHRINK_DEFAULT &&
           (shrinkFlags & ~STRATA_SHRINK_DETECT) != STRATA_SHRINK_ABORT)
    st = invalidArgument("CommShrink: shrinkFlags {:#x} is neither STRATA_SHRINK_DEFAULT nor STRATA_SHRINK_ABORT "
                         "(either may add STRATA_SHRINK_DETECT)",
                         shrinkFlags);
  else if (excludeCount < 0 || (excludeCount > 0 && !excludeRanks))
    st = invalidArgument("CommShrink: {} excluded ranks at {}", excludeCount, static_cast<const void*>(excludeRanks));
  std::vector<int> exclude;
  if (st.ok()) exclude.assign(excludeRanks, excludeRanks + excludeCount);
  std::sort(exclude.begin(), exclude.end());
  for (size_t i = 0; st.ok() && i < exclude.size(); ++i) {
    if (exclude[i] < 0 || exclude[i] >= c->nranks())
      st = invalidArgument("CommShrink: excluded rank {} is not a rank of this {}-rank communicator", exclude[i],
                           c->nranks());
    else if (i > 0 && exclude[i] == exclude[i - 1])
      st = invalidArgument("CommShrink: rank {} is excluded twice", exclude[i]);
    else if (exclude[i] == c->rank())
      st = Status(strataInvalidUsage, fmt::format("CommShrink: rank {} excludes itself (excluded ranks do not call "
                                                  "shrink)", c->rank()));
  }
  if (st.ok() && static_cast<int>(exclude.size()) >= c->nranks()) st = invalidArgument("CommShrink: no rank is left");
  if (!st.ok()) return report(c, st);
  *newcomm = nullptr;
  std::unique_ptr<Comm> out;
  st = c->shrink(exclude, config, shrinkFlags, &out);
  if (!st.ok()) return report(c, st);
  registerComm(out.get());
  *newcomm = out.release();
  return strataSuccess;
}

STRATA_API strataResult_t strataCommRevoke(strataComm_t comm, int revokeFlags) {
  if (!comm || !isLiveComm(comm)) return report(nullptr, invalidArgument("CommRevoke: communicator is not live"));
  Comm* c = static_cast<Comm*>(comm);
  if (revokeFlags != STRATA_REVOKE_DEFAULT)
    return report(c, invalidArgument("CommRevoke: revokeFlags {:#x} must be STRATA_REVOKE_DEFAULT (0)", revokeFlags));
  c->revoke();
  return strataSuccess;
}

STRATA_API strataResult_t strataCommFinalize(strataComm_t comm) {
  Comm* c = nullptr;
  if (!comm || !isLiveComm(comm)) return report(nullptr, invalidArgument("CommFinalize: communicator is not live"));
  c = static_cast<Comm*>(comm);
  // Host operations complete before their call returns: nothing is outstanding.
  return c->failed() ? c->asyncError() : strataSuccess;
}

STRATA_API strataResult_t strataCommDestroy(strataComm_t comm) {
  if (!comm || !isLiveComm(comm)) return report(nullptr, invalidArgument("CommDestroy: communicator is not live"));
  Comm* c = static_cast<Comm*>(comm);
  unregisterComm(c);
  delete c;
  return strataSuccess;
}

STRATA_API strataResult_t strataCommAbort(strataComm_t comm) {
  if (!comm || !isLiveComm(comm)) return report(nullptr, invalidArgument("CommAbort: communicator is not live"));
  Comm* c = static_cast<Comm*>(comm);
  c->abort();
  unregisterComm(c);
  delete c;
  return strataSuccess;
}

STRATA_API strataResult_t strataCommCount(const strataComm_t comm, int* count) {
  if (!comm || !isLiveComm(comm)) return report(nullptr, invalidArgument("CommCount: communicator is not live"));
  if (!count) return report(nullptr, invalidArgument("CommCount: count is NULL"));
  *count = static_cast<const Comm*>(comm)->nranks();
  return strataSuccess;
}

STRATA_API strataResult_t strataCommUserRank(const strataComm_t comm, int* rank) {
  if (!comm || !isLiveComm(comm)) return report(nullptr, invalidArgument("CommUserRank: communicator is not live"));
  if (!rank) return report(nullptr, invalidArgument("CommUserRank: rank is NULL"));
  *rank = static_cast<const Comm*>(comm)->rank();
  return strataSuccess;
}

STRATA_API strataResult_t strataCommGetAsyncError(strataComm_t comm, strataResult_t* asyncError) {
  if (!comm || !isLiveComm(comm)) return report(nullptr, invalidArgument("CommGetAsyncError: communicator is not live"));
  if (!asyncError) return report(nullptr, invalidArgument("CommGetAsyncError: asyncError is NULL"));
  *asyncError = static_cast<Comm*>(comm)->asyncError();
  return strataSuccess;
}

STRATA_API const char* strataGetErrorString(strataResult_t result) {
  switch (result) {
    case strataSuccess: return "no error";
    case strataUnhandledCudaError: return "unhandled cuda error";
    case strataSystemError: return "unhandled system error (a system call failed)";
    case strataInternalError: return "internal error (a bug in strata)";
    case strataInvalidArgument: return "invalid argument";
    case strataInvalidUsage: return "invalid usage";
    case strataRemoteError: return "remote process exited or there was a network error";
    case strataInProgress: return "operation in progress";
    case strataTimeout: return "timed out waiting for a peer";
    case strataAborted: return "communicator aborted";
    default: return "unknown result code";
  }
}

STRATA_API const char* strataGetLastError(strataComm_t comm) {
  static thread_local std::string copy;
  if (comm && isLiveComm(comm)) copy = static_cast<Comm*>(comm)->lastError();
  else copy = tlsLastError;
  return copy.c_str();
}

STRATA_API strataResult_t strataRedOpCreatePreMulSum(strataRedOp_t* op, const void* scalar,
                                                     strataDataType_t datatype, strataComm_t comm) {
  Comm* c = nullptr;
  Status st = checkComm(comm, &c);
  if (st.ok() && !op) st = invalidArgument("RedOpCreatePreMulSum: op is NULL");
  if (st.ok() && !scalar) st = invalidArgument("RedOpCreatePreMulSum: scalar is NULL");
  if (st.ok() && (datatype < 0 || datatype >= strataNumTypes))
    st = invalidArgument("RedOpCreatePreMulSum: invalid datatype {}", static_cast<int>(datatype));
  if (st.ok()) st = c->createPreMulSum(scalar, datatype, op);
  return report(c, st);
}

STRATA_API strataResult_t strataRedOpDestroy(strataRedOp_t op, strataComm_t comm) {
  Comm* c = nullptr;
  Status st = checkComm(comm, &c);
  if (st.ok()) st = c->destroyOp(op);
  return report(c, st);
}

STRATA_API strataResult_t strataAllReduce(const void* sendbuff, void* recvbuff, size_t count, strataDataType_t datatype,
                                          strataRedOp_t op, strataComm_t comm) {
  return submitColl(comm, CollCall{CollType::AllReduce, sendbuff, recvbuff, count, datatype, op, 0});
}

STRATA_API strataResult_t strataReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                              strataDataType_t datatype, strataRedOp_t op, strataComm_t comm) {
  return submitColl(comm, CollCall{CollType::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0});
}

STRATA_API strataResult_t strataAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                          strataDataType_t datatype, strataComm_t comm) {
  return submitColl(comm, CollCall{CollType::AllGather, sendbuff, recvbuff, sendcount, datatype, strataSum, 0});
}

STRATA_API strataResult_t strataBroadcast(const void* sendbuff, void* recvbuff, size_t count, strataDataType_t datatype,
                                          int root, strataComm_t comm) {
  return submitColl(comm, CollCall{CollType::Broadcast, sendbuff, recvbuff, count, datatype, strataSum, root});
}

STRATA_API strataResult_t strataReduce(const void* sendbuff, void* recvbuff, size_t count, strataDataType_t datatype,
                                       strataRedOp_t op, int root, strataComm_t comm) {
  return submitColl(comm, CollCall{CollType::Reduce, sendbuff, recvbuff, count, datatype, op, root});
}

STRATA_API strataResult_t strataAllToAll(const void* sendbuff, void* recvbuff, size_t count, strataDataType_t datatype,
                                         strataComm_t comm) {
  return submitColl(comm, CollCall{CollType::AllToAll, sendbuff, recvbuff, count, datatype, strataSum, 0});
}

STRATA_API strataResult_t strataGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                       strataDataType_t datatype, int root, strataComm_t comm) {
  return submitColl(comm, CollCall{CollType::Gather, sendbuff, recvbuff, sendcount, datatype, strataSum, root});
}

STRATA_API strataResult_t strataScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                        strataDataType_t datatype, int root, strataComm_t comm) {
  return submitColl(comm, CollCall{CollType::Scatter, sendbuff, recvbuff, recvcount, datatype, strataSum, root});
}

STRATA_API strataResult_t strataSend(const void* sendbuff, size_t count, strataDataType_t datatype, int peer,
                                     strataComm_t comm) {
  return submitP2P(comm, P2PCall{true, const_cast<void*>(sendbuff), count, datatype, peer});
}

STRATA_API strataResult_t strataRecv(void* recvbuff, size_t count, strataDataType_t datatype, int peer,
                                     strataComm_t comm) {
  return submitP2P(comm, P2PCall{false, recvbuff, count, datatype, peer});
}

STRATA_API strataResult_t strataBarrier(strataComm_t comm) {
  unsigned char in = 0, out = 0;
  return submitColl(comm, CollCall{CollType::AllReduce, &in, &out, 1, strataUint8, strataMax, 0});
}

STRATA_API strataResult_t strataGroupStart(void) {
  tlsGroup.depth++;
  return strataSuccess;
}

STRATA_API strataResult_t strataGroupEnd(void) {
  GroupState& g = tlsGroup;
  if (g.depth == 0) return report(nullptr, invalidUsage("GroupEnd without a matching GroupStart"));
  if (--g.depth > 0) return strataSuccess;
  if (g.ops.empty()) return strataSuccess;
  Comm* first = g.ops.front().comm;
  Status st = runGroup(g);
  return report(st.ok() ? nullptr : first, st);
}

// ---- stream-ordered forms (device buffers; the stream is ignored for host buffers) -------------

STRATA_API strataResult_t strataAllReduceStream(const void* sendbuff, void* recvbuff, size_t count,
                                                strataDataType_t datatype, strataRedOp_t op, strataComm_t comm,
                                                strataStream_t stream) {
  return submitColl(comm, CollCall{CollType::AllReduce, sendbuff, recvbuff, count, datatype, op, 0}, stream);
}

STRATA_API strataResult_t strataReduceScatterStream(const void* sendbuff, void* recvbuff, size_t recvcount,
                                                    strataDataType_t datatype, strataRedOp_t op, strataComm_t comm,
                                                    strataStream_t stream) {
  return submitColl(comm, CollCall{CollType::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0}, stream);
}

STRATA_API strataResult_t strataAllGatherStream(const void* sendbuff, void* recvbuff, size_t sendcount,
                                                strataDataType_t datatype, strataComm_t comm, strataStream_t stream) {
  return submitColl(comm, CollCall{CollType::AllGather, sendbuff, recvbuff, sendcount, datatype, strataSum, 0}, stream);
}

STRATA_API strataResult_t strataBroadcastStream(const void* sendbuff, void* recvbuff, size_t count,
                                                strataDataType_t datatype, int root, strataComm_t comm,
                                                strataStream_t stream) {
  return submitColl(comm, CollCall{CollType::Broadcast, sendbuff, recvbuff, count, datatype, strataSum, root}, stream);
}

STRATA_API strataResult_t strataReduceStream(const void* sendbuff, void* recvbuff, size_t count,
                                             strataDataType_t datatype, strataRedOp_t op, int root, strataComm_t comm,
                                             strataStream_t stream) {
  return submitColl(comm, CollCall{CollType::Reduce, sendbuff, recvbuff, count, datatype, op, root}, stream);
}

STRATA_API strataResult_t strataAllToAllStream(const void* sendbuff, void* recvbuff, size_t count,
                                               strataDataType_t datatype, strataComm_t comm, strataStream_t stream) {
  return submitColl(comm, CollCall{CollType::AllToAll, sendbuff, recvbuff, count, datatype, strataSum, 0}, stream);
}

STRATA_API strataResult_t strataGatherStream(const void* sendbuff, void* recvbuff, size_t sendcount,
                                             strataDataType_t datatype, int root, strataComm_t comm,
                                             strataStream_t stream) {
  return submitColl(comm, CollCall{CollType::Gather, sendbuff, recvbuff, sendcount, datatype, strataSum, root}, stream);
}

STRATA_API strataResult_t strataScatterStream(const void* sendbuff, void* recvbuff, size_t recvcount,
                                              strataDataType_t datatype, int root, strataComm_t comm,
                                              strataStream_t stream) {
  return submitColl(comm, CollCall{CollType::Scatter, sendbuff, recvbuff, recvcount, datatype, strataSum, root}, stream);
}

STRATA_API strataResult_t strataSendStream(const void* sendbuff, size_t count, strataDataType_t datatype, int peer,
                                           strataComm_t comm, strataStream_t stream) {
  return submitP2P(comm, P2PCall{true, const_cast<void*>(sendbuff), count, datatype, peer}, stream);
}

STRATA_API strataResult_t strataRecvStream(void* recvbuff, size_t count, strataDataType_t datatype, int peer,
                                           strataComm_t comm, strataStream_t stream) {
  return submitP2P(comm, P2PCall{false, recvbuff, count, datatype, peer}, stream);
}

STRATA_API strataResult_t strataCudaDeviceCount(int* count) {
  if (!count) return report(nullptr, invalidArgument("strataCudaDeviceCount: count is NULL"));
  *count = cudaDeviceCountCached();
  return strataSuccess;
}

STRATA_API strataResult_t strataCommCudaDevice(strataComm_t comm, int* device) {
  Comm* c = nullptr;
  Status st = checkComm(comm, &c);
  if (st.ok() && !device) st = invalidArgument("CommCudaDevice: device is NULL");
  if (!st.ok()) return report(c, st);
  *device = commCudaDevice(*c);
  return strataSuccess;
}

STRATA_API strataResult_t strataMemAlloc(void** ptr, size_t size) {
  if (!ptr) return report(nullptr, invalidArgument("MemAlloc: ptr is NULL"));
  *ptr = nullptr;
  if (size == 0) return strataSuccess;
  return report(nullptr, memAlloc(ptr, size));
}

STRATA_API strataResult_t strataHostMemAlloc(void** ptr, size_t size) {
  if (!ptr) return report(nullptr, invalidArgument("HostMemAlloc: ptr is NULL"));
  *ptr = nullptr;
  if (size == 0) return strataSuccess;
  return report(nullptr, allocHostBuffer(ptr, size));
}

STRATA_API strataResult_t strataMemFree(void* ptr) { return report(nullptr, memFree(ptr)); }
