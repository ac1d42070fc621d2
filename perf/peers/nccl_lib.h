// nccl_lib.h: NVIDIA's NCCL loaded at run time (dlopen RTLD_NOW | RTLD_LOCAL): the few types and
// entry points the NCCL peer tools call, declared here so that the build needs no NCCL header.
#pragma once

#include <cstddef>
#include <string>

namespace strata::perf {

struct NcclUniqueId {  // ncclUniqueId: NCCL_UNIQUE_ID_BYTES (128) opaque bytes, passed by value
  char internal[128];
};
using NcclComm = void*;    // ncclComm_t
using NcclResult = int;    // ncclResult_t: 0 is ncclSuccess
using NcclStream = void*;  // cudaStream_t
// ncclDataType_t has strata's numbering (int8 0 .. f8e5m2 11); ncclRedOp_t: sum 0, prod 1, max 2,
// min 3, avg 4; ncclScalarResidence_t: ncclScalarHostImmediate 1. Enums travel as int.
constexpr int kNcclScalarHostImmediate = 1;

struct NcclLib {
  std::string path;  ///< the file the loader opened
  int version = 0;   ///< ncclGetVersion's code

  NcclResult (*getVersion)(int*) = nullptr;
  const char* (*getErrorString)(NcclResult) = nullptr;
  const char* (*getLastError)(NcclComm) = nullptr;  // 2.13+, else null
  NcclResult (*getUniqueId)(NcclUniqueId*) = nullptr;
  NcclResult (*commInitRank)(NcclComm*, int nranks, NcclUniqueId id, int rank) = nullptr;
  NcclResult (*commDestroy)(NcclComm) = nullptr;
  NcclResult (*commAbort)(NcclComm) = nullptr;  // 2.4+, else null
  NcclResult (*allReduce)(const void*, void*, size_t, int dtype, int op, NcclComm, NcclStream) = nullptr;
  NcclResult (*reduceScatter)(const void*, void*, size_t, int dtype, int op, NcclComm, NcclStream) = nullptr;
  NcclResult (*allGather)(const void*, void*, size_t, int dtype, NcclComm, NcclStream) = nullptr;
  NcclResult (*broadcast)(const void*, void*, size_t, int dtype, int root, NcclComm, NcclStream) = nullptr;
  NcclResult (*reduce)(const void*, void*, size_t, int dtype, int op, int root, NcclComm, NcclStream) = nullptr;
  NcclResult (*send)(const void*, size_t, int dtype, int peer, NcclComm, NcclStream) = nullptr;
  NcclResult (*recv)(void*, size_t, int dtype, int peer, NcclComm, NcclStream) = nullptr;
  NcclResult (*groupStart)() = nullptr;
  NcclResult (*groupEnd)() = nullptr;
  NcclResult (*redOpCreatePreMulSum)(int* op, void* scalar, int dtype, int residence, NcclComm) = nullptr;  // 2.11+
  NcclResult (*redOpDestroy)(int op, NcclComm) = nullptr;                                                  // 2.11+

  /// "2.28.9" (codes before 2.9 are X*1000 + Y*100 + Z, later ones X*10000 + Y*100 + Z).
  std::string versionText() const;
  /// At least major.minor?
  bool atLeast(int major, int minor) const;
};

/// Loads NCCL from `path` (a file, or a name the dynamic loader searches) and resolves every entry
/// point. Returns "" on success, else why not (the loader's message or the missing symbol).
std::string loadNccl(const std::string& path, NcclLib* lib);

}  // namespace strata::perf
