/*
 * strata.h: the native C API of strata, a collective-communication runtime.
 *
 * Stable C ABI: every function returns a strataResult_t, nothing throws across it. A communicator
 * connects `nranks` ranks (processes, threads, or both) and runs collectives on their buffers.
 * Buffers are host or CUDA device memory, told apart per call. Host buffers: a call completes
 * before it returns (inside a group: by strataGroupEnd). Device buffers: a call enqueues its
 * work on a CUDA stream and returns (inside a group: strataGroupEnd launches it), exactly as
 * NCCL does; completion is observed with the stream. The *Stream forms take the stream; the
 * plain forms use the legacy default stream (NULL).
 *
 * Minimal use (one process per rank):
 *   strataUniqueId id;                        // rank 0: strataGetUniqueId(&id), then share it
 *   strataComm_t comm;
 *   strataCommInitRank(&comm, nranks, id, rank);
 *   strataAllReduce(buf, buf, count, strataFloat32, strataSum, comm);
 *   strataCommDestroy(comm);
 */
#ifndef STRATA_STRATA_H_
#define STRATA_STRATA_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STRATA_VERSION_MAJOR 0
#define STRATA_VERSION_MINOR 1
#define STRATA_VERSION_PATCH 0
#define STRATA_VERSION_CODE (STRATA_VERSION_MAJOR * 10000 + STRATA_VERSION_MINOR * 100 + STRATA_VERSION_PATCH)

/** Status codes. Values match ncclResult_t so the NCCL layer maps them one to one. */
typedef enum {
  strataSuccess = 0,
  strataUnhandledCudaError = 1, /**< a CUDA call failed */
  strataSystemError = 2,        /**< a system call failed (socket, shm, ...) */
  strataInternalError = 3,      /**< a bug in strata */
  strataInvalidArgument = 4,    /**< a bad argument; the communicator stays usable */
  strataInvalidUsage = 5,       /**< a call not allowed in this state (e.g. unbalanced group) */
  strataRemoteError = 6,        /**< a peer died, timed out or broke the connection */
  strataInProgress = 7,         /**< a non-blocking operation has not finished */
  strataTimeout = 8,            /**< a wait exceeded the configured timeout */
  strataAborted = 9,            /**< the communicator was aborted */
  strataNumResults = 10
} strataResult_t;

/** Element types. Values match ncclDataType_t. */
typedef enum {
  strataInt8 = 0,
  strataUint8 = 1,
  strataInt32 = 2,
  strataUint32 = 3,
  strataInt64 = 4,
  strataUint64 = 5,
  strataFloat16 = 6,
  strataFloat32 = 7,
  strataFloat64 = 8,
  strataBfloat16 = 9,
  strataFloat8e4m3 = 10,
  strataFloat8e5m2 = 11,
  strataNumTypes = 12
} strataDataType_t;

/** Reduction operations. Values match ncclRedOp_t; values >= strataNumOps are user-created ops
 *  (pre-multiplied sums) from strataRedOpCreatePreMulSum. */
typedef enum {
  strataSum = 0,
  strataProd = 1,
  strataMax = 2,
  strataMin = 3,
  strataAvg = 4,
  strataNumOps = 5,
  strataMaxRedOp = 0x7fffffff
} strataRedOp_t;

/** Opaque communicator handle. */
typedef struct strataComm* strataComm_t;

#define STRATA_UNIQUE_ID_BYTES 128
/** Identifies one communicator before it exists: the root's address and a random secret. */
typedef struct {
  char internal[STRATA_UNIQUE_ID_BYTES];
} strataUniqueId;

/** Optional settings at init; zero-initialise, then set what you need. */
typedef struct {
  size_t size;           /**< sizeof(strataConfig_t), set by strataConfigInit */
  int blocking;          /**< reserved: 1 (calls block until done) is the only mode today */
  const char* commName;  /**< shown in logs and errors; may be NULL */
  int splitShare;        /**< reserved */
} strataConfig_t;

/** Fills `config` with defaults. */
void strataConfigInit(strataConfig_t* config);

/** Library version as STRATA_VERSION_CODE. */
strataResult_t strataGetVersion(int* version);

