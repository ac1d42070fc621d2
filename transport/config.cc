// config.cc: parsing of the environment into Config, through a table of typed entries.
#include "transport/config.h"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <mutex>

namespace strata {
namespace {

struct Entry {
  const char* name;
  const char* type;
  const char* help;
  std::function<Status(Config&, const std::string&)> set;
  std::function<std::string(const Config&)> get;
};

// A number in [min, max]: NaN, infinities and values beyond max are refused (a timeout of 1e30 s
// overflows the clocks it is added to).
Status parseDouble(const char* name, const std::string& v, double min, double max, double* out) {
  char* end = nullptr;
  errno = 0;
  double d = std::strtod(v.c_str(), &end);
  if (errno != 0 || end == v.c_str() || *end != '\0' || !(d >= min && d <= max))
    return invalidArgument("{}='{}' is not a number in [{}, {}]", name, v, min, max);
  *out = d;
  return OkStatus();
}

// Digits, optionally followed by K or M. Nothing else: strtoull alone would take " -1" as 2^64-1,
// and the multiplication must not wrap.
Status parseSize(const char* name, const std::string& v, size_t min, size_t* out) {
  char* end = nullptr;
  errno = 0;
  unsigned long long x = std::strtoull(v.c_str(), &end, 10);
  size_t mult = 1;
  if (end && (*end == 'k' || *end == 'K')) mult = 1ull << 10, ++end;
  else if (end && (*end == 'm' || *end == 'M')) mult = 1ull << 20, ++end;
  if (errno != 0 || v.empty() || v[0] < '0' || v[0] > '9' || *end != '\0' || x > SIZE_MAX / mult || x * mult < min)
    return invalidArgument("{}='{}' is not a size >= {} (plain bytes, or with K/M)", name, v, min);
  *out = x * mult;
  return OkStatus();
}

Status parseBool(const char* name, const std::string& v, bool* out) {
  if (v == "1" || v == "true" || v == "on") *out = true;
  else if (v == "0" || v == "false" || v == "off") *out = false;
  else return invalidArgument("{}='{}' is not 0|1", name, v);
  return OkStatus();
}

Status parseChoice(const char* name, const std::string& v, std::initializer_list<const char*> choices,
                   std::string* out) {
  std::string all;
  for (const char* c : choices) {
    if (v == c) {
      *out = v;
      return OkStatus();
    }
    all += all.empty() ? "" : "|";
    all += c;
  }
  return invalidArgument("{}='{}' is not one of {}", name, v, all);
}

const std::vector<Entry>& entries() {
  static const std::vector<Entry> table = {
      {"STRATA_ALGO", "choice", "collective algorithm: auto|ring|rhd|tree|direct|oneshot|pairwise|bruck|linear|hier",
       [](Config& c, const std::string& v) {
         return parseChoice("STRATA_ALGO", v,
                            {"auto", "ring", "rhd", "tree", "direct", "oneshot", "pairwise", "bruck", "linear", "hier"}, &c.algo);
       },
       [](const Config& c) { return c.algo; }},
      {"STRATA_TRANSPORT", "choice",
       "transport: auto|local|tcp|ucx|ib (tcp: every peer over tcp; ucx, ib: between nodes; auto: UCX where both "
       "ends have RDMA, else tcp)",
       [](Config& c, const std::string& v) {
         return parseChoice("STRATA_TRANSPORT", v, {"auto", "local", "tcp", "ucx", "ib"}, &c.transport);
       },
       [](const Config& c) { return c.transport; }},
      {"STRATA_JOIN_TIMEOUT", "seconds", "how long init waits for every rank to join",
       [](Config& c, const std::string& v) { return parseDouble("STRATA_JOIN_TIMEOUT", v, 0.001, 1e9, &c.joinTimeoutSec); },
       [](const Config& c) { return fmt::format("{}", c.joinTimeoutSec); }},
      {"STRATA_TIMEOUT", "seconds", "how long a pending operation waits for a peer before failing",
       [](Config& c, const std::string& v) { return parseDouble("STRATA_TIMEOUT", v, 0.001, 1e9, &c.timeoutSec); },
       [](const Config& c) { return fmt::format("{}", c.timeoutSec); }},
      {"STRATA_LOG_LEVEL", "choice", "stderr log level: error|warn|info|debug|trace",
       [](Config& c, const std::string& v) {
         return parseChoice("STRATA_LOG_LEVEL", v, {"error", "warn", "info", "debug", "trace"}, &c.logLevel);
       },
       [](const Config& c) { return c.logLevel; }},
      {"STRATA_LOCAL_SLOT_BYTES", "bytes", "slot size of the shared-memory FIFO per directed pair",
       [](Config& c, const std::string& v) {
         size_t n = 0;
         STRATA_RETURN_IF_ERROR(parseSize("STRATA_LOCAL_SLOT_BYTES", v, 4096, &n));
         if (n > (size_t{1} << 30)) return invalidArgument("STRATA_LOCAL_SLOT_BYTES='{}' is above 1G", v);
         c.localSlotBytes = n;
         return OkStatus();
       },
       [](const Config& c) { return fmt::format("{}", c.localSlotBytes); }},
      {"STRATA_LOCAL_SLOTS", "count", "slots of the shared-memory FIFO per directed pair (2..64)",
       [](Config& c, const std::string& v) {
         size_t n = 0;
         STRATA_RETURN_IF_ERROR(parseSize("STRATA_LOCAL_SLOTS", v, 2, &n));
         if (n > 64) return invalidArgument("STRATA_LOCAL_SLOTS='{}' is above 64", v);
         c.localSlots = static_cast<int>(n);
         return OkStatus();
       },
       [](const Config& c) { return fmt::format("{}", c.localSlots); }},
      {"STRATA_LOCAL_CMA", "bool", "large messages between processes of one machine go single-copy through "
       "cross-memory attach (process_vm_readv) when the kernel allows it; off by default: measured 2.3x "
       "slower than the shared slots on the machines tried (docs/PERFORMANCE.md)",
       [](Config& c, const std::string& v) { return parseBool("STRATA_LOCAL_CMA", v, &c.localCma); },
       [](const Config& c) { return std::string(c.localCma ? "1" : "0"); }},
      {"STRATA_CMA_MIN_BYTES", "bytes", "smallest message sent through cross-memory attach (below it, copies through cache-resident "
       "shared slots measured faster: see docs/PERFORMANCE.md)",
       [](Config& c, const std::string& v) { return parseSize("STRATA_CMA_MIN_BYTES", v, 0, &c.cmaMinBytes); },
       [](const Config& c) { return fmt::format("{}", c.cmaMinBytes); }},
      {"STRATA_SHARED_MIN_BYTES", "bytes", "between processes of one machine, chunks of at least this size whose "
       "send buffer comes from strataMemAlloc go single-copy: the receiver reads them through its own mapping "
       "of the sender's buffer (0: never; smaller chunks go through the shared slots)",
       [](Config& c, const std::string& v) { return parseSize("STRATA_SHARED_MIN_BYTES", v, 0, &c.sharedMinBytes); },
       [](const Config& c) { return fmt::format("{}", c.sharedMinBytes); }},
      {"STRATA_SHARED_REWRITE_MIN_BYTES", "bytes", "single copy (STRATA_SHARED_MIN_BYTES) out of memory that is "
       "written again soon (a collective's output or in-place buffer, staged scratch; not a separate input) "
       "only for transfers of at least this size: smaller ones are still cached by the reader when their owner "
       "writes them, which costs more than the copy saved (docs/PERFORMANCE.md)",
       [](Config& c, const std::string& v) {
         return parseSize("STRATA_SHARED_REWRITE_MIN_BYTES", v, 0, &c.sharedRewriteMinBytes);
       },
       [](const Config& c) { return fmt::format("{}", c.sharedRewriteMinBytes); }},
      {"STRATA_LOCAL_CLAIM_MAX_BYTES", "bytes", "staging-slot chunks of at most this size are consumed with a store "
       "into each line read, so the sender's next copy into the slot takes the lines over instead of "
       "invalidating shared copies (0: never; docs/PERFORMANCE.md)",
       [](Config& c, const std::string& v) { return parseSize("STRATA_LOCAL_CLAIM_MAX_BYTES", v, 0, &c.claimMaxBytes); },
       [](const Config& c) { return fmt::format("{}", c.claimMaxBytes); }},
      {"STRATA_TCP_SOCKETS", "count", "tcp sockets per peer pair (1..16)",
       [](Config& c, const std::string& v) {
         size_t n = 0;
         STRATA_RETURN_IF_ERROR(parseSize("STRATA_TCP_SOCKETS", v, 1, &n));
         if (n > 16) return invalidArgument("STRATA_TCP_SOCKETS='{}' is above 16", v);
         c.tcpSockets = static_cast<int>(n);
         return OkStatus();
       },
       [](const Config& c) { return fmt::format("{}", c.tcpSockets); }},
      {"STRATA_TCP_CHUNK_BYTES", "bytes", "payload bytes per framed tcp chunk",
       [](Config& c, const std::string& v) { return parseSize("STRATA_TCP_CHUNK_BYTES", v, 4096, &c.tcpChunkBytes); },
       [](const Config& c) { return fmt::format("{}", c.tcpChunkBytes); }},
      {"STRATA_SPIN_US", "microseconds", "busy-poll time before a wait sleeps",
       [](Config& c, const std::string& v) { return parseDouble("STRATA_SPIN_US", v, 0, 1e9, &c.spinMicros); },
       [](const Config& c) { return fmt::format("{}", c.spinMicros); }},
      {"STRATA_AUTO_BIND", "bool",
       "ranks started without CPU binding (torchrun, srun without --cpu-bind, a fork loop) bind the thread that "
       "creates a communicator to a CPU each, as strata-run does, when every local rank is a process of its own "
       "and they fit the CPUs (0: leave them unbound)",
       [](Config& c, const std::string& v) { return parseBool("STRATA_AUTO_BIND", v, &c.autoBind); },
       [](const Config& c) { return std::string(c.autoBind ? "1" : "0"); }},
      {"STRATA_SOCKET_ADDR", "address", "IPv4 address this rank advertises to peers (default: auto)",
       [](Config& c, const std::string& v) {
         c.socketAddr = v;
         return OkStatus();
       },
       [](const Config& c) { return c.socketAddr; }},
      {"STRATA_SOCKET_IFNAME", "interfaces", "network interfaces ranks use between nodes, one per rail in name order: "
       "comma-separated name prefixes, '^' first to exclude, '=' first for exact names (as NCCL_SOCKET_IFNAME; "
       "default: all but lo and docker*)",
       [](Config& c, const std::string& v) {
         c.socketIfname = v;
         return OkStatus();
       },
       [](const Config& c) { return c.socketIfname; }},
      {"NCCL_SOCKET_IFNAME", "interfaces", "NCCL's name for STRATA_SOCKET_IFNAME, used when that is unset",
       [](Config& c, const std::string& v) {
         c.ncclSocketIfname = v;
         return OkStatus();
       },
       [](const Config& c) { return c.ncclSocketIfname; }},
      {"STRATA_TOPO_FILE", "path", "cluster topology file (JSON, docs/TOPOLOGY.md): nodes, GPUs, NICs, rails, link "
       "costs and optionally which node each rank is on (ranks on different virtual nodes use the network)",
       [](Config& c, const std::string& v) {
         c.topoFile = v;
         return OkStatus();
       },
       [](const Config& c) { return c.topoFile; }},
      {"STRATA_STRICT_PLACEMENT", "bool", "parallel groups that put tensor parallelism across nodes are an error "
       "instead of a warning",
       [](Config& c, const std::string& v) { return parseBool("STRATA_STRICT_PLACEMENT", v, &c.strictPlacement); },
       [](const Config& c) { return std::string(c.strictPlacement ? "1" : "0"); }},
      {"STRATA_VCLUSTER_RAIL_RATE", "bits/s", "rate each rail of a virtual cluster is shaped to (set by strata-run "
       "--rail-rate): the cost model's rail bandwidth",
       [](Config& c, const std::string& v) {
         return parseDouble("STRATA_VCLUSTER_RAIL_RATE", v, 0, 1e15, &c.vclusterRailBitsPerSec);
       },
       [](const Config& c) { return c.vclusterRailBitsPerSec > 0 ? fmt::format("{}", c.vclusterRailBitsPerSec) : std::string(); }},
      {"STRATA_UNIQUE_ID", "hex", "the job's unique id (set by strata-run; ncclGetUniqueId returns it)",
       [](Config& c, const std::string& v) {
         c.uniqueId = v;
         return OkStatus();
       },
       [](const Config& c) { return c.uniqueId.empty() ? std::string() : std::string("(set)"); }},
      {"STRATA_ROOT_PORT", "port", "rendezvous port rank 0 serves under torchrun/mpirun/srun (default: "
       "MASTER_PORT, else derived from the job id)",
       [](Config& c, const std::string& v) {
         size_t p = 0;
         STRATA_RETURN_IF_ERROR(parseSize("STRATA_ROOT_PORT", v, 1, &p));
         if (p > 65535) return invalidArgument("STRATA_ROOT_PORT='{}' is above 65535", v);
         c.rootPort = static_cast<int>(p);
         return OkStatus();
       },
       [](const Config& c) { return c.rootPort ? std::to_string(c.rootPort) : std::string(); }},
      {"STRATA_SECRET", "string", "the user's rendezvous secret: under torchrun, mpirun and srun variables the "
       "rendezvous secret is derived from it (HMAC-SHA256 with the job's public values), so processes of other "
       "users cannot join or read the job; every rank must see the same value (prefer STRATA_SECRET_FILE)",
       [](Config& c, const std::string& v) {
         c.secret = v;
         return OkStatus();
       },
       [](const Config& c) { return c.secret.empty() ? std::string() : std::string("(set)"); }},
      {"STRATA_SECRET_FILE", "path", "file holding the rendezvous secret (used when STRATA_SECRET is unset); must "
       "belong to the user and not be readable by others; created with mode 0600 and random contents when it "
       "does not exist (on a shared home directory every node then reads the same one)",
       [](Config& c, const std::string& v) {
         c.secretFile = v;
         return OkStatus();
       },
       [](const Config& c) { return c.secretFile; }},
      {"STRATA_CHECK_ARGS", "bool", "check that all ranks call the same collective with the same arguments",
       [](Config& c, const std::string& v) { return parseBool("STRATA_CHECK_ARGS", v, &c.checkArgs); },
       [](const Config& c) { return std::string(c.checkArgs ? "1" : "0"); }},
      {"STRATA_DUMP_DIR", "path",
       "directory where each process writes its op-ring dump (strata-<host>-<pid>.dump) when an operation fails "
       "or times out and on SIGUSR1; `strata-diagnose DIR` reads them (strata-run sets a private one and prints "
       "the diagnosis itself)",
       [](Config& c, const std::string& v) {
         c.dumpDir = v;
         return OkStatus();
       },
       [](const Config& c) { return c.dumpDir; }},
      {"STRATA_DUMP_SIGNAL", "bool",
       "install a SIGUSR1 handler (when SIGUSR1 has its default action) that dumps every communicator's op ring "
       "to STRATA_DUMP_DIR, or to stderr without one",
       [](Config& c, const std::string& v) { return parseBool("STRATA_DUMP_SIGNAL", v, &c.dumpSignal); },
       [](const Config& c) { return std::string(c.dumpSignal ? "1" : "0"); }},
      {"STRATA_DETERMINISTIC", "bool",
       "reductions (all-reduce, reduce-scatter, reduce) give bitwise identical results whatever the rank "
       "placement, node layout, transport or forced algorithm: every element is summed in one balanced tree "
       "over the ranks in rank order (host buffers)",
       [](Config& c, const std::string& v) { return parseBool("STRATA_DETERMINISTIC", v, &c.deterministic); },
       [](const Config& c) { return std::string(c.deterministic ? "1" : "0"); }},
      {"STRATA_CUDA_CHANNELS", "count", "CUDA blocks (each its own ring or tree) per device collective (1..32)",
       [](Config& c, const std::string& v) {
         size_t n = 0;
         STRATA_RETURN_IF_ERROR(parseSize("STRATA_CUDA_CHANNELS", v, 1, &n));
         if (n > 32) return invalidArgument("STRATA_CUDA_CHANNELS='{}' is above 32", v);
         c.cudaChannels = static_cast<int>(n);
         return OkStatus();
       },
       [](const Config& c) { return fmt::format("{}", c.cudaChannels); }},
      {"STRATA_CUDA_THREADS", "count", "threads per CUDA block of the collective kernels (64..512, a multiple of 32)",
       [](Config& c, const std::string& v) {
         size_t n = 0;
         STRATA_RETURN_IF_ERROR(parseSize("STRATA_CUDA_THREADS", v, 64, &n));
         if (n > 512 || n % 32) return invalidArgument("STRATA_CUDA_THREADS='{}' is not a multiple of 32 in 64..512", v);
         c.cudaThreads = static_cast<int>(n);
         return OkStatus();
       },
       [](const Config& c) { return fmt::format("{}", c.cudaThreads); }},
      {"STRATA_CUDA_SLOT_BYTES", "bytes", "bulk-protocol FIFO slot per channel and peer (8 slots each; a multiple of 16)",
       [](Config& c, const std::string& v) {
         STRATA_RETURN_IF_ERROR(parseSize("STRATA_CUDA_SLOT_BYTES", v, 1024, &c.cudaSlotBytes));
         if (c.cudaSlotBytes % 16) return invalidArgument("STRATA_CUDA_SLOT_BYTES='{}' is not a multiple of 16", v);
         return OkStatus();
       },
       [](const Config& c) { return fmt::format("{}", c.cudaSlotBytes); }},
      {"STRATA_CUDA_LL_SLOT_BYTES", "bytes", "LL-protocol FIFO slot per channel and peer (half carries data; a multiple of 16)",
       [](Config& c, const std::string& v) {
         STRATA_RETURN_IF_ERROR(parseSize("STRATA_CUDA_LL_SLOT_BYTES", v, 256, &c.cudaLLSlotBytes));
         if (c.cudaLLSlotBytes % 16) return invalidArgument("STRATA_CUDA_LL_SLOT_BYTES='{}' is not a multiple of 16", v);
         return OkStatus();
       },
       [](const Config& c) { return fmt::format("{}", c.cudaLLSlotBytes); }},
      {"STRATA_CUDA_LL_MAX_BYTES", "bytes", "device collectives up to this many bytes use the LL protocol",
       [](Config& c, const std::string& v) { return parseSize("STRATA_CUDA_LL_MAX_BYTES", v, 0, &c.cudaLLMaxBytes); },
       [](const Config& c) { return fmt::format("{}", c.cudaLLMaxBytes); }},
      {"STRATA_CUDA_TREE_MAX_BYTES", "bytes", "device all-reduces up to this many bytes use the tree (more than 2 ranks)",
       [](Config& c, const std::string& v) { return parseSize("STRATA_CUDA_TREE_MAX_BYTES", v, 0, &c.cudaTreeMaxBytes); },
       [](const Config& c) { return fmt::format("{}", c.cudaTreeMaxBytes); }},
      {"STRATA_CUDA_ALGO", "choice", "device all-reduce algorithm: auto|ring|tree",
       [](Config& c, const std::string& v) { return parseChoice("STRATA_CUDA_ALGO", v, {"auto", "ring", "tree"}, &c.cudaAlgo); },
       [](const Config& c) { return c.cudaAlgo; }},
      {"STRATA_CUDA_PROTO", "choice", "device protocol: auto|ll|simple",
       [](Config& c, const std::string& v) { return parseChoice("STRATA_CUDA_PROTO", v, {"auto", "ll", "simple"}, &c.cudaProto); },
       [](const Config& c) { return c.cudaProto; }},
      // ibverbs transport
      {"STRATA_IB_HCA", "devices", "RDMA devices (and ports) the ibverbs transport uses: comma-separated name "
       "prefixes with an optional :port, '^' first to exclude, '=' first for exact names (as NCCL_IB_HCA; default: "
       "every active port)",
       [](Config& c, const std::string& v) {
         c.ibHca = v;
         return OkStatus();
       },
       [](const Config& c) { return c.ibHca; }},
      {"STRATA_IB_GID_INDEX", "index", "GID table index of RoCE ports (-1: choose a RoCE v2 IPv4-mapped GID, then "
       "any RoCE v2 one)",
       [](Config& c, const std::string& v) {
         if (v == "-1") {
           c.ibGidIndex = -1;
           return OkStatus();
         }
         size_t n = 0;
         STRATA_RETURN_IF_ERROR(parseSize("STRATA_IB_GID_INDEX", v, 0, &n));
         if (n > 255) return invalidArgument("STRATA_IB_GID_INDEX='{}' is above 255", v);
         c.ibGidIndex = static_cast<int>(n);
         return OkStatus();
       },
       [](const Config& c) { return fmt::format("{}", c.ibGidIndex); }},
      {"STRATA_IB_QPS_PER_CONN", "count", "RC queue pairs per ibverbs connection and rail; large transfers stripe "
       "over them (1..16)",
       [](Config& c, const std::string& v) {
         size_t n = 0;
         STRATA_RETURN_IF_ERROR(parseSize("STRATA_IB_QPS_PER_CONN", v, 1, &n));
         if (n > 16) return invalidArgument("STRATA_IB_QPS_PER_CONN='{}' is above 16", v);
         c.ibQpsPerConn = static_cast<int>(n);
         return OkStatus();
       },
       [](const Config& c) { return fmt::format("{}", c.ibQpsPerConn); }},
      {"STRATA_IB_TIMEOUT", "exponent", "ibverbs queue-pair ack timeout, 4.096 us x 2^N per try (1..31); with "
       "STRATA_IB_RETRY_CNT it bounds how soon an unreachable peer becomes a completion error",
       [](Config& c, const std::string& v) {
         size_t n = 0;
         STRATA_RETURN_IF_ERROR(parseSize("STRATA_IB_TIMEOUT", v, 1, &n));
         if (n > 31) return invalidArgument("STRATA_IB_TIMEOUT='{}' is above 31", v);
         c.ibTimeout = static_cast<int>(n);
         return OkStatus();
       },
       [](const Config& c) { return fmt::format("{}", c.ibTimeout); }},
      {"STRATA_IB_RETRY_CNT", "count", "ibverbs transport retries after an ack timeout before the work request "
       "fails (0..7; default 6: the kernel's soft-RoCE retries forever at 7, so an unreachable peer never fails)",
       [](Config& c, const std::string& v) {
         size_t n = 0;
         STRATA_RETURN_IF_ERROR(parseSize("STRATA_IB_RETRY_CNT", v, 0, &n));
         if (n > 7) return invalidArgument("STRATA_IB_RETRY_CNT='{}' is above 7", v);
         c.ibRetryCnt = static_cast<int>(n);
         return OkStatus();
       },
       [](const Config& c) { return fmt::format("{}", c.ibRetryCnt); }},
      {"STRATA_IB_SLOTS", "count", "slots of the registered FIFO each ibverbs connection receives into (its "
       "credits; 2..1024)",
       [](Config& c, const std::string& v) {
         size_t n = 0;
         STRATA_RETURN_IF_ERROR(parseSize("STRATA_IB_SLOTS", v, 2, &n));
         if (n > 1024) return invalidArgument("STRATA_IB_SLOTS='{}' is above 1024", v);
         c.ibSlots = static_cast<int>(n);
         return OkStatus();
       },
       [](const Config& c) { return fmt::format("{}", c.ibSlots); }},
      {"STRATA_IB_SLOT_BYTES", "bytes", "bytes per ibverbs FIFO slot, its 64-byte header included (a multiple of 64)",
       [](Config& c, const std::string& v) {
         STRATA_RETURN_IF_ERROR(parseSize("STRATA_IB_SLOT_BYTES", v, 4096, &c.ibSlotBytes));
         if (c.ibSlotBytes % 64 || c.ibSlotBytes > (1u << 30))
           return invalidArgument("STRATA_IB_SLOT_BYTES='{}' is not a multiple of 64 up to 1G", v);
         return OkStatus();
       },
       [](const Config& c) { return fmt::format("{}", c.ibSlotBytes); }},
      {"STRATA_IB_SINGLE_COPY_MIN_BYTES", "bytes", "ibverbs messages of at least this size go single-copy: the "
       "receiver RDMA-reads the sender's registered buffer (0: never; smaller ones are copied through the slots)",
       [](Config& c, const std::string& v) {
         return parseSize("STRATA_IB_SINGLE_COPY_MIN_BYTES", v, 0, &c.ibSingleCopyMinBytes);
       },
       [](const Config& c) { return fmt::format("{}", c.ibSingleCopyMinBytes); }},
      {"STRATA_IB_REG_CACHE_ENTRIES", "count", "memory registrations of user buffers the ibverbs transport keeps "
       "per rail after their transfer (least recently used ones beyond it are released). 0 (default): each "
       "single-copy transfer registers its buffer and releases it when done. Above 0 only when buffers stay mapped "
       "while the communicator lives: a buffer freed and mapped again at the same address would be read from its "
       "old, still registered pages",
       [](Config& c, const std::string& v) {
         return parseSize("STRATA_IB_REG_CACHE_ENTRIES", v, 0, &c.ibRegCacheEntries);
       },
       [](const Config& c) { return fmt::format("{}", c.ibRegCacheEntries); }},
      // UCX transport
      {"STRATA_UCX_CHUNK_BYTES", "bytes", "UCX transfers above STRATA_UCX_INLINE_BYTES are cut into chunks of this "
       "size (reductions run as chunks land; both ranks must agree)",
       [](Config& c, const std::string& v) { return parseSize("STRATA_UCX_CHUNK_BYTES", v, 4096, &c.ucxChunkBytes); },
       [](const Config& c) { return fmt::format("{}", c.ucxChunkBytes); }},
      {"STRATA_UCX_INLINE_BYTES", "bytes", "UCX transfers up to this size travel in one message with their header "
       "(both ranks must agree)",
       [](Config& c, const std::string& v) { return parseSize("STRATA_UCX_INLINE_BYTES", v, 0, &c.ucxInlineBytes); },
       [](const Config& c) { return fmt::format("{}", c.ucxInlineBytes); }},
      {"STRATA_UCX_WINDOW", "count", "UCX messages (heads and chunks) in flight per direction and peer, over all its rails (1..1024)",
       [](Config& c, const std::string& v) {
         size_t n = 0;
         STRATA_RETURN_IF_ERROR(parseSize("STRATA_UCX_WINDOW", v, 1, &n));
         if (n > 1024) return invalidArgument("STRATA_UCX_WINDOW='{}' is above 1024", v);
         c.ucxWindow = static_cast<int>(n);
         return OkStatus();
       },
       [](const Config& c) { return fmt::format("{}", c.ucxWindow); }},
      {"STRATA_UCX_REG_CACHE_BYTES", "bytes", "bound of the UCX transport's cache of user-buffer registrations "
       "per communicator (0, the default: no registration, UCX registers per operation). Above 0 only when buffers "
       "stay mapped while the communicator lives: nothing tells the cache that memory was freed, and on RDMA a "
       "buffer mapped again at the same address would be read from its old, still registered pages",
       [](Config& c, const std::string& v) {
         return parseSize("STRATA_UCX_REG_CACHE_BYTES", v, 0, &c.ucxRegCacheBytes);
       },
       [](const Config& c) { return fmt::format("{}", c.ucxRegCacheBytes); }},
      {"STRATA_UCX_TLS", "transports", "UCX transports of strata's UCX transport (UCX reads it, as it reads any "
       "STRATA_UCX_<NAME> before UCX_<NAME>). Default, unless UCX_TLS is set: ^sm,self (network transports only: "
       "shared memory cannot report a dead peer)",
       [](Config& c, const std::string& v) {
         c.ucxTls = v;
         return OkStatus();
       },
       [](const Config& c) { return c.ucxTls; }},
      {"STRATA_UCX_HOST_HOOKS", "bool", "keep the error-signal handlers and memory hooks UCX installs (by default "
       "strata removes the handlers and turns the hooks off, unless UCX_ERROR_SIGNALS / UCX_MEM_* changed them)",
       [](Config& c, const std::string& v) { return parseBool("STRATA_UCX_HOST_HOOKS", v, &c.ucxHostHooks); },
       [](const Config& c) { return std::string(c.ucxHostHooks ? "1" : "0"); }},
  };
  return table;
}

struct State {
  std::mutex mu;
  Config cfg;
  Status status;
  bool loaded = false;
  std::atomic<bool> ready{false};  ///< cfg loaded: readers skip the lock (hot path)
};

State& state() {
  static State s;
  return s;
}

Status parseEnv(Config* out) {
  return parseConfig([](const char* name) { return std::getenv(name); }, out);
}

}  // namespace

Status parseConfig(const std::function<const char*(const char*)>& lookup, Config* out) {
  Config c;
  for (const Entry& e : entries()) {
    const char* v = lookup(e.name);
    if (v == nullptr || *v == '\0') continue;
    STRATA_RETURN_IF_ERROR(e.set(c, v));
  }
  *out = c;
  return OkStatus();
}

const Config& config() {
  State& s = state();
  if (s.ready.load(std::memory_order_acquire)) return s.cfg;
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.loaded) {
    s.loaded = true;
    s.status = parseEnv(&s.cfg);
  }
  s.ready.store(true, std::memory_order_release);
  return s.cfg;
}

Status reloadConfig() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  // Reloading replaces values in place: meant for tests, between collectives.
  s.loaded = true;
  Config c;
  Status st = parseEnv(&c);
  s.status = st;
  if (st.ok()) s.cfg = c;
  s.ready.store(true, std::memory_order_release);
  return st;
}

Status configStatus() {
  (void)config();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.status;
}

std::vector<ConfigEntry> describeConfig() { return describeConfig(config()); }

std::vector<ConfigEntry> describeConfig(const Config& cur) {
  Config def;
  std::vector<ConfigEntry> out;
  for (const Entry& e : entries()) out.push_back({e.name, e.type, e.get(def), e.get(cur), e.help});
  return out;
}

}  // namespace strata
