// job_sim.cc: the discrete-event run of one training step over every rank (see job_sim.h).
#include "planner/job_sim.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <queue>
#include <stdexcept>
#include <unordered_map>

#include "schedule.h"  // examples/trainer: the schedules as data

namespace strata::planner {
namespace {

constexpr int kTp = 0, kCp = 1, kEp = 2, kDp = 3, kPp = 4;

/// A rendezvous of one group: members arrive one by one; the last releases them all.
struct Meeting {
  int arrived = 0;
  double latest = 0;
  std::vector<int> waiting;
};

std::string mib(double bytes) { return fmt::format("{:.1f} MiB", bytes / double(1 << 20)); }

std::string dimNames(unsigned dims) {  // "tp", "tp x cp"
  static const char* names[kParallelDims] = {"tp", "cp", "ep", "dp", "pp"};
  std::string s;
  for (int d = 0; d < kParallelDims; ++d)
    if (dims & (1u << d)) s += (s.empty() ? "" : " x ") + std::string(names[d]);
  return s;
}

class JobSim {
 public:
  JobSim(const ModelSpec& m, const Prediction& pred, CommCoster& coster, bool dpOverlap)
      : m_(m), pred_(pred), l_(pred.layout), coster_(coster), dpOverlap_(dpOverlap) {}

  JobSimResult run() {
    const auto t0 = std::chrono::steady_clock::now();
    setup();
    simulatePasses();
    reduceGradients();
    r_.wallSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r_;
  }

 private:
  struct Rank {
    int stage = 0;
    size_t next = 0;     ///< the next action of its stage's schedule
    int phase = 0;       ///< 0: wait for the input, 1: compute, 2: leave the rendezvous, send
    double t = 0;        ///< its clock
    int passGroup = -1;  ///< tp x ep rendezvous, -1 alone
    int dpGroup = -1;
    int prev = -1, next2 = -1;  ///< the same coordinates on the previous / next stage
    uint64_t blockedOn = ~0ull;
    double passStart = 0;  ///< when the current pass began computing
    std::vector<int> bwdDone;   ///< per local chunk: passes whose gradients are complete
    std::vector<double> from, ready;  ///< per local chunk: its last gradient pass's start and end
  };

  void setup() {
    const ParallelSpec spec = l_.spec();
    P_ = l_.pp, C_ = l_.pp * l_.vp, M_ = l_.microbatches(m_);
    trainer::Config cfg;
    cfg.pp = l_.pp, cfg.virtualStages = l_.vp, cfg.microbatches = int(M_), cfg.schedule = scheduleName(l_.schedule);
    split_ = trainer::splitBackward(cfg);
    for (int s = 0; s < P_; ++s) acts_.push_back(trainer::scheduleFor(cfg, s));

    // Pass collectives at their exact times; which dimensions their groups span.
    unsigned passDims = 0;
    for (const GroupCall& c : pred_.plan.layerCalls) {
      double t = coster_.exact(c.group, c.coll, c.algo, c.bytes);
      if (t < 0) t = c.fittedSeconds;
      layerFwd_ += c.perFwd * t, layerBwd_ += c.perBwd * t;
      passDims |= c.dims;
      r_.calls.push_back({fmt::format("{} {} ({}) on {}, {}", dimNames(c.dims), collName(c.coll), algoName(c.algo),
                                      c.group.key(), mib(c.bytes)),
                          c.fittedSeconds, t});
    }
    unsigned dpDims = 0;  // the lane meets the union of its reductions' groups (dense and expert replicas)
    for (const GroupCall& c : pred_.plan.dpCalls) dpDims |= c.dims;
    const int world = l_.world();
    r_.ranks = world;
    ranks_.resize(size_t(world));
    std::unordered_map<int, int> passIds, dpIds;
    for (int r = 0; r < world; ++r) {
      Rank& k = ranks_[size_t(r)];
      std::array<int, kParallelDims> c = spec.coords(r);
      k.stage = c[kPp];
      auto groupOf = [&](unsigned dims, std::unordered_map<int, int>& ids) {
        std::array<int, kParallelDims> lead = c;
        for (int d = 0; d < kParallelDims; ++d)
          if (dims & (1u << d)) lead[size_t(d)] = 0;
        return ids.emplace(spec.rankOf(lead), int(ids.size())).first->second;
      };
      if (passDims) k.passGroup = groupOf(passDims, passIds);
      if (dpDims) k.dpGroup = groupOf(dpDims, dpIds);
      std::array<int, kParallelDims> n = c;
      n[kPp] = (c[kPp] + P_ - 1) % P_;
      k.prev = spec.rankOf(n);
      n[kPp] = (c[kPp] + 1) % P_;
      k.next2 = spec.rankOf(n);
      k.bwdDone.assign(size_t(l_.vp), 0);
      k.ready.assign(size_t(l_.vp), 0.0);
      k.from.assign(size_t(l_.vp), 0.0);
    }
    passMeet_.resize(passIds.size());
    passSize_ = 1;
    if (passDims & (1u << kTp)) passSize_ *= l_.tp;
    if (passDims & (1u << kEp)) passSize_ *= l_.ep;
    dpGroups_ = int(dpIds.size());
  }

