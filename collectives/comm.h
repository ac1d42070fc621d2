// comm.h: the communicator. Owns the bootstrap, the transports, the per-communicator scratch and
// schedule buffers, custom reduction ops, error state and the abort flag. The C API's
// strataComm_t points at one of these.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/cost_model.h"
#include "collectives/device_exec.h"
#include "collectives/op_ring.h"
#include "collectives/schedule.h"
#include "topology/layout.h"
#include "strata/strata.h"
#include "transport/bootstrap.h"
#include "transport/status.h"
#include "transport/transport_setup.h"

struct strataComm {
  uint32_t magic = 0;
};

namespace strata {

/// A user-created op (pre-multiplied sum): the scalar, stored in the op's data type.
struct CustomOp {
  bool live = false;
  strataDataType_t dtype = strataFloat32;
  alignas(8) unsigned char scalar[8] = {};
};

class Comm : public strataComm {
 public:
  static constexpr uint32_t kMagic = 0x434f4d4d;  // "COMM"

  /// Joins as `rank` of `nranks` through the unique id's root.
  static Status create(const strataUniqueId& id, int nranks, int rank, const strataConfig_t* cfg,
                       std::unique_ptr<Comm>* out);
  /// Collective over this comm: builds the sub-communicator of `color` (see strataCommSplit).
  Status split(int color, int key, const strataConfig_t* cfg, std::unique_ptr<Comm>* out);
  /// The communicator of the ranks not in `exclude` (ascending, distinct, valid, without this
  /// rank), renumbered in order; made by the survivors alone, through the listener of the lowest
  /// of them, so it works after peers died. STRATA_SHRINK_ABORT stops this rank's calls first.
  /// Collective over the survivors, who must pass the same list (a difference is an error naming
  /// both lists), or with STRATA_SHRINK_DETECT each what it knows, and dead ranks are found.
  /// collectives/comm_shrink.cc.
  Status shrink(const std::vector<int>& exclude, const strataConfig_t* cfg, int flags, std::unique_ptr<Comm>* out);
  ~Comm();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const std::string& name() const { return name_; }
  /// True when every rank of the comm is on one node and reachable without the network (the
  /// same answer on every rank, so tuner choices agree).
  bool allLocal() const { return allLocal_; }
  /// Where the ranks sit (nodes, local ranks, rails); identical on every rank.
  const topology::CommLayout& layout() const { return layout_; }
  /// The alpha-beta model over this layout (tuner, placement reports, planners).
  const CostModel& costModel() const { return *costModel_; }
  /// The algorithm for a collective of `count` elements of `elemBytes`: STRATA_ALGO, else the
  /// measured size thresholds on one node, else the cost model's fastest (cached per shape).
  Algo chooseAlgo(CollType coll, size_t count, size_t elemBytes);
  /// Deterministic mode (STRATA_DETERMINISTIC or the config's field, on any rank): reductions use
  /// the algorithms that sum every element in one balanced tree over the ranks in rank order.
  bool deterministic() const { return deterministic_; }
  /// Seconds an operation may wait without progress: strataConfig_t::timeout, else STRATA_TIMEOUT.
  double timeoutSec() const { return timeoutSec_; }
  /// More ranks of this communicator on this machine than cores this process may use: waits
  /// yield the core from the first poll instead of spinning.
  bool oversubscribed() const { return oversubscribed_; }

  // Error state.
  void setLastError(const std::string& msg);
  std::string lastError();
  /// Records a failure that leaves the comm unusable (peer death, timeout, abort) and tells peers.
  /// A failure is a warning; an abort or revoke the caller asked for (`requested`) is not.
  void fail(const Status& st, bool requested = false);
  Status failedStatus();
  bool failed() const { return asyncError_.load() != strataSuccess; }
  strataResult_t asyncError() const { return asyncError_.load(); }

  /// Makes pending and future waits return strataAborted; returns once no call is inside.
  void abort();
  /// As abort, but the communicator stays for destroy and shrink (ncclCommRevoke).
  void revoke();
  bool aborted() const { return aborted_.load(std::memory_order_relaxed); }
  std::atomic<int>& activeCalls() { return activeCalls_; }

