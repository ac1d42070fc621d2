// nccl_api.cc: the NCCL 2.28 ABI (include/nccl/nccl.h) over strata's C API; built into libnccl.so.2
// together with c_api.cc. Programs linked against NVIDIA's libnccl.so.2 run on strata by putting this
// library first on LD_LIBRARY_PATH. Test: ctest -L abi (tests/nccl_abi_test.cc).
//
// Mapping:
//  - ncclComm_t is the strataComm_t object (a cast); ncclUniqueId and strataUniqueId are the same 128
//    bytes; datatypes and built-in ops have the same values.
//  - Results 0..7 map one to one. strataTimeout -> ncclRemoteError (a peer did not answer in time:
//    from the caller's side a remote failure). strataAborted -> ncclInvalidUsage (the communicator was
//    aborted; using it further is a usage error; the last-error text says "aborted").
//  - Device memory: the call enqueues on `stream` and returns (in a group: at the outermost
//    ncclGroupEnd), as NCCL does. Host memory: the stream is ignored; every call has completed when
//    it returns. Non-blocking communicators (config.blocking = 0) behave the same, so nothing
//    returns ncclInProgress.
//  - ncclCommCuDevice reports the device the communicator's device work runs on (the current device
//    before its first device operation), or -1 without CUDA.
//  - ncclMemAlloc returns device memory on the current device where CUDA devices exist, else
//    page-aligned host memory.
//  - Collectives and send/recv forward straight to strata, which validates every argument (NULL or
//    destroyed comm, datatype/op out of range, root/peer out of range, NULL buffer with count > 0):
//    the call fails with ncclInvalidArgument, ncclGetLastError names the problem, and the
//    communicator stays usable. What strata cannot see (config magic/size, device lists) is checked
//    here.
//  - ncclCommInitRank*/ncclCommSplit inside a group are deferred to the outermost ncclGroupEnd and then
//    run concurrently, one thread each (the one-thread-many-ranks init pattern of NCCL).
//  - Every ncclX is also exported as pncclX (an alias of the same code), for profilers.
#include <nccl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "strata/strata.h"

static_assert(sizeof(ncclUniqueId) == sizeof(strataUniqueId), "unique id sizes differ");
static_assert(sizeof(ncclComm_t) == sizeof(strataComm_t));
static_assert(sizeof(ncclRedOp_t) == sizeof(strataRedOp_t));
static_assert(sizeof(ncclDataType_t) == sizeof(strataDataType_t));
static_assert(static_cast<int>(ncclNumTypes) == static_cast<int>(strataNumTypes));
static_assert(static_cast<int>(ncclNumOps) == static_cast<int>(strataNumOps));
static_assert(static_cast<int>(ncclInProgress) == static_cast<int>(strataInProgress));
static_assert(offsetof(ncclConfig_t, nvlinkCentricSched) == 76 && sizeof(ncclConfig_t) == 80,
              "ncclConfig_t layout of NCCL 2.28 (LP64)");