  uint64_t key(int rank, trainer::Op op, int chunk, int mb) const {
    return ((uint64_t(rank) * 2 + (op == trainer::Op::F ? 0 : 1)) * uint64_t(C_) + uint64_t(chunk)) * uint64_t(M_) +
           uint64_t(mb);
  }

  double computeOf(trainer::Op op, int chunk) const {
    const double n = chunkLayers(m_, chunk, C_);
    const PassCost& lc = pred_.plan.layerCompute;
    const bool last = chunk == C_ - 1;
    const PassCost& lg = pred_.plan.logitsCompute;
    if (op == trainer::Op::F) return n * lc.fwd + (last ? lg.fwd : 0);
    if (op == trainer::Op::W) return n * lc.bwdWeight + (last ? lg.bwdWeight : 0);
    double b = n * lc.bwdInput + (last ? lg.bwdInput : 0);
    if (!split_) b += n * lc.bwdWeight + (last ? lg.bwdWeight : 0);
    return b;
  }

  double collectivesOf(trainer::Op op, int chunk) const {
    const double n = chunkLayers(m_, chunk, C_);
    return op == trainer::Op::F ? n * layerFwd_ : op == trainer::Op::B ? n * layerBwd_ : 0.0;
  }

  void wake(int r, double t) {
    ranks_[size_t(r)].t = std::max(ranks_[size_t(r)].t, t);
    runnable_.push({ranks_[size_t(r)].t, r});
  }

  void send(int to, trainer::Op op, int chunk, int mb, double arrival) {
    ++r_.messages;
    const uint64_t k = key(to, op, chunk, mb);
    inbox_[k] = arrival;
    if (ranks_[size_t(to)].blockedOn == k) {
      ranks_[size_t(to)].blockedOn = ~0ull;
      wake(to, arrival);
    }
  }