/** Creates a new unique id: opens the root listener in this process (a background thread serves
 *  the rendezvous until all ranks have joined or the join timeout passes). Call on one rank and
 *  send the id to the others out of band. */
strataResult_t strataGetUniqueId(strataUniqueId* uniqueId);

/** Joins the communicator `uniqueId` as `rank` of `nranks`. Blocks until every rank has joined,
 *  or fails naming the ranks that did not join within STRATA_JOIN_TIMEOUT seconds. */
strataResult_t strataCommInitRank(strataComm_t* comm, int nranks, strataUniqueId uniqueId, int rank);
strataResult_t strataCommInitRankConfig(strataComm_t* comm, int nranks, strataUniqueId uniqueId,
                                        int rank, const strataConfig_t* config);

/** Creates `nranks` ranks as threads of this process: comms[i] is rank i. Each comm must then be
 *  driven by its own thread (collectives block until all ranks take part). */
strataResult_t strataCommInitAll(strataComm_t* comms, int nranks);

/** Joins using the launch environment: strata-run, torchrun (RANK, WORLD_SIZE, MASTER_ADDR,
 *  MASTER_PORT), mpirun (OMPI_COMM_WORLD_*) or srun (SLURM_*). */
strataResult_t strataCommInitFromEnv(strataComm_t* comm, const strataConfig_t* config);

/** Splits `comm` by colour (ranks with the same colour form a new communicator, ordered by key,
 *  then by old rank). Collective over `comm`. color == STRATA_SPLIT_NOCOLOR yields *newcomm = NULL. */
#define STRATA_SPLIT_NOCOLOR (-1)
strataResult_t strataCommSplit(strataComm_t comm, int color, int key, strataComm_t* newcomm,
                               const strataConfig_t* config);

/** Waits for outstanding work, then frees; after this `comm` may only be destroyed. */
strataResult_t strataCommFinalize(strataComm_t comm);
/** Frees the communicator. Not collective: returns even if peers are gone. */
strataResult_t strataCommDestroy(strataComm_t comm);
/** Stops all pending operations of `comm` (they return strataAborted) and frees it. Returns
 *  promptly even when peers are dead. */
strataResult_t strataCommAbort(strataComm_t comm);

strataResult_t strataCommCount(const strataComm_t comm, int* count);
strataResult_t strataCommUserRank(const strataComm_t comm, int* rank);
/** The first error from a failed operation (or from a peer) that left `comm` unusable. */
strataResult_t strataCommGetAsyncError(strataComm_t comm, strataResult_t* asyncError);

/** A static string for a status code. */
const char* strataGetErrorString(strataResult_t result);
/** The message of the last error on this thread (for comm == NULL) or on `comm`. */
const char* strataGetLastError(strataComm_t comm);

/** Creates a reduction op that multiplies each rank's input by *scalar (of `datatype`, read from
 *  host memory now) and then sums. Destroy with strataRedOpDestroy. */
strataResult_t strataRedOpCreatePreMulSum(strataRedOp_t* op, const void* scalar,
                                          strataDataType_t datatype, strataComm_t comm);
strataResult_t strataRedOpDestroy(strataRedOp_t op, strataComm_t comm);

/* Collectives. Semantics and in-place rules follow NCCL:
 *  - all-reduce: in place when sendbuff == recvbuff.
 *  - reduce-scatter: recvcount elements per rank; in place when recvbuff == sendbuff + rank*recvcount.
 *  - all-gather: sendcount elements per rank; in place when sendbuff == recvbuff + rank*sendcount.
 *  - all-to-all, gather, scatter: count elements per peer.
 * A null buffer is allowed only with count 0 (and for buffers a rank does not use: recvbuff of
 * reduce/gather on non-roots, sendbuff of scatter on non-roots). */
strataResult_t strataAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                               strataDataType_t datatype, strataRedOp_t op, strataComm_t comm);
strataResult_t strataReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                   strataDataType_t datatype, strataRedOp_t op, strataComm_t comm);
strataResult_t strataAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                               strataDataType_t datatype, strataComm_t comm);
strataResult_t strataBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                               strataDataType_t datatype, int root, strataComm_t comm);
strataResult_t strataReduce(const void* sendbuff, void* recvbuff, size_t count,
                            strataDataType_t datatype, strataRedOp_t op, int root, strataComm_t comm);