// Defines ncclX with default visibility and exports pncclX as an alias of it.
#define NCCL_API(ret, name, ...)                                                                 \
  extern "C" __attribute__((visibility("default"), alias(#name))) ret p##name(__VA_ARGS__);     \
  extern "C" __attribute__((visibility("default"))) ret name(__VA_ARGS__)

namespace {

// ---- per-thread state: the layer's last error and the group depth ---------------------------------

struct ThreadState {
  std::string layerError;       // message of the last error raised in this layer
  bool lastErrorInLayer = false;  // true: the newest error of this thread is layerError
  int groupDepth = 0;
  std::vector<std::function<ncclResult_t(std::string*)>> deferred;  // inits/splits of this group
};
thread_local ThreadState tls;

ncclResult_t toNccl(strataResult_t r) {
  switch (r) {
    case strataSuccess: return ncclSuccess;
    case strataUnhandledCudaError: return ncclUnhandledCudaError;
    case strataSystemError: return ncclSystemError;
    case strataInternalError: return ncclInternalError;
    case strataInvalidArgument: return ncclInvalidArgument;
    case strataInvalidUsage: return ncclInvalidUsage;
    case strataRemoteError: return ncclRemoteError;
    case strataInProgress: return ncclInProgress;
    case strataTimeout: return ncclRemoteError;
    case strataAborted: return ncclInvalidUsage;
    default: return ncclInternalError;
  }
}

// Forwards a strata result: on failure the newest error text is strata's.
ncclResult_t fwd(strataResult_t r) {
  if (r != strataSuccess) tls.lastErrorInLayer = false;
  return toNccl(r);
}

ncclResult_t fail(ncclResult_t code, std::string msg) {
  tls.layerError = std::move(msg);
  tls.lastErrorInLayer = true;
  return code;
}

std::string cat(const char* a, const std::string& b) { return std::string(a) + ": " + b; }

inline strataComm_t S(ncclComm_t c) { return reinterpret_cast<strataComm_t>(c); }
inline strataComm_t* S(ncclComm_t* c) { return reinterpret_cast<strataComm_t*>(c); }
inline strataDataType_t S(ncclDataType_t t) { return static_cast<strataDataType_t>(t); }
inline strataRedOp_t S(ncclRedOp_t o) { return static_cast<strataRedOp_t>(o); }

strataUniqueId S(const ncclUniqueId& id) {
  strataUniqueId s;
  memcpy(&s, &id, sizeof s);
  return s;
}

// ---- argument checks --------------------------------------------------------------------------------

ncclResult_t checkComm(const char* fn, ncclComm_t comm) {
  if (comm == nullptr) return fail(ncclInvalidArgument, cat(fn, "comm is NULL"));
  return ncclSuccess;
}

ncclResult_t checkType(const char* fn, ncclDataType_t t) {
  int v = static_cast<int>(t);
  if (v < 0 || v >= ncclNumTypes)
    return fail(ncclInvalidArgument,
                cat(fn, "invalid datatype " + std::to_string(v) + " (valid: 0.." +
                            std::to_string(ncclNumTypes - 1) + ")"));
  return ncclSuccess;
}

ncclResult_t checkPtr(const char* fn, const char* what, const void* p, size_t count) {
  if (p == nullptr && count > 0)
    return fail(ncclInvalidArgument,
                cat(fn, std::string(what) + " is NULL with count " + std::to_string(count)));
  return ncclSuccess;
}

ncclResult_t checkRank(const char* fn, const char* what, int v, int nranks) {
  if (v < 0 || v >= nranks)
    return fail(ncclInvalidArgument, cat(fn, std::string(what) + " " + std::to_string(v) +
                                                 " out of range (communicator has " +
                                                 std::to_string(nranks) + " ranks)"));
  return ncclSuccess;
}

#define RETURN_IF_FAILED(expr)                          \
  do {                                       \
    ncclResult_t _r = (expr);                \
    if (_r != ncclSuccess) return _r;        \
  } while (0)

// ---- config --------------------------------------------------------------------------------------

// A strata config with the commName it points to kept alive (deferred inits outlive the caller's).
struct OwnedConfig {
  strataConfig_t cfg{};
  std::string name;
  bool hasName = false;
  const strataConfig_t* get() {
    cfg.commName = hasName ? name.c_str() : nullptr;
    return &cfg;
  }
};

// Reads the fields of `in` that its `size` covers (older, shorter layouts stay valid).
ncclResult_t convertConfig(const char* fn, const ncclConfig_t* in, OwnedConfig* out) {
  strataConfigInit(&out->cfg);
  if (in == nullptr) return ncclSuccess;
  if (in->magic != NCCL_CONFIG_MAGIC)
    return fail(ncclInvalidArgument,
                cat(fn, "config was not initialised with NCCL_CONFIG_INITIALIZER (bad magic)"));
  const size_t size = in->size;
  if (size < offsetof(ncclConfig_t, blocking))
    return fail(ncclInvalidArgument, cat(fn, "config size " + std::to_string(size) + " too small"));
#define HAS_FIELD(f) (size >= offsetof(ncclConfig_t, f) + sizeof(in->f))
  if (HAS_FIELD(blocking) && in->blocking != NCCL_CONFIG_UNDEF_INT) {
    if (in->blocking != 0 && in->blocking != 1)
      return fail(ncclInvalidArgument,
                  cat(fn, "config.blocking must be 0 or 1, not " + std::to_string(in->blocking)));
    out->cfg.blocking = in->blocking;
  }
  if (HAS_FIELD(splitShare) && in->splitShare != NCCL_CONFIG_UNDEF_INT) {
    if (in->splitShare != 0 && in->splitShare != 1)
      return fail(ncclInvalidArgument, cat(fn, "config.splitShare must be 0 or 1, not " +
                                                   std::to_string(in->splitShare)));
    out->cfg.splitShare = in->splitShare;
  }
  if (HAS_FIELD(commName) && in->commName != nullptr) {
    out->name = in->commName;
    out->hasName = true;
  }
#undef HAS_FIELD
  return ncclSuccess;
}

// ---- deferred (grouped) inits ------------------------------------------------------------------------

// Runs a strata call on a worker thread, returning its result and (on failure) its error text.
ncclResult_t runCapturing(const std::function<strataResult_t()>& f, std::string* msg) {
  strataResult_t r = f();
  if (r != strataSuccess) {
    const char* m = strataGetLastError(nullptr);
    *msg = m ? m : "";
  }
  return toNccl(r);
}

ncclResult_t runDeferred() {
  auto jobs = std::move(tls.deferred);
  tls.deferred.clear();
  if (jobs.empty()) return ncclSuccess;
  std::vector<ncclResult_t> res(jobs.size(), ncclSuccess);
  std::vector<std::string> msgs(jobs.size());
  if (jobs.size() == 1) {
    res[0] = jobs[0](&msgs[0]);
  } else {
    std::vector<std::thread> threads;
    threads.reserve(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i)
      threads.emplace_back([&, i] { res[i] = jobs[i](&msgs[i]); });
    for (auto& t : threads) t.join();
  }
  for (size_t i = 0; i < jobs.size(); ++i)
    if (res[i] != ncclSuccess) return fail(res[i], "ncclGroupEnd: " + msgs[i]);
  return ncclSuccess;
}

ncclResult_t initRankImpl(const char* fn, ncclComm_t* comm, int nranks, const ncclUniqueId& id,
                          int rank, const ncclConfig_t* config) {
  if (comm == nullptr) return fail(ncclInvalidArgument, cat(fn, "comm pointer is NULL"));
  if (nranks < 1)
    return fail(ncclInvalidArgument, cat(fn, "nranks " + std::to_string(nranks) + " < 1"));
  RETURN_IF_FAILED(checkRank(fn, "rank", rank, nranks));
  auto cfg = std::make_shared<OwnedConfig>();
  RETURN_IF_FAILED(convertConfig(fn, config, cfg.get()));
  strataUniqueId sid = S(id);
  if (tls.groupDepth > 0) {
    *comm = nullptr;
    tls.deferred.push_back([=](std::string* msg) {
      return runCapturing(
          [&] { return strataCommInitRankConfig(S(comm), nranks, sid, rank, cfg->get()); }, msg);
    });
    return ncclSuccess;
  }
  return fwd(strataCommInitRankConfig(S(comm), nranks, sid, rank, cfg->get()));
}

const char* const kErrorStrings[ncclNumResults] = {
    "no error",
    "unhandled CUDA error",
    "unhandled system error (socket, shared memory or another OS call failed)",
    "internal error in the communication library",
    "invalid argument",
    "invalid usage",
    "remote process exited, timed out or there was a network error",
    "operation in progress",
};

// Handles of ncclCommRegister / ncclCommWindowRegister: the host path keeps only the record.
constexpr uint64_t kRegMagic = 0x5354524154415247ull;  // "STRATARG"
struct RegHandle {
  uint64_t magic;
  ncclComm_t comm;
  void* buff;
  size_t size;
};

ncclResult_t makeHandle(const char* fn, ncclComm_t comm, void* buff, size_t size, void** out) {
  RETURN_IF_FAILED(checkComm(fn, comm));
  if (out == nullptr) return fail(ncclInvalidArgument, cat(fn, "handle pointer is NULL"));
  RETURN_IF_FAILED(checkPtr(fn, "buff", buff, size));
  auto* h = new (std::nothrow) RegHandle{kRegMagic, comm, buff, size};
  if (h == nullptr) return fail(ncclSystemError, cat(fn, "out of memory"));
  *out = h;
  return ncclSuccess;
}

ncclResult_t freeHandle(const char* fn, ncclComm_t comm, void* handle) {
  RETURN_IF_FAILED(checkComm(fn, comm));
  auto* h = static_cast<RegHandle*>(handle);
  if (h == nullptr || h->magic != kRegMagic)
    return fail(ncclInvalidArgument, cat(fn, "not a handle returned by the matching register call"));
  if (h->comm != comm)
    return fail(ncclInvalidArgument, cat(fn, "handle was registered with another communicator"));
  h->magic = 0;
  delete h;
  return ncclSuccess;
}

}  // namespace

// ---- library, ids, communicators ------------------------------------------------------------------

NCCL_API(ncclResult_t, ncclGetVersion, int* version) {
  if (version == nullptr) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  return fwd(strataGetUniqueId(reinterpret_cast<strataUniqueId*>(uniqueId)));
}

NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId,
         int rank, ncclConfig_t* config) {
  return initRankImpl("ncclCommInitRankConfig", comm, nranks, commId, rank, config);
}

NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId,
         int rank) {
  return initRankImpl("ncclCommInitRank", comm, nranks, commId, rank, nullptr);
}

NCCL_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank,
         int nId, ncclUniqueId* commIds, ncclConfig_t* config) {
  const char* fn = "ncclCommInitRankScalable";
  if (nId < 1 || commIds == nullptr)
    return fail(ncclInvalidArgument, cat(fn, "needs nId >= 1 ids"));
  // All ranks hold the same ids; joining through the first one is enough for strata's bootstrap.
  return initRankImpl(fn, newcomm, nranks, commIds[0], myrank, config);
}

NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comm, int ndev, const int* devlist) {
  const char* fn = "ncclCommInitAll";
  if (comm == nullptr) return fail(ncclInvalidArgument, cat(fn, "comm array is NULL"));
  if (ndev < 1) return fail(ncclInvalidArgument, cat(fn, "ndev " + std::to_string(ndev) + " < 1"));
  if (devlist != nullptr) {
    // Device ids are only validated: strata's communicators are host communicators.
    for (int i = 0; i < ndev; ++i) {
      if (devlist[i] < 0)
        return fail(ncclInvalidArgument, cat(fn, "devlist[" + std::to_string(i) + "] is negative"));
      for (int j = 0; j < i; ++j)
        if (devlist[j] == devlist[i])
          return fail(ncclInvalidArgument,
                      cat(fn, "duplicate device " + std::to_string(devlist[i]) + " in devlist"));
    }
  }
  return fwd(strataCommInitAll(S(comm), ndev));
}

NCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  RETURN_IF_FAILED(checkComm("ncclCommFinalize", comm));
  return fwd(strataCommFinalize(S(comm)));
}

NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;  // as NCCL
  return fwd(strataCommDestroy(S(comm)));
}

NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;  // as NCCL
  return fwd(strataCommAbort(S(comm)));
}

NCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
         ncclConfig_t* config) {
  const char* fn = "ncclCommSplit";
  RETURN_IF_FAILED(checkComm(fn, comm));
  if (newcomm == nullptr) return fail(ncclInvalidArgument, cat(fn, "newcomm is NULL"));
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return fail(ncclInvalidArgument,
                cat(fn, "color " + std::to_string(color) + " must be >= 0 or NCCL_SPLIT_NOCOLOR"));
  auto cfg = std::make_shared<OwnedConfig>();
  RETURN_IF_FAILED(convertConfig(fn, config, cfg.get()));
  const bool hasConfig = config != nullptr;  // no config: the new communicator inherits the parent's
  if (tls.groupDepth > 0) {
    *newcomm = nullptr;
    tls.deferred.push_back([=](std::string* msg) {
      return runCapturing(
          [&] {
            return strataCommSplit(S(comm), color, key, S(newcomm), hasConfig ? cfg->get() : nullptr);
          },
          msg);
    });
    return ncclSuccess;
  }
  return fwd(strataCommSplit(S(comm), color, key, S(newcomm), hasConfig ? cfg->get() : nullptr));
}