  /// Runs rank r until it blocks or its schedule ends.
  void advance(int r) {
    Rank& k = ranks_[size_t(r)];
    const std::vector<trainer::Action>& acts = acts_[size_t(k.stage)];
    while (k.next < acts.size()) {
      const trainer::Action& a = acts[k.next];
      const int chunk = a.v * P_ + k.stage;
      if (k.phase == 0) {  // the input from the neighbour stage
        const bool needs = (a.op == trainer::Op::F && chunk > 0) || (a.op == trainer::Op::B && chunk + 1 < C_);
        if (needs) {
          const uint64_t want = key(r, a.op, chunk, a.mb);
          auto it = inbox_.find(want);
          if (it == inbox_.end()) {
            k.blockedOn = want;
            return;
          }
          k.t = std::max(k.t, it->second);
          inbox_.erase(it);
        }
        k.passStart = k.t;
        k.t += computeOf(a.op, chunk);
        ++r_.passes;
        k.phase = 1;
      }
      if (k.phase == 1) {  // the pass's collectives: a rendezvous of its group
        const double coll = collectivesOf(a.op, chunk);
        k.phase = 2;
        if (coll > 0 && k.passGroup >= 0) {
          Meeting& g = passMeet_[size_t(k.passGroup)];
          g.latest = std::max(g.latest, k.t);
          if (++g.arrived < passSize_) {
            g.waiting.push_back(r);
            return;
          }
          const double release = g.latest + coll;
          ++r_.rendezvous;
          for (int w : g.waiting) {
            ranks_[size_t(w)].t = release;
            runnable_.push({release, w});
          }
          g = Meeting{};
          k.t = release;
        } else {
          k.t += coll;
        }
      }
      // phase 2: hand on the result, note finished gradients, next action
      if (a.op == trainer::Op::F && chunk + 1 < C_) send(k.next2, trainer::Op::F, chunk + 1, a.mb, k.t + pred_.plan.ppHop);
      if (a.op == trainer::Op::B && chunk > 0) send(k.prev, trainer::Op::B, chunk - 1, a.mb, k.t + pred_.plan.ppHop);
      if (a.op == trainer::Op::W || (a.op == trainer::Op::B && !split_)) {
        if (++k.bwdDone[size_t(a.v)] == M_) k.from[size_t(a.v)] = k.passStart, k.ready[size_t(a.v)] = k.t;
      }
      r_.makespan = std::max(r_.makespan, k.t);
      k.phase = 0;
      ++k.next;
    }
  }

  void simulatePasses() {
    for (int r = 0; r < int(ranks_.size()); ++r) runnable_.push({0.0, r});
    while (!runnable_.empty()) {
      const int r = runnable_.top().second;
      runnable_.pop();
      advance(r);
    }
    for (const Rank& k : ranks_)
      if (k.next < acts_[size_t(k.stage)].size()) throw std::logic_error("job simulation stalled");
  }

  /// The data-parallel lane, bucket by layer as the trainer reduces: layer i of a chunk's n has
  /// its gradients once the chunk's last gradient pass (its last backward, or W when split) has
  /// gone through it (backward runs from the last layer: layer n-1 first). A bucket is reduced
  /// once every member of the group has it and the lane is free. Without overlap: one reduction
  /// of everything after the passes.
  void reduceGradients() {
    const double optimizer = pred_.optimizer;
    const size_t V = size_t(l_.vp), G = size_t(std::max(dpGroups_, 0));
    std::vector<double> from(G * V, 0.0), upto(G * V, 0.0);  // latest member's last-pass window
    std::vector<int> stageOf(G, 0);
    for (const Rank& k : ranks_) {
      if (k.dpGroup < 0) continue;
      stageOf[size_t(k.dpGroup)] = k.stage;
      for (size_t v = 0; v < V; ++v) {
        const size_t i = size_t(k.dpGroup) * V + v;
        from[i] = std::max(from[i], dpOverlap_ ? k.from[v] : r_.makespan);
        upto[i] = std::max(upto[i], dpOverlap_ ? k.ready[v] : r_.makespan);
      }
    }
    std::vector<double> groupEnd(G, 0.0);
    for (size_t g = 0; g < G; ++g) {
      const int s = stageOf[g];
      int stageLayers = 0;
      for (int v = 0; v < l_.vp; ++v) stageLayers += chunkLayers(m_, v * P_ + s, C_);
      struct Bucket {
        double ready, share;
      };
      std::vector<Bucket> buckets;
      if (!dpOverlap_) buckets.push_back({r_.makespan, 1.0});  // one reduction after the passes
      for (int v = 0; v < l_.vp && dpOverlap_; ++v) {
        const int n = chunkLayers(m_, v * P_ + s, C_);
        const double a = from[g * V + size_t(v)], b = upto[g * V + size_t(v)];
        for (int j = 1; j <= n; ++j)  // the j-th layer the backward finishes
          buckets.push_back({a + (b - a) * j / n, 1.0 / std::max(stageLayers, 1)});
      }
      std::sort(buckets.begin(), buckets.end(), [](const Bucket& x, const Bucket& y) { return x.ready < y.ready; });
      double lane = 0;
      for (const Bucket& bk : buckets) {
        double t = 0;
        for (const GroupCall& c : pred_.plan.dpCalls) {  // the runtime chooses per call: at the bucket's size
          const CommTime fit = coster_.collective(c.group, c.coll, c.bytes * bk.share);
          const double e = coster_.exact(c.group, c.coll, fit.algo, c.bytes * bk.share);
          t += e < 0 ? fit.seconds : e;
        }
        lane = std::max(lane, bk.ready) + t;
        ++r_.rendezvous;
      }
      groupEnd[g] = lane;
    }
    for (const GroupCall& c : pred_.plan.dpCalls) {
      const double e = coster_.exact(c.group, c.coll, c.algo, c.bytes);
      r_.calls.push_back({fmt::format("dp {} ({}) on {}, {} (whole stage)", collName(c.coll), algoName(c.algo),
                                      c.group.key(), mib(c.bytes)),
                          c.fittedSeconds, e < 0 ? c.fittedSeconds : e});
    }
    double stepEnd = 0;
    for (const Rank& k : ranks_) {
      double end = r_.makespan;  // the step ends together (the optimizer waits for the loss and norm)
      if (k.dpGroup >= 0) end = std::max(end, groupEnd[size_t(k.dpGroup)]);
      stepEnd = std::max(stepEnd, end + optimizer);
    }
    r_.step = stepEnd;
    r_.dpTail = r_.step - r_.makespan - optimizer;
  }

