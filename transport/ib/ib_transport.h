// ib_transport.h: the raw ibverbs NetTransport. createIbTransport loads libibverbs at run time,
// opens the active ports (STRATA_IB_HCA selects devices, STRATA_IB_GID_INDEX forces a GID) and
// fails with the reason, logged once per process, when there is no library, device or active port.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "transport/net_transport.h"
#include "transport/status.h"

namespace strata {

/// The ibverbs transport of rank `rank`, over the real libibverbs.
Status createIbTransport(int rank, std::unique_ptr<NetTransport>* out);

namespace ib {

struct Verbs;

/// The transport's tunables (from the config registry in production; set directly by tests).
struct Options {
  std::string hca;              ///< STRATA_IB_HCA: device[:port] list; '^' excludes, '=' exact names
  int gidIndex = -1;            ///< STRATA_IB_GID_INDEX (-1: choose)
  int qpsPerRail = 2;           ///< STRATA_IB_QPS_PER_CONN
  uint32_t slots = 16;          ///< STRATA_IB_SLOTS
  size_t slotBytes = 128 << 10; ///< STRATA_IB_SLOT_BYTES (header included; a multiple of 64)
  size_t singleCopyMinBytes = 256 << 10;  ///< STRATA_IB_SINGLE_COPY_MIN_BYTES
  size_t readChunkBytes = 1 << 20;        ///< single-copy read size per work request
  size_t regCacheEntries = 256;           ///< STRATA_IB_REG_CACHE_ENTRIES
  int maxRendezvous = 8;        ///< single-copy sends in flight per connection
  int scratchChunks = 8;        ///< read chunks of the reduction scratch ring
  int timeout = 18;             ///< STRATA_IB_TIMEOUT (ack timeout exponent)
  int retryCnt = 6;             ///< STRATA_IB_RETRY_CNT
  int sendDepth = 128;          ///< work requests per send queue
};

/// What the process's ibverbs connections did, by path (tests and diagnostics check that a run
/// reached the paths it meant to).
struct Counters {
  std::atomic<uint64_t> slotChunks{0};        ///< chunks received through the slot FIFO
  std::atomic<uint64_t> singleCopy{0};        ///< messages received by RDMA READ into the destination
  std::atomic<uint64_t> singleCopyReduce{0};  ///< messages read into the reduction scratch ring
  std::atomic<uint64_t> registrations{0};     ///< ibv_reg_mr calls for user buffers
};
Counters& counters();

/// Options from the config registry.
Options optionsFromConfig();

/// The transport over an injected verbs table (tests use their provider; production passes the
/// dlopen'd one). Fails with a one-line reason when no port is usable.
Status createTransport(const Verbs* verbs, const Options& opt, int rank, std::unique_ptr<NetTransport>* out);

}  // namespace ib
}  // namespace strata
