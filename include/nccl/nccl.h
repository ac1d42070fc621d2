/*
 * nccl.h: strata's NCCL-compatible C API (the contract of NCCL 2.28), served by libnccl.so.2.
 *
 * Programs written against NCCL compile against this header unchanged and run on strata by linking
 * (or LD_LIBRARY_PATH-pointing) to strata's libnccl.so.2; binaries built against NVIDIA's header run
 * on it too, since types, enum values and struct layouts are the same.
 *
 * What differs from NCCL (strata's host-memory path):
 *  - buffers are host memory; the `stream` argument is accepted and ignored (NULL is fine);
 *  - every call has finished when it returns; inside a group, by the outermost ncclGroupEnd;
 *  - a non-blocking communicator (config.blocking = 0) still completes synchronously, so calls
 *    return ncclSuccess rather than ncclInProgress and ncclCommGetAsyncError reports ncclSuccess;
 *  - ncclCommCuDevice reports -1 (a host communicator has no CUDA device);
 *  - ncclCommInitAll with a device list makes host ranks too (device ids are not used);
 *  - a pre-multiplied-sum scalar is read when the op is created, whatever its residence.
 *
 * This header needs no CUDA installation. It declares `cudaStream_t` itself unless the CUDA runtime
 * headers were included first (or STRATA_NCCL_HAVE_CUDA_STREAM is defined by the includer).
 *
 * Build: include as <nccl.h> with include/nccl on the include path; link libnccl.so.2.
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/* The CUDA stream type: only named here, never dereferenced. driver_types.h (pulled in by
 * cuda_runtime.h and cuda_runtime_api.h) is where CUDA defines it; its guard is checked so that the
 * typedef is not repeated (repeating it is legal in C11/C++ but not in C99). */
#if !defined(__DRIVER_TYPES_H__) && !defined(STRATA_NCCL_HAVE_CUDA_STREAM)
#define STRATA_NCCL_HAVE_CUDA_STREAM 1
typedef struct CUstream_st* cudaStream_t;
#endif

/* Version of the NCCL contract implemented. */
#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""

/* Version numbering: up to 2.8 the code was X*1000+Y*100+Z, from 2.9 on it is X*10000+Y*100+Z. */
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))
#define NCCL_VERSION_CODE 22809

#ifdef __cplusplus
extern "C" {
#endif

/* ---- handles and identifiers ------------------------------------------------------------------ */

/** A communicator. In strata it is the same object as a strataComm_t. */
typedef struct ncclComm* ncclComm_t;
/** A registered memory window (ncclCommWindowRegister). */
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_COMM_NULL NULL

/** Names a communicator before it exists; made by one rank, handed to the others out of band. */
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* ---- status codes ----------------------------------------------------------------------------- */

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1, /* a CUDA call failed */
  ncclSystemError = 2,        /* an operating-system call failed (socket, shared memory, ...) */
  ncclInternalError = 3,      /* a bug inside the library */
  ncclInvalidArgument = 4,    /* a bad argument; the communicator stays usable */
  ncclInvalidUsage = 5,       /* a call not allowed here (also: use of an aborted communicator) */
  ncclRemoteError = 6,        /* a peer failed, timed out or dropped its connection */
  ncclInProgress = 7,         /* a non-blocking call has not finished yet */
  ncclNumResults = 8
} ncclResult_t;

/* ---- configuration ---------------------------------------------------------------------------- */

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

/* ncclCommWindowRegister flags. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* config.CTAPolicy values (accepted, meaningless on the host path). */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* ncclCommShrink / ncclCommRevoke flag values, for source compatibility. */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01
#define NCCL_REVOKE_DEFAULT 0x00

/** Communicator settings, layout of NCCL 2.28. Always start from NCCL_CONFIG_INITIALIZER: the library
 *  checks `magic` and reads only the fields that `size` covers, so programs built against an older
 *  (shorter) layout keep working. Fields left at NCCL_CONFIG_UNDEF_* take the default. strata uses
 *  `blocking`, `commName` and `splitShare`; the GPU tuning fields are accepted and ignored. */
typedef struct ncclConfig_v22800 {
  size_t size;           /* sizeof(ncclConfig_t) of the caller's build */
  unsigned int magic;    /* 0xcafebeef */
  unsigned int version;  /* NCCL_VERSION_CODE of the caller's build */
  int blocking;          /* 1 (default): calls block; 0: non-blocking (strata still completes) */
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;  /* a name shown in logs and errors */
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

#define NCCL_CONFIG_MAGIC 0xcafebeef

#define NCCL_CONFIG_INITIALIZER                                                             \
  {                                                                                         \
    sizeof(ncclConfig_t), NCCL_CONFIG_MAGIC, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                 \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,                 \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,                 \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                 \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT                                         \
  }

/* ---- element types and reduction operations --------------------------------------------------- */

/** Reduction operations. Values from ncclNumOps up to ncclMaxRedOp are ops created at run time
 *  (ncclRedOpCreatePreMulSum). The type stays 4 bytes wide, as in every NCCL release. */
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,  /* sum divided by the number of ranks (integers: truncating division) */
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10, /* OCP E4M3 (finite-only) */
  ncclFloat8e5m2 = 11, /* OCP E5M2 */
  ncclNumTypes = 12
} ncclDataType_t;

