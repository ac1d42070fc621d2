// comm.cc: communicator creation (join, split), error state, abort and custom ops.
#include "collectives/comm.h"

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "collectives/auto_bind.h"
#include "collectives/job_topology.h"
#include "collectives/tuner.h"
#include "kernels/host_reduce.h"
#include "topology/cpu_order.h"
#include "topology/host_identity.h"
#include "transport/config.h"
#include "transport/log.h"
#include "transport/net_select.h"
#include "transport/shared_buffers.h"

namespace strata {
namespace {

struct LiveSet {
  std::mutex mu;
  std::unordered_set<const strataComm*> set;
};
LiveSet& live() {
  static LiveSet* s = new LiveSet();  // never destroyed: comms may be freed during exit
  return *s;
}

}  // namespace

static std::atomic<uint64_t> gUnregistrations{0};

void registerComm(Comm* c) {
  std::lock_guard<std::mutex> lock(live().mu);
  live().set.insert(c);
}
void unregisterComm(Comm* c) {
  std::lock_guard<std::mutex> lock(live().mu);
  live().set.erase(c);
  gUnregistrations.fetch_add(1, std::memory_order_release);
}
uint64_t commRegistryGeneration() { return gUnregistrations.load(std::memory_order_acquire); }
bool isLiveComm(const strataComm* c) {
  if (!c) return false;
  std::lock_guard<std::mutex> lock(live().mu);
  return live().set.count(c) != 0;
}

Status localRankInfo(int rank, int nranks, RankInfo* out) {
  RankInfo info;
  std::memset(static_cast<void*>(&info), 0, sizeof(info));  // no uninitialised padding on the wire
  info.rank = rank;
  info.gpu = -1;
  info.homeRail = -1;
  info.netCaps = localNetCaps();
  info.pid = getpid();
  info.hostHash = topology::hostHash();
  info.processHash = topology::processHash();
  std::string h = topology::hostName();
  std::strncpy(info.hostname, h.c_str(), sizeof(info.hostname) - 1);
  topology::callerCpuMask(info.cpuMask);
  STRATA_RETURN_IF_ERROR(fillNodeIdentity(rank, nranks, &info));
  *out = info;
  return OkStatus();
}

bool ranksOutnumberCpus(const std::vector<RankInfo>& infos, int rank) {
  int localRanks = 0;
  uint64_t cpus[4] = {};
  for (const RankInfo& i : infos) {
    if (i.hostHash != infos[rank].hostHash) continue;
    ++localRanks;
    for (int w = 0; w < 4; ++w) cpus[w] |= i.cpuMask[w];
  }
  int ncpu = 0;
  for (uint64_t w : cpus) ncpu += __builtin_popcountll(w);
  return localRanks > std::max(ncpu, 1);
}

// The communicator modes this rank asks for: STRATA_DETERMINISTIC, or the config's field (read
// only when the caller's struct is new enough to have it).
uint32_t requestedCommFlags(const strataConfig_t* cfg) {
  const bool cfgDet = cfg && cfg->size >= offsetof(strataConfig_t, deterministic) + sizeof(int) &&
                      cfg->deterministic == 1;
  return config().deterministic || cfgDet ? RankInfo::kCommDeterministic : 0;
}

// The config's timeout in seconds, or 0 when the caller's struct predates the field or leaves it unset.
double requestedTimeout(const strataConfig_t* cfg) {
  const bool has = cfg && cfg->size >= offsetof(strataConfig_t, timeout) + sizeof(double);
  return has && cfg->timeout > 0 ? cfg->timeout : 0;
}

Status Comm::create(const strataUniqueId& id, int nranks, int rank, const strataConfig_t* cfg,
                    std::unique_ptr<Comm>* out) {
  STRATA_RETURN_IF_ERROR(configStatus());
  RankInfo self;
  STRATA_RETURN_IF_ERROR(localRankInfo(rank, nranks, &self));
  self.commFlags = requestedCommFlags(cfg);
  std::unique_ptr<Bootstrap> bs;
  const double joinTimeout = requestedTimeout(cfg) > 0 ? requestedTimeout(cfg) : config().joinTimeoutSec;
  STRATA_RETURN_IF_ERROR(Bootstrap::join(id, rank, nranks, self, joinTimeout, &bs));
  std::unique_ptr<Comm> c(new Comm());
  STRATA_RETURN_IF_ERROR(c->init(std::move(bs), cfg));
  *out = std::move(c);
  return OkStatus();
}

Status Comm::init(std::unique_ptr<Bootstrap> bs, const strataConfig_t* cfg, double parentTimeout) {
  magic = kMagic;
  bootstrap_ = std::move(bs);
  rank_ = bootstrap_->rank();
  nranks_ = bootstrap_->nranks();
  if (cfg && cfg->commName) name_ = cfg->commName;
  timeoutSec_ = requestedTimeout(cfg) > 0 ? requestedTimeout(cfg) : parentTimeout > 0 ? parentTimeout : config().timeoutSec;
  const auto& infos = bootstrap_->infos();
  layout_ = layoutFromInfos(infos);
  costModel_ = std::make_unique<CostModel>(layout_, jobLinkCosts(infos));
  allLocal_ = config().transport != "tcp" && layout_.nnodes() == 1;
  oversubscribed_ = ranksOutnumberCpus(infos, rank_);
  autoBindCallingThread(infos, rank_);
  int askedDeterministic = 0;
  for (const RankInfo& i : infos) askedDeterministic += (i.commFlags & RankInfo::kCommDeterministic) != 0;
  deterministic_ = askedDeterministic > 0;
  if (rank_ == 0 && deterministic_)
    log::info("communicator{}: deterministic reductions (asked by {} of {} ranks){}", name_.empty() ? "" : " " + name_,
              askedDeterministic, nranks_,
              config().algo != "auto" ? fmt::format("; STRATA_ALGO={} does not apply to reductions", config().algo)
                                      : std::string());
  customOps_.resize(4);
  if (rank_ == 0 && layout_.nnodes() > 1)
    log::info("communicator{}: {} ranks on {}", name_.empty() ? "" : " " + name_, nranks_, layout_.describe());
  Status st = setupTransports(*bootstrap_, layout_, &transports_);
  if (!st.ok()) return Status(st.code(), fmt::format("rank {}: transport setup failed: {}", rank_, st.message()));
  opRing_.attach(bootstrap_->commTag(), rank_, nranks_, name_);  // hang reports (op_ring.h)
  // Set up under the bootstrap's set-up timeout; from here on its exchanges inside calls (split,
  // argument checks, connections on first use) wait as long as any call on this communicator.
  bootstrap_->setTimeout(timeoutSec_);
  log::info("rank {} of {}: communicator ready{}", rank_, nranks_, name_.empty() ? "" : " (" + name_ + ")");
  return OkStatus();
}

Status Comm::split(int color, int key, const strataConfig_t* cfg, std::unique_ptr<Comm>* out) {
  struct Entry {
    int32_t color, key;
    RankInfo info;
  };
  Entry mine;
  std::memset(static_cast<void*>(&mine), 0, sizeof(mine));
  mine.color = color;
  mine.key = key;
  // The member keeps its node (a virtual node of the topology file stays the same node).
  STRATA_RETURN_IF_ERROR(localRankInfo(-1, nranks_, &mine.info));
  mine.info.nodeHash = bootstrap_->infos()[rank_].nodeHash;
  // A split of a deterministic communicator stays deterministic.
  mine.info.commFlags = requestedCommFlags(cfg) | (deterministic_ ? RankInfo::kCommDeterministic : 0);
  std::memcpy(mine.info.nodeName, bootstrap_->infos()[rank_].nodeName, sizeof(mine.info.nodeName));
  int lfd = -1;
  if (color != STRATA_SPLIT_NOCOLOR) STRATA_RETURN_IF_ERROR(Bootstrap::openListener(&lfd, &mine.info));
  std::vector<Entry> all(static_cast<size_t>(nranks_));
  // A call on this communicator: it waits for the other members as long as a collective would.
  Status st = bootstrap_->allGather(&mine, all.data(), sizeof(Entry));
  if (st.code() == strataTimeout)
    st = makeError(strataTimeout, "rank {}: split: {}: no progress for {} s (STRATA_TIMEOUT or the communicator's timeout)",
                   rank_, st.message(), timeoutSec_);
  const uint64_t splitIndex = splitCount_++;
  if (!st.ok() || color == STRATA_SPLIT_NOCOLOR) {
    if (lfd >= 0) ::close(lfd);
    *out = nullptr;
    return st;
  }
  std::vector<int> members;
  for (int r = 0; r < nranks_; ++r)
    if (all[r].color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return all[a].key != all[b].key ? all[a].key < all[b].key : a < b;
  });
  std::vector<RankInfo> infos;
  int newRank = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    RankInfo inf = all[members[i]].info;
    inf.rank = static_cast<int>(i);
    infos.push_back(inf);
    if (members[i] == rank_) newRank = static_cast<int>(i);
  }
  // A tag no other communicator of this job uses: parent tag, split index and colour.
  uint64_t parts[3] = {bootstrap_->commTag(), splitIndex, static_cast<uint64_t>(static_cast<uint32_t>(color))};
  uint64_t tag = topology::hashBytes(parts, sizeof(parts));
  std::unique_ptr<Bootstrap> bs;
  // The new communicator is set up within the join timeout, and within its own when that is shorter
  // (the split is still a call on this one).
  const double childTimeout = requestedTimeout(cfg) > 0 ? requestedTimeout(cfg) : timeoutSec_;
  STRATA_RETURN_IF_ERROR(Bootstrap::fromInfos(lfd, newRank, std::move(infos), tag, bootstrap_->secret(),
                                              std::min(config().joinTimeoutSec, childTimeout), &bs));
  std::unique_ptr<Comm> c(new Comm());
  STRATA_RETURN_IF_ERROR(c->init(std::move(bs), cfg, timeoutSec_));  // a split keeps its parent's timeout
  *out = std::move(c);
  return OkStatus();
}

