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

/* C++ sees the argument enums with a fixed underlying type: their values come from C callers as
 * any int, which strata validates, and only a fixed type makes an out-of-range value defined there. */
#ifdef __cplusplus
#define STRATA_ENUM_ARG : int
#else
#define STRATA_ENUM_ARG
#endif

/** Element types. Values match ncclDataType_t. */
typedef enum STRATA_ENUM_ARG {
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
typedef enum STRATA_ENUM_ARG {
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
  int deterministic;     /**< 1: deterministic reductions (see STRATA_DETERMINISTIC); 0: the variable decides */
  double timeout;        /**< seconds an operation (and the join) may wait without progress before it
                              fails with strataTimeout; 0: STRATA_TIMEOUT / STRATA_JOIN_TIMEOUT decide */
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

/** Shrink flags. DEFAULT: the parent is idle (no call of this rank inside it). ABORT: first stop
 *  this rank's calls inside the parent (as strataCommRevoke), for a parent that failed or hangs. */
#define STRATA_SHRINK_DEFAULT 0x00
#define STRATA_SHRINK_ABORT 0x01
/** strata's own, combinable with the above: the survivors need not know who failed. Each names the
 *  ranks it knows failed (maybe none); ranks whose process is gone (their listener refuses
 *  connections) are found and left out, as are ranks any survivor names and ranks that do not
 *  come within the timeout. Every survivor gets the same communicator; strataCommCount and
 *  strataCommUserRank of it say who is left. */
#define STRATA_SHRINK_DETECT 0x100
/** Makes the communicator of the ranks of `comm` not in `excludeRanks` (dead or leaving), renumbered
 *  in their old order. Collective over the survivors only: the excluded ranks take no part, so it
 *  works after they died, and after `comm` failed. Every survivor passes the same list (in any
 *  order; a difference is an error naming both lists); a survivor that does not take part makes it
 *  fail within the join timeout (or config->timeout). STRATA_SHRINK_DETECT: see above. config == NULL: the new communicator keeps
 *  the parent's timeout and deterministic mode. The parent stays as it was (usable if it was
 *  healthy, STRATA_SHRINK_DEFAULT) and must still be destroyed. */
strataResult_t strataCommShrink(strataComm_t comm, const int* excludeRanks, int excludeCount,
                                strataComm_t* newcomm, const strataConfig_t* config, int shrinkFlags);
/** Stops every call of this rank inside `comm` (they return strataAborted), tells its peers (their
 *  calls in it fail promptly), and leaves it revoked: collectives on it fail, while destroy and
 *  shrink may proceed. revokeFlags must be STRATA_REVOKE_DEFAULT. */
#define STRATA_REVOKE_DEFAULT 0x00
strataResult_t strataCommRevoke(strataComm_t comm, int revokeFlags);

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

/* ---- Parallel groups: the communicators of a (tp, cp, ep, dp, pp) training mesh ---------------
 *
 * The world's ranks form a grid tp x cp x ep x dp x pp (tensor, context, expert, data and pipeline
 * parallelism). The rank order names the five dimensions fastest-varying first; the default is
 * Megatron-core's "tp-cp-ep-dp-pp", with which world rank
 *     r = tp_i + tp * (cp_i + cp * (ep_i + ep * (dp_i + dp * pp_i)))
 * so tensor-parallel peers are neighbouring ranks (on one node when nodes hold consecutive ranks).
 * A group of some kind joins the ranks that share every coordinate outside the kind's dimensions;
 * inside it, ranks are ordered by world rank. Every rank belongs to exactly one group of each kind
 * (a size-1 group is still a valid size-1 communicator).
 *
 *   kind              spans            the ranks that
 *   strataGroupTp     tp               share a layer's tensor shards
 *   strataGroupCp     cp               share a sequence (ring attention)
 *   strataGroupEp     ep               exchange tokens for their experts (all-to-all)
 *   strataGroupDp     dp               differ only in their dp coordinate
 *   strataGroupPp     pp               form one pipeline
 *   strataGroupDpCp   ep x dp x cp     hold the same dense parameters (same tp and pp): dense
 *                                      gradient reduction. EP ranks process different data with the
 *                                      same dense parameters, so they belong here, as in Megatron-
 *                                      core where EP is carved out of DP; with ep = 1: dp x cp.
 *   strataGroupTpCp   tp x cp          share one sequence's shards (tp x cp attention layouts)
 *   strataGroupMp     tp x cp x pp     process one data shard together (same ep and dp): the
 *                                      model-parallel group
 *   strataGroupEdp    dp x cp          hold the same experts (same tp, ep and pp): expert-data-
 *                                      parallel, expert gradient reduction
 *   strataGroupWorld  all              a private copy of the world: its collectives never
 *                                      interleave with the caller's on the world communicator
 */
#define STRATA_PARALLEL_DIMS 5
/** Enough bytes for any rank order string ("tp-cp-ep-dp-pp" and its terminating NUL). */
#define STRATA_RANK_ORDER_BYTES 16

/** Sizes of the five dimensions (each >= 1; their product is the world size) and the rank order. */
typedef struct {
  int tp, cp, ep, dp, pp;
  const char* order; /**< the five names joined by '-', fastest first; NULL or "": "tp-cp-ep-dp-pp" */
} strataParallelSizes_t;

/** Group kinds (see the table above). The first five double as coordinate indices: coords[kind]. */
typedef enum {
  strataGroupTp = 0,
  strataGroupCp = 1,
  strataGroupEp = 2,
  strataGroupDp = 3,
  strataGroupPp = 4,
  strataGroupDpCp = 5,
  strataGroupTpCp = 6,
  strataGroupMp = 7,
  strataGroupEdp = 8,
  strataGroupWorld = 9,
  strataNumGroups = 10
} strataGroupKind_t;

/** Opaque handle: every group communicator of one rank, its coordinates and the placement report. */
typedef struct strataParallelGroups* strataParallelGroups_t;

/** Fills `sizes` with 1 for every dimension and the default order. */
void strataParallelSizesInit(strataParallelSizes_t* sizes);

/** The short name of a group kind: "tp", "cp", "ep", "dp", "pp", "dp_cp", "tp_cp", "mp", "edp",
 *  "world"; "unknown" for anything else. */
const char* strataGroupKindName(strataGroupKind_t kind);

/** Collective over `world`: creates one communicator of every group kind for this rank (one
 *  strataCommSplit per kind, in kind order, so every rank must call it with the same sizes).
 *  Fails with strataInvalidArgument, before any split, when a size is < 1, the product of the sizes
 *  is not the world size ("tp*cp*ep*dp*pp = 12 but the world has 8 ranks") or the order is not a
 *  permutation of the five names ("order 'tp-cp-dp-pp' lacks ep"); the message is
 *  strataGetLastError(world).
 *  Placement: when tp groups cross nodes of the world's layout (or cp groups do while another order
 *  would keep tp and cp inside nodes), world rank 0 logs a warning naming the group and an order
 *  that avoids it (strataProposeRankOrder); with STRATA_STRICT_PLACEMENT=1 the call fails instead,
 *  on every rank, with that text. Free with strataParallelGroupsDestroy. */
strataResult_t strataParallelGroupsCreate(strataComm_t world, const strataParallelSizes_t* sizes,
                                          strataParallelGroups_t* groups);

/** This rank's communicator of `kind`, borrowed: valid until strataParallelGroupsDestroy (do not
 *  destroy it yourself). Errors are reported on the world communicator the groups came from. */
strataResult_t strataParallelGroupsComm(strataParallelGroups_t groups, strataGroupKind_t kind, strataComm_t* comm);

/** This rank's coordinates: coords[strataGroupTp] .. coords[strataGroupPp] (tp, cp, ep, dp, pp). */
strataResult_t strataParallelGroupsCoord(strataParallelGroups_t groups, int coords[STRATA_PARALLEL_DIMS]);

/** The placement report (the same text on every rank, computed from the world's layout): a header,
 *  then one line per kind with its size, the link classes among its members (slowest first), the
 *  nodes one group spans and the rails its cross-node messages take, e.g.
 *      placement of tp2 cp1 ep1 dp2 pp2 (order tp-cp-ep-dp-pp) on 2 nodes x 4 ranks:
 *        tp     2 ranks x 4 groups: shm, 1 node
 *        pp     2 ranks x 4 groups: rail, 2 nodes, rail 0
 *  Copies it NUL-terminated into `buf` of `len` bytes; `*needed` (may be NULL) receives the bytes
 *  needed including the NUL. buf may be NULL with len 0 to ask for the size; a buffer too small
 *  receives a truncated copy and the call returns strataInvalidArgument. */
strataResult_t strataParallelGroupsReport(strataParallelGroups_t groups, char* buf, size_t len, size_t* needed);

/** Frees every group communicator. Not collective (as strataCommDestroy). */
strataResult_t strataParallelGroupsDestroy(strataParallelGroups_t groups);

/** Not collective: an order for `sizes` (its order is the starting point) that keeps tp groups
 *  inside nodes of the world's layout, and then cp groups too where possible: the nearest such
 *  order to sizes->order (fewest swapped pairs), sizes->order itself when it already does. Writes
 *  the order to `order` (STRATA_RANK_ORDER_BYTES suffice) and, when `note` is not NULL, one line
 *  saying what it achieves ("keeps tp and cp inside nodes of 4 ranks" / "keeps tp inside nodes;
 *  no order keeps cp inside as well"). When no order keeps tp inside a node (tp larger than a
 *  node) it returns strataInvalidArgument with the reason in strataGetLastError(world) and `note`. */
strataResult_t strataProposeRankOrder(strataComm_t world, const strataParallelSizes_t* sizes, char* order,
                                      size_t orderLen, char* note, size_t noteLen);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* STRATA_STRATA_H_ */