/** Where the scalar of a pre-multiplied sum lives and when it is read. */
typedef enum {
  ncclScalarDevice = 0,        /* NCCL: device memory, read while the collective runs.
                                  strata: a host pointer, read at creation */
  ncclScalarHostImmediate = 1  /* host memory, read before ncclRedOpCreatePreMulSum returns */
} ncclScalarResidence_t;

/* ---- library, memory and communicator management ---------------------------------------------- */

/** Page-aligned memory suitable for every strata transport; free with ncclMemFree. */
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t pncclMemAlloc(void** ptr, size_t size);
ncclResult_t ncclMemFree(void* ptr);
ncclResult_t pncclMemFree(void* ptr);

/** Stores NCCL_VERSION_CODE of the NCCL contract the library implements. */
ncclResult_t ncclGetVersion(int* version);
ncclResult_t pncclGetVersion(int* version);

/** Makes a new id (call on one rank, share it). Under strata's launcher every rank receives the
 *  job's id instead, so every rank may call it. */
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId);

/** Joins communicator `commId` as `rank` of `nranks`; with a config (may be NULL). Inside a group,
 *  inits of several ranks driven by one thread run together at ncclGroupEnd. */
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t* config);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);

/** Like ncclCommInitRankConfig with `nId` ids made by different ranks (strata joins through the
 *  first one). */
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId* commIds, ncclConfig_t* config);

/** Creates `ndev` ranks in this process; comm[i] is rank i. Drive them from one thread with
 *  ncclGroupStart / a call per comm / ncclGroupEnd, or from a thread each. */
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);

/** Finishes outstanding work; afterwards the communicator may only be destroyed. */
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);
/** Frees the communicator (NULL is accepted). */
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);
/** Stops pending work and frees the communicator; returns even when peers are dead. */
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);

/** Splits by colour, ordered by key then old rank; NCCL_SPLIT_NOCOLOR gives *newcomm = NULL. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                            ncclConfig_t* config);

/* ncclCommShrink flags (NCCL 2.27) and ncclCommRevoke flags. */
#define NCCL_SHRINK_DEFAULT 0x00 /* the parent is idle */
#define NCCL_SHRINK_ABORT 0x01   /* stop the parent's ongoing operations first, then shrink */
#define NCCL_REVOKE_DEFAULT 0x00
/** The communicator of the ranks not in excludeRanksList, renumbered in order; collective over
 *  those ranks only, so it works after the excluded ones died. */
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                             ncclConfig_t* config, int shrinkFlags);
/** Stops every in-flight operation of comm; afterwards it may be destroyed or shrunk. */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);

/** A static text for a status code. */
const char* ncclGetErrorString(ncclResult_t result);
const char* pncclGetErrorString(ncclResult_t result);
/** The message of the most recent error of this thread (comm may be NULL). */
const char* ncclGetLastError(ncclComm_t comm);
const char* pncclGetLastError(ncclComm_t comm);
/** Re-reads debug settings (no-op in strata). */
void ncclResetDebugInit(void);
void pncclResetDebugInit(void);

/** The error that made `comm` unusable, or ncclSuccess. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count);
/** The CUDA device of `comm`: -1 for strata's host communicators. */
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank);

/** Buffer registration: accepted and returns a handle; the host path needs no registration. */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                     int winFlags);
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/* ---- user-defined reductions ------------------------------------------------------------------ */

/** An op that multiplies each rank's input by *scalar (of `datatype`) and then sums. Use only with
 *  `comm` and `datatype`; free with ncclRedOpDestroy once the last call using it has returned. */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* ---- collectives -------------------------------------------------------------------------------
 * Every rank of the communicator makes the same call (same count, type, op, root). Several ranks
 * driven by one thread must be grouped (ncclGroupStart ... ncclGroupEnd). In-place rules:
 *   AllReduce, Reduce, Broadcast: sendbuff == recvbuff.
 *   ReduceScatter: recvbuff == sendbuff + rank * recvcount.
 *   AllGather:     sendbuff == recvbuff + rank * sendcount.
 *   Gather (root): sendbuff == recvbuff + root * count.   Scatter (root): recvbuff == sendbuff + root * count.
 * recvbuff of Reduce/Gather and sendbuff of Scatter are used on the root only (NULL elsewhere). */

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);

/** Broadcast in place (older form of ncclBroadcast). */
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream);

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                            cudaStream_t stream);

/** sendbuff holds nranks * recvcount elements; rank i receives block i of the reduction. */
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                cudaStream_t stream);

/** recvbuff holds nranks * sendcount elements; rank i's contribution lands at i * sendcount. */
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

/** Block j of sendbuff (count elements) goes to rank j; block i of recvbuff comes from rank i. */
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

/** Every rank's count elements land on the root at recvbuff + i * count. */
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);

/** The root's block i (count elements at sendbuff + i * count) goes to rank i. */
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);

/* ---- point to point: the peer posts the matching call with the same count and type. Sends and
 *      receives that must progress together (exchanges, all-to-allv) go in one group. ---------- */

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);

/* ---- groups: calls between start and end are queued and run together at the outermost end ---- */

ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NCCL_H_ */