NCCL_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
         ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  const char* fn = "ncclCommShrink";
  RETURN_IF_FAILED(checkComm(fn, comm));
  if (newcomm == nullptr) return fail(ncclInvalidArgument, cat(fn, "newcomm is NULL"));
  if (excludeRanksCount > 0 && excludeRanksList == nullptr)
    return fail(ncclInvalidArgument, cat(fn, "excludeRanksList is NULL with excludeRanksCount " +
                                                 std::to_string(excludeRanksCount)));
  auto cfg = std::make_shared<OwnedConfig>();
  RETURN_IF_FAILED(convertConfig(fn, config, cfg.get()));
  const bool hasConfig = config != nullptr;  // no config: the new communicator inherits the parent's
  const int flags = shrinkFlags == NCCL_SHRINK_ABORT ? STRATA_SHRINK_ABORT
                    : shrinkFlags == NCCL_SHRINK_DEFAULT ? STRATA_SHRINK_DEFAULT
                                                         : shrinkFlags;  // strata names the bad value
  if (tls.groupDepth > 0) {
    *newcomm = nullptr;
    std::vector<int> exclude(excludeRanksList, excludeRanksList + std::max(excludeRanksCount, 0));
    tls.deferred.push_back([=](std::string* msg) {
      return runCapturing(
          [&] {
            return strataCommShrink(S(comm), exclude.data(), excludeRanksCount, S(newcomm),
                                    hasConfig ? cfg->get() : nullptr, flags);
          },
          msg);
    });
    return ncclSuccess;
  }
  return fwd(strataCommShrink(S(comm), excludeRanksList, excludeRanksCount, S(newcomm),
                              hasConfig ? cfg->get() : nullptr, flags));
}