  const ModelSpec& m_;
  const Prediction& pred_;
  const Layout& l_;
  CommCoster& coster_;
  bool dpOverlap_;
  int P_ = 1, C_ = 1;
  long M_ = 1;
  bool split_ = false;
  std::vector<std::vector<trainer::Action>> acts_;
  double layerFwd_ = 0, layerBwd_ = 0;
  std::vector<Rank> ranks_;
  std::vector<Meeting> passMeet_;
  int passSize_ = 1, dpGroups_ = 0;
  std::unordered_map<uint64_t, double> inbox_;
  std::priority_queue<std::pair<double, int>, std::vector<std::pair<double, int>>, std::greater<>> runnable_;
  JobSimResult r_;
};

}  // namespace

JobSimResult simulateJob(const ModelSpec& m, const Prediction& pred, CommCoster& coster, bool dpOverlap) {
  return JobSim(m, pred, coster, dpOverlap).run();
}

std::string describeJobSim(const JobSimResult& r, const Prediction& p) {
  auto pct = [](double a, double b) { return b > 0 ? 100.0 * (a / b - 1) : 0.0; };
  const double predictedTail = p.step - p.pipe.makespan - p.optimizer;
  std::string s = fmt::format(
      "simulation of one step over every rank (no data moved): {} ranks, {} passes, {} collective rendezvous, {} "
      "pipeline messages, in {:.2f} s\n",
      r.ranks, r.passes, r.rendezvous, r.messages, r.wallSeconds);
  s += fmt::format("  step {:.3f} s simulated vs {:.3f} s predicted ({:+.1f}%); passes end at {:.3f} vs {:.3f} s; "
                   "data-parallel tail {:.3f} vs {:.3f} s\n",
                   r.step, p.step, pct(r.step, p.step), r.makespan, p.pipe.makespan, r.dpTail, predictedTail);
  for (const JobSimCall& c : r.calls)
    s += fmt::format("  {}: {:.3f} ms per call through its schedule at full size, {:.3f} ms fitted ({:+.1f}%)\n",
                     c.what, 1e3 * c.exact, 1e3 * c.fitted, pct(c.fitted, c.exact));
  return s;
}

}  // namespace strata::planner