Comm::~Comm() {
  magic = 0;
  if (scratchShared_) freeShared(scratchShared_);
}

void Comm::setLastError(const std::string& msg) {
  std::lock_guard<std::mutex> lock(errMu_);
  lastError_ = msg;
}

std::string Comm::lastError() {
  std::lock_guard<std::mutex> lock(errMu_);
  return lastError_;
}

void Comm::fail(const Status& st, bool requested) {
  {
    std::lock_guard<std::mutex> lock(errMu_);
    if (!failStatus_.ok()) return;
    failStatus_ = st;
    lastError_ = st.message();
  }
  asyncError_.store(st.code() == strataAborted ? strataAborted : strataRemoteError);
  if (requested) log::info("{}", st.message());
  else log::warn("{}", st.message());
  transports_.markFailed(st.message());
  bootstrap_->abort();
}

Status Comm::failedStatus() {
  std::lock_guard<std::mutex> lock(errMu_);
  return failStatus_;
}

void Comm::abort() { stopCalls("aborted"); }

void Comm::revoke() { stopCalls("revoked"); }

void Comm::stopCalls(const char* what) {
  aborted_.store(true);
  bootstrap_->abort();
  transports_.bell()->ring();
  // Calls in other threads notice within one sleep slice (<= 50 ms) and leave.
  for (int i = 0; i < 400 && activeCalls_.load() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  fail(Status(strataAborted, fmt::format("rank {}: communicator {}", rank_, what)), true);  // no-op if it failed before
}

Status Comm::createPreMulSum(const void* scalar, strataDataType_t dtype, strataRedOp_t* op) {
  size_t idx = 0;
  while (idx < customOps_.size() && customOps_[idx].live) ++idx;
  if (idx == customOps_.size()) customOps_.emplace_back();
  CustomOp& c = customOps_[idx];
  c.live = true;
  c.dtype = dtype;
  std::memset(c.scalar, 0, sizeof(c.scalar));
  std::memcpy(c.scalar, scalar, kernels::dtypeSize(dtype));
  *op = static_cast<strataRedOp_t>(strataNumOps + idx);
  return OkStatus();
}

const CustomOp* Comm::customOp(strataRedOp_t op) const {
  if (op < strataNumOps) return nullptr;
  size_t idx = static_cast<size_t>(op) - strataNumOps;
  if (idx >= customOps_.size() || !customOps_[idx].live) return nullptr;
  return &customOps_[idx];
}

Status Comm::destroyOp(strataRedOp_t op) {
  if (op < strataNumOps) return invalidArgument("op {} is a built-in op and cannot be destroyed", static_cast<int>(op));
  size_t idx = static_cast<size_t>(op) - strataNumOps;
  if (idx >= customOps_.size() || !customOps_[idx].live)
    return invalidArgument("op {} is not a live custom op of this communicator", static_cast<int>(op));
  customOps_[idx].live = false;
  return OkStatus();
}

const Schedule& Comm::schedule(Algo algo, const CollArgs& a) {
  ++scheduleClock_;
  CachedSchedule* victim = nullptr;
  for (CachedSchedule& c : schedules_) {
    if (c.algo == algo && c.args.coll == a.coll && c.args.count == a.count && c.args.root == a.root &&
        c.args.nranks == a.nranks && c.args.rank == a.rank && c.args.inPlace == a.inPlace) {
      c.lastUse = scheduleClock_;
      return c.schedule;
    }
    if (!victim || c.lastUse < victim->lastUse) victim = &c;
  }
  if (schedules_.size() < kScheduleCacheSize) {
    schedules_.reserve(kScheduleCacheSize);  // entries never move: references stay valid
    schedules_.push_back(CachedSchedule{});
    victim = &schedules_.back();
  }
  victim->algo = algo;
  victim->args = a;
  victim->lastUse = scheduleClock_;
  buildSchedule(algo, a, &victim->schedule);
  return victim->schedule;
}

Algo Comm::chooseAlgo(CollType coll, size_t count, size_t elemBytes) {
  if (deterministic_ && isReduction(coll)) return deterministicAlgo(coll, count * elemBytes);
  TunerInput in{coll, nranks_, 0, allLocal_};
  const bool perRank = coll == CollType::ReduceScatter || coll == CollType::AllGather || coll == CollType::AllToAll ||
                       coll == CollType::Gather || coll == CollType::Scatter;
  in.bytes = count * elemBytes * (perRank ? static_cast<size_t>(nranks_) : 1);
  in.count = count;
  in.elemBytes = elemBytes;
  // One node: size thresholds, cheaper than a cache lookup. Across nodes: the model, cached.
  if (allLocal_ || layout_.nnodes() == 1) return strata::chooseAlgo(in);
  for (const TunedChoice& t : tuned_)
    if (t.coll == coll && t.count == count && t.elemBytes == elemBytes) return t.algo;
  in.model = costModel_.get();
  const Algo a = strata::chooseAlgo(in);
  if (tuned_.size() >= kScheduleCacheSize) tuned_.erase(tuned_.begin());
  tuned_.reserve(kScheduleCacheSize);
  tuned_.push_back(TunedChoice{coll, count, elemBytes, a});
  return a;
}

char* Comm::scratch(size_t bytes) {
  if (scratchShared_ && scratchSize_ >= bytes) return scratchShared_;
  if (scratch_.empty()) {
    const size_t size = std::max(bytes, scratchSize_ * 2);
    void* p = nullptr;
    if (allocShared(&p, size).ok()) {
      if (scratchShared_) freeShared(scratchShared_);
      scratchShared_ = static_cast<char*>(p);
      scratchSize_ = size;
      return scratchShared_;
    }
  }
  if (scratch_.size() < bytes) scratch_.resize(std::max(bytes, scratch_.size() * 2));
  return scratch_.data();
}

}  // namespace strata