NCCL_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags) {
  RETURN_IF_FAILED(checkComm("ncclCommRevoke", comm));
  return fwd(strataCommRevoke(S(comm), revokeFlags == NCCL_REVOKE_DEFAULT ? STRATA_REVOKE_DEFAULT : revokeFlags));
}

NCCL_API(const char*, ncclGetErrorString, ncclResult_t result) {
  int r = static_cast<int>(result);
  if (r < 0 || r >= ncclNumResults) return "unknown result code";
  return kErrorStrings[r];
}

NCCL_API(const char*, ncclGetLastError, ncclComm_t comm) {
  if (tls.lastErrorInLayer) return tls.layerError.c_str();
  const char* s = strataGetLastError(S(comm));
  if ((s == nullptr || *s == '\0') && comm != nullptr) s = strataGetLastError(nullptr);
  return s ? s : "";
}

NCCL_API(void, ncclResetDebugInit, void) {}

NCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  const char* fn = "ncclCommGetAsyncError";
  RETURN_IF_FAILED(checkComm(fn, comm));
  if (asyncError == nullptr) return fail(ncclInvalidArgument, cat(fn, "asyncError is NULL"));
  strataResult_t a = strataSuccess;
  RETURN_IF_FAILED(fwd(strataCommGetAsyncError(S(comm), &a)));
  *asyncError = toNccl(a);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  RETURN_IF_FAILED(checkComm("ncclCommCount", comm));
  if (count == nullptr) return fail(ncclInvalidArgument, "ncclCommCount: count is NULL");
  return fwd(strataCommCount(S(comm), count));
}

NCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  RETURN_IF_FAILED(checkComm("ncclCommCuDevice", comm));
  if (device == nullptr) return fail(ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
  return fwd(strataCommCudaDevice(S(comm), device));
}

NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  RETURN_IF_FAILED(checkComm("ncclCommUserRank", comm));
  if (rank == nullptr) return fail(ncclInvalidArgument, "ncclCommUserRank: rank is NULL");
  return fwd(strataCommUserRank(S(comm), rank));
}

// ---- memory and registration -----------------------------------------------------------------------

NCCL_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) {
  if (ptr == nullptr) return fail(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  *ptr = nullptr;
  if (size == 0) return ncclSuccess;
  return fwd(strataMemAlloc(ptr, size));
}

NCCL_API(ncclResult_t, ncclMemFree, void* ptr) { return fwd(strataMemFree(ptr)); }

NCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size,
         void** handle) {
  return makeHandle("ncclCommRegister", comm, buff, size, handle);
}

NCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle) {
  return freeHandle("ncclCommDeregister", comm, handle);
}

NCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size,
         ncclWindow_t* win, int winFlags) {
  void* h = nullptr;
  RETURN_IF_FAILED(makeHandle("ncclCommWindowRegister", comm, buff, size, win ? &h : nullptr));
  *win = static_cast<ncclWindow_t>(h);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
  return freeHandle("ncclCommWindowDeregister", comm, win);
}

// ---- user reduction ops ----------------------------------------------------------------------------

NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar,
         ncclDataType_t datatype, ncclScalarResidence_t residence, ncclComm_t comm) {
  const char* fn = "ncclRedOpCreatePreMulSum";
  RETURN_IF_FAILED(checkComm(fn, comm));
  if (op == nullptr) return fail(ncclInvalidArgument, cat(fn, "op is NULL"));
  if (scalar == nullptr) return fail(ncclInvalidArgument, cat(fn, "scalar is NULL"));
  RETURN_IF_FAILED(checkType(fn, datatype));
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
    return fail(ncclInvalidArgument, cat(fn, "invalid residence " +
                                                 std::to_string(static_cast<int>(residence))));
  // Host path: both residences point at host-readable memory; the scalar is read now.
  strataRedOp_t sop = strataSum;
  RETURN_IF_FAILED(fwd(strataRedOpCreatePreMulSum(&sop, scalar, S(datatype), S(comm))));
  *op = static_cast<ncclRedOp_t>(sop);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  const char* fn = "ncclRedOpDestroy";
  RETURN_IF_FAILED(checkComm(fn, comm));
  if (static_cast<int>(op) < ncclNumOps)
    return fail(ncclInvalidArgument, cat(fn, "op " + std::to_string(static_cast<int>(op)) +
                                                 " is a built-in operation"));
  return fwd(strataRedOpDestroy(S(op), S(comm)));
}

// ---- collectives -----------------------------------------------------------------------------------

NCCL_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return fwd(strataAllReduceStream(sendbuff, recvbuff, count, S(datatype), S(op), S(comm), stream));
}

NCCL_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return fwd(strataBroadcastStream(sendbuff, recvbuff, count, S(datatype), root, S(comm), stream));
}

NCCL_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root,
         ncclComm_t comm, cudaStream_t stream) {
  return fwd(strataBroadcastStream(buff, buff, count, S(datatype), root, S(comm), stream));
}

NCCL_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return fwd(strataReduceStream(sendbuff, recvbuff, count, S(datatype), S(op), root, S(comm), stream));
}

NCCL_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return fwd(strataAllGatherStream(sendbuff, recvbuff, sendcount, S(datatype), S(comm), stream));
}

NCCL_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return fwd(strataReduceScatterStream(sendbuff, recvbuff, recvcount, S(datatype), S(op), S(comm), stream));
}

NCCL_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return fwd(strataAllToAllStream(sendbuff, recvbuff, count, S(datatype), S(comm), stream));
}

NCCL_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return fwd(strataGatherStream(sendbuff, recvbuff, count, S(datatype), root, S(comm), stream));
}

NCCL_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return fwd(strataScatterStream(sendbuff, recvbuff, count, S(datatype), root, S(comm), stream));
}

NCCL_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype,
         int peer, ncclComm_t comm, cudaStream_t stream) {
  return fwd(strataSendStream(sendbuff, count, S(datatype), peer, S(comm), stream));
}

NCCL_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclComm_t comm, cudaStream_t stream) {
  return fwd(strataRecvStream(recvbuff, count, S(datatype), peer, S(comm), stream));
}

// ---- groups ----------------------------------------------------------------------------------------

NCCL_API(ncclResult_t, ncclGroupStart, void) {
  RETURN_IF_FAILED(fwd(strataGroupStart()));
  ++tls.groupDepth;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclGroupEnd, void) {
  if (tls.groupDepth == 0)
    return fail(ncclInvalidUsage, "ncclGroupEnd: no matching ncclGroupStart on this thread");
  --tls.groupDepth;
  ncclResult_t r = fwd(strataGroupEnd());
  if (tls.groupDepth > 0) return r;
  // Outermost end: the strata group has run; now the grouped inits/splits, all ranks together.
  ncclResult_t d = runDeferred();
  return r != ncclSuccess ? r : d;
}
