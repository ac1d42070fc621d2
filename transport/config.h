// config.h: the one typed registry of strata's environment variables. Every tunable is declared
// here once (name, type, default, help); nothing else in the code base calls getenv for settings.
// `strata-run --config` prints the table.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "transport/status.h"

namespace strata {

struct Config {
  std::string algo = "auto";        ///< STRATA_ALGO: auto|ring|rhd|tree|direct|oneshot|pairwise|bruck|linear|hier
  std::string transport = "auto";   ///< STRATA_TRANSPORT: auto|local|tcp|ucx|ib (transport/net_select.h)
  double joinTimeoutSec = 120;      ///< STRATA_JOIN_TIMEOUT: seconds for all ranks to join
  double timeoutSec = 600;          ///< STRATA_TIMEOUT: seconds a pending operation may wait
  std::string logLevel = "warn";    ///< STRATA_LOG_LEVEL: error|warn|info|debug|trace
  size_t localSlotBytes = 256 << 10;  ///< STRATA_LOCAL_SLOT_BYTES: shm FIFO slot size
  int localSlots = 4;               ///< STRATA_LOCAL_SLOTS: shm FIFO slots per directed pair
  bool localCma = false;            ///< STRATA_LOCAL_CMA: single-copy large messages between processes
  size_t cmaMinBytes = 32 << 20;    ///< STRATA_CMA_MIN_BYTES: messages from this size use CMA
  size_t sharedMinBytes = 16 << 10; ///< STRATA_SHARED_MIN_BYTES: strataMemAlloc chunks from this size go single-copy (0: never)
  size_t sharedRewriteMinBytes = 1 << 20;  ///< STRATA_SHARED_REWRITE_MIN_BYTES: the same for memory the operation writes again
  size_t claimMaxBytes = 128 << 10; ///< STRATA_LOCAL_CLAIM_MAX_BYTES: slot chunks up to this are consumed with line ownership (0: never)
  int tcpSockets = 2;               ///< STRATA_TCP_SOCKETS: sockets per peer pair
  size_t tcpChunkBytes = 512 << 10; ///< STRATA_TCP_CHUNK_BYTES: bytes per framed tcp chunk
  double spinMicros = 50;           ///< STRATA_SPIN_US: busy-poll before sleeping
  bool autoBind = true;             ///< STRATA_AUTO_BIND: unbound local rank processes bind their thread to a CPU each
  std::string socketAddr;           ///< STRATA_SOCKET_ADDR: address to advertise (default: auto)
  std::string socketIfname;         ///< STRATA_SOCKET_IFNAME: interfaces to use (NCCL-style prefix list)
  std::string ncclSocketIfname;     ///< NCCL_SOCKET_IFNAME: honoured when STRATA_SOCKET_IFNAME is unset
  std::string topoFile;             ///< STRATA_TOPO_FILE: cluster description (JSON) to load
  bool strictPlacement = false;     ///< STRATA_STRICT_PLACEMENT: a layout with TP across nodes is an error
  double vclusterRailBitsPerSec = 0; ///< STRATA_VCLUSTER_RAIL_RATE: shaped rail rate (set by strata-run --rail-rate)
  std::string uniqueId;             ///< STRATA_UNIQUE_ID: the job's id, set by strata-run
  int rootPort = 0;                 ///< STRATA_ROOT_PORT: rank 0's rendezvous port for env launches
  std::string secret;               ///< STRATA_SECRET: the user's rendezvous secret (torchrun/mpirun/srun launches)
  std::string secretFile;           ///< STRATA_SECRET_FILE: file holding it (created 0600 with random contents if missing)
  bool checkArgs = false;           ///< STRATA_CHECK_ARGS: verify all ranks call the same collective
  bool deterministic = false;       ///< STRATA_DETERMINISTIC: reductions summed in one fixed tree over the ranks
  std::string dumpDir;              ///< STRATA_DUMP_DIR: where op-ring dumps go (collectives/op_ring.h)
  bool dumpSignal = true;           ///< STRATA_DUMP_SIGNAL: SIGUSR1 dumps the op rings
  // CUDA path (device buffers).
  int cudaChannels = 8;             ///< STRATA_CUDA_CHANNELS: blocks (rings/trees) per collective, 1..32
  int cudaThreads = 512;            ///< STRATA_CUDA_THREADS: threads per block (64..512, multiple of 32)
  size_t cudaSlotBytes = 128 << 10; ///< STRATA_CUDA_SLOT_BYTES: bulk-protocol FIFO slot per channel and peer
  size_t cudaLLSlotBytes = 32 << 10;  ///< STRATA_CUDA_LL_SLOT_BYTES: LL FIFO slot (half of it is data)
  size_t cudaLLMaxBytes = 64 << 10; ///< STRATA_CUDA_LL_MAX_BYTES: messages up to this use the LL protocol
  size_t cudaTreeMaxBytes = 32 << 10;  ///< STRATA_CUDA_TREE_MAX_BYTES: all-reduces up to this use the tree (n > 2)
  std::string cudaAlgo = "auto";    ///< STRATA_CUDA_ALGO: auto|ring|tree (all-reduce)
  std::string cudaProto = "auto";   ///< STRATA_CUDA_PROTO: auto|ll|simple
  // ibverbs transport (transport/ib/).
  std::string ibHca;                ///< STRATA_IB_HCA: RDMA devices[:port] to use (NCCL_IB_HCA-style list; default all)
  int ibGidIndex = -1;              ///< STRATA_IB_GID_INDEX: GID table index to use (-1: RoCE v2 IPv4 first)
  int ibQpsPerConn = 2;             ///< STRATA_IB_QPS_PER_CONN: RC queue pairs per connection and rail (1..16)
  int ibTimeout = 18;               ///< STRATA_IB_TIMEOUT: QP ack timeout exponent (4.096 us x 2^N; 18 ~ 1.07 s)
  int ibRetryCnt = 6;               ///< STRATA_IB_RETRY_CNT: QP transport retries (0..7; 7 is endless on soft-RoCE)
  int ibSlots = 16;                 ///< STRATA_IB_SLOTS: slots of each connection's receive FIFO (2..1024)
  size_t ibSlotBytes = 128 << 10;   ///< STRATA_IB_SLOT_BYTES: bytes per FIFO slot (64-byte header included)
  size_t ibSingleCopyMinBytes = 256 << 10;  ///< STRATA_IB_SINGLE_COPY_MIN_BYTES: messages from this size go single-copy (0: never)
  size_t ibRegCacheEntries = 0;     ///< STRATA_IB_REG_CACHE_ENTRIES: user-buffer registrations kept per rail (0: per transfer)
  // UCX transport (transport/ucx/). UCX's own settings are read as STRATA_UCX_<NAME> (else UCX_<NAME>).
  size_t ucxChunkBytes = 1 << 20;   ///< STRATA_UCX_CHUNK_BYTES: chunk size of large UCX transfers
  size_t ucxInlineBytes = 8 << 10;  ///< STRATA_UCX_INLINE_BYTES: transfers up to this travel in one message
  int ucxWindow = 16;               ///< STRATA_UCX_WINDOW: UCX messages in flight per direction and peer (all rails)
  size_t ucxRegCacheBytes = 0;  ///< STRATA_UCX_REG_CACHE_BYTES: registration cache bound (0, default: off)
  std::string ucxTls;               ///< STRATA_UCX_TLS (UCX reads it too): UCX transports (default: network only)
  bool ucxHostHooks = false;        ///< STRATA_UCX_HOST_HOOKS: keep UCX's signal handlers and memory hooks
};

struct ConfigEntry {
  std::string name;
  std::string type;
  std::string defaultValue;
  std::string value;
  std::string help;
};

/// The process-wide configuration, read from the environment on first use.
const Config& config();
/// Re-reads the environment (tests). Fails naming the variable and value that did not parse;
/// the previous configuration stays in force then.
Status reloadConfig();
/// The first parse error seen by config(), if any (reported at communicator creation).
Status configStatus();
/// Every entry with its current value, for documentation and `strata-run --config`.
std::vector<ConfigEntry> describeConfig();
/// The same for a given configuration (`value`: its value of each entry).
std::vector<ConfigEntry> describeConfig(const Config& cfg);
/// The parsing behind config(): each registered variable's value from `lookup` (nullptr or empty:
/// unset) into a fresh Config. Fails naming the first variable that does not parse.
Status parseConfig(const std::function<const char*(const char*)>& lookup, Config* out);

}  // namespace strata