strataResult_t strataAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                              strataDataType_t datatype, strataComm_t comm);
strataResult_t strataGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                            strataDataType_t datatype, int root, strataComm_t comm);
strataResult_t strataScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                             strataDataType_t datatype, int root, strataComm_t comm);
strataResult_t strataSend(const void* sendbuff, size_t count, strataDataType_t datatype, int peer,
                          strataComm_t comm);
strataResult_t strataRecv(void* recvbuff, size_t count, strataDataType_t datatype, int peer,
                          strataComm_t comm);
/** Blocks until every rank of `comm` has called it. */
strataResult_t strataBarrier(strataComm_t comm);

/* Stream-ordered forms (the NCCL semantics). `stream` is a cudaStream_t (NULL: the legacy default
 * stream); it is ignored when the buffers are host memory. Mixing host and device buffers in one
 * call is an invalid argument. */
typedef void* strataStream_t;
strataResult_t strataAllReduceStream(const void* sendbuff, void* recvbuff, size_t count,
                                     strataDataType_t datatype, strataRedOp_t op, strataComm_t comm,
                                     strataStream_t stream);
strataResult_t strataReduceScatterStream(const void* sendbuff, void* recvbuff, size_t recvcount,
                                         strataDataType_t datatype, strataRedOp_t op,
                                         strataComm_t comm, strataStream_t stream);
strataResult_t strataAllGatherStream(const void* sendbuff, void* recvbuff, size_t sendcount,
                                     strataDataType_t datatype, strataComm_t comm, strataStream_t stream);
strataResult_t strataBroadcastStream(const void* sendbuff, void* recvbuff, size_t count,
                                     strataDataType_t datatype, int root, strataComm_t comm,
                                     strataStream_t stream);
strataResult_t strataReduceStream(const void* sendbuff, void* recvbuff, size_t count,
                                  strataDataType_t datatype, strataRedOp_t op, int root,
                                  strataComm_t comm, strataStream_t stream);
strataResult_t strataAllToAllStream(const void* sendbuff, void* recvbuff, size_t count,
                                    strataDataType_t datatype, strataComm_t comm, strataStream_t stream);
strataResult_t strataGatherStream(const void* sendbuff, void* recvbuff, size_t sendcount,
                                  strataDataType_t datatype, int root, strataComm_t comm,
                                  strataStream_t stream);
strataResult_t strataScatterStream(const void* sendbuff, void* recvbuff, size_t recvcount,
                                   strataDataType_t datatype, int root, strataComm_t comm,
                                   strataStream_t stream);
strataResult_t strataSendStream(const void* sendbuff, size_t count, strataDataType_t datatype, int peer,
                                strataComm_t comm, strataStream_t stream);
strataResult_t strataRecvStream(void* recvbuff, size_t count, strataDataType_t datatype, int peer,
                                strataComm_t comm, strataStream_t stream);

/** Number of CUDA devices this process can use: 0 when the library was built without CUDA, or no
 *  driver or device is present (the host path works regardless). Never fails for that reason. */
strataResult_t strataCudaDeviceCount(int* count);

/** The CUDA device `comm`'s device work runs on: fixed by its first device operation; before
 *  that, the calling thread's current device; -1 without CUDA. */
strataResult_t strataCommCudaDevice(strataComm_t comm, int* device);

/** Memory for collective buffers: device memory on the current CUDA device where CUDA devices
 *  exist, else page-aligned host memory (shareable: other processes of the communicator on this
 *  machine read it single-copy). Free with strataMemFree. */
strataResult_t strataMemAlloc(void** ptr, size_t size);
/** Host memory for collective buffers, on any machine: other processes of this machine read it
 *  directly (one copy instead of two through staging). Free with strataMemFree. */
strataResult_t strataHostMemAlloc(void** ptr, size_t size);
strataResult_t strataMemFree(void* ptr);

/** Group calls: operations issued between start and end are queued and run together at end
 *  (grouped send/recv is how all-to-allv is written). Groups nest; the outermost end runs them. */
strataResult_t strataGroupStart(void);
strataResult_t strataGroupEnd(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* STRATA_STRATA_H_ */