  // Custom ops.
  Status createPreMulSum(const void* scalar, strataDataType_t dtype, strataRedOp_t* op);
  Status destroyOp(strataRedOp_t op);
  const CustomOp* customOp(strataRedOp_t op) const;

  CommTransports& transports() { return transports_; }
  Connection* conn(int peer) { return transports_.conn(peer); }
  Bootstrap& bootstrap() { return *bootstrap_; }

  /// Scratch memory of at least `bytes`, kept across calls (grows, never shrinks).
  char* scratch(size_t bytes);
  /// The schedule for (algo, args), built on first use and cached (least recently used of
  /// kScheduleCacheSize evicted): training repeats the same shapes, so steady-state calls neither
  /// build schedules nor allocate.
  const Schedule& schedule(Algo algo, const CollArgs& args);
  static constexpr size_t kScheduleCacheSize = 64;

  /// Recent operations, for hang reports (collectives/op_ring.h).
  OpRing& opRing() { return opRing_; }

  /// The CUDA path's state (connections, flags, watchdog), made on the first device operation.
  std::unique_ptr<DeviceState, DeviceStateDeleter>& device() { return device_; }

 private:
  Comm() = default;
  /// `parentTimeout` > 0: a split or shrink keeps its parent's timeout unless `cfg` sets one.
  Status init(std::unique_ptr<Bootstrap> bs, const strataConfig_t* cfg, double parentTimeout = 0);
  void stopCalls(const char* what);

  int rank_ = 0, nranks_ = 1;
  bool allLocal_ = true;
  topology::CommLayout layout_;
  std::unique_ptr<CostModel> costModel_;
  struct TunedChoice {
    CollType coll;
    size_t count, elemBytes;
    Algo algo;
  };
  std::vector<TunedChoice> tuned_;
  bool oversubscribed_ = false;
  bool deterministic_ = false;
  double timeoutSec_ = 600;
  uint64_t splitCount_ = 0, shrinkCount_ = 0;
  std::string name_;
  std::unique_ptr<Bootstrap> bootstrap_;
  CommTransports transports_;
  std::vector<CustomOp> customOps_;
  // Scratch: a shareable region (transport/shared_buffers.h), so that sends staged through it go
  // single-copy to processes on this machine; a plain vector if that cannot be had.
  char* scratchShared_ = nullptr;
  size_t scratchSize_ = 0;
  std::vector<char> scratch_;
  struct CachedSchedule {
    Algo algo;
    CollArgs args;
    uint64_t lastUse;
    Schedule schedule;
  };
  std::vector<CachedSchedule> schedules_;
  uint64_t scheduleClock_ = 0;
  std::mutex errMu_;
  std::string lastError_;
  Status failStatus_;
  std::atomic<strataResult_t> asyncError_{strataSuccess};
  std::atomic<bool> aborted_{false};
  std::atomic<int> activeCalls_{0};
  OpRing opRing_;
  std::unique_ptr<DeviceState, DeviceStateDeleter> device_;  ///< last: destroyed first (its watchdog uses the comm)
};

/// Live-communicator registry, so that a destroyed or foreign handle is an error, not a crash.
void registerComm(Comm* c);
void unregisterComm(Comm* c);
bool isLiveComm(const strataComm* c);
/// Changes whenever a communicator is unregistered: a handle found live while it held its value
/// is still live (callers cache the answer per thread and skip the registry's lock).
uint64_t commRegistryGeneration();

/// This process's RankInfo for a rank about to join (its CPU mask, node identity and interfaces
/// included); fails when the topology file cannot be used.
Status localRankInfo(int rank, int nranks, RankInfo* out);
/// True when `rank`'s machine has more ranks of `infos` than CPUs those ranks may run on together
/// (each may be bound to its own CPU by its launcher, so one rank's mask alone does not tell).
/// Waits of oversubscribed ranks yield the core from the first idle poll.
bool ranksOutnumberCpus(const std::vector<RankInfo>& infos, int rank);
/// The communicator modes a config (or STRATA_DETERMINISTIC) asks for: RankInfo::kComm* flags.
uint32_t requestedCommFlags(const strataConfig_t* cfg);
/// The config's timeout in seconds, or 0 when unset (or the caller's struct predates the field).
double requestedTimeout(const strataConfig_t* cfg);

}  // namespace strata
