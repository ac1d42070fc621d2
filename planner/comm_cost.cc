// comm_cost.cc: collective times per group shape from the tuner and cost model (see comm_cost.h).
#include "planner/comm_cost.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "collectives/cost_model.h"
#include "collectives/tuner.h"

namespace strata::planner {

static constexpr int kMaxSimRanks = 128;  // larger groups are extrapolated
static constexpr int kTunerSimLimit = 256;  // the tuner's own limit (tuner.cc kMaxSimulatedRanks)

std::string GroupShape::key() const {
  std::string s = fmt::format("{}x{{", nodes);
  for (size_t i = 0; i < locals.size(); ++i) s += fmt::format("{}{}", i ? "," : "", locals[i]);
  return s + (uniform ? "}" : "}~");
}

GroupShape groupShape(const ParallelSpec& spec, unsigned dims, int gpusPerNode) {
  std::vector<int> ranks{0};
  for (int d = 0; d < kParallelDims; ++d) {
    if (!(dims & (1u << d))) continue;
    std::vector<int> next;
    for (int r : ranks) {
      auto c = spec.coords(r);
      for (int k = 0; k < spec.size[size_t(d)]; ++k) {
        c[size_t(d)] = k;
        next.push_back(spec.rankOf(c));
      }
    }
    ranks.swap(next);
  }
  std::sort(ranks.begin(), ranks.end());
  GroupShape g;
  g.size = int(ranks.size());
  std::map<int, std::vector<int>> byNode;
  for (int r : ranks) byNode[r / gpusPerNode].push_back(r % gpusPerNode);
  g.nodes = int(byNode.size());
  g.locals = byNode.begin()->second;
  for (auto& [n, l] : byNode) g.uniform = g.uniform && l == g.locals;
  return g;
}

topology::CommLayout shapeLayout(const GroupShape& g, int nodes, const HardwareSpec& hw) {
  std::vector<topology::RankPlace> places;
  for (int n = 0; n < nodes; ++n)
    for (int local : g.locals) {
      topology::RankPlace p;
      p.nodeKey = uint64_t(n) + 1;
      p.processKey = (uint64_t(n) << 32) + uint64_t(local) + 1;
      p.rail = hw.rails > 0 ? local % hw.rails : -1;
      p.gpu = hw.sharedCores > 0 ? -1 : local;  // CPU ranks talk through shared memory
      p.nvlink = hw.nvlink;
      p.nodeName = fmt::format("node{}", n);
      places.push_back(p);
    }
  return topology::CommLayout(places);
}

int railSharing(const GroupShape& g, const HardwareSpec& hw) {
  if (g.nodes <= 1 || hw.rails <= 0 || hw.gpusPerNode <= 0) return 1;
  int worst = 1;
  for (int r = 0; r < hw.rails; ++r) {
    int onRail = 0, members = 0;
    for (int l = 0; l < hw.gpusPerNode; ++l) onRail += l % hw.rails == r;
    for (int l : g.locals) members += l % hw.rails == r;
    if (members > 0) worst = std::max(worst, (onRail + members - 1) / members);
  }
  return worst;
}

CommCoster::CommCoster(const HardwareSpec& hw, double localSlowdown) : hw_(hw), costs_(hw.costs) {
  // Local copies and reductions of a GPU collective run in its kernels at memory speed (read two
  // operands, write one), not through host shared memory.
  costs_[size_t(topology::LinkClass::SharedMemory)].bandwidthGBps = hw.hbmBytesPerSec * hw.hbmEfficiency / 3 / 1e9;
  for (auto k : {topology::LinkClass::SharedMemory, topology::LinkClass::SameProcess}) {
    costs_[size_t(k)].bandwidthGBps /= localSlowdown;
    costs_[size_t(k)].latencyUs *= localSlowdown;
  }
}

CostModel::Costs CommCoster::costsFor(const GroupShape& g) const {
  CostModel::Costs c = costs_;
  const int share = railSharing(g, hw_);
  for (auto k : {topology::LinkClass::Rail, topology::LinkClass::CrossRail}) c[size_t(k)].bandwidthGBps /= share;
  return c;
}

static bool logScaling(Algo a) { return a == Algo::Rhd || a == Algo::Tree || a == Algo::Bruck; }

static size_t countFor(CollType c, double bytes, int n, size_t elem) {
  const double e = bytes / double(elem);
  const bool perRank = c == CollType::ReduceScatter || c == CollType::AllGather || c == CollType::AllToAll ||
                       c == CollType::Gather || c == CollType::Scatter;
  return std::max<size_t>(1, size_t(perRank ? e / n : e));
}

CommCoster::Fit CommCoster::fitAt(const GroupShape& g, int nodes, CollType coll, Algo algo) {
  const auto key = std::make_tuple(g.key(), nodes, int(coll), int(algo));
  auto it = fits_.find(key);
  if (it != fits_.end()) return it->second;
  const topology::CommLayout layout = shapeLayout(g, nodes, hw_);
  const CostModel model(layout, costsFor(g));
  const int n = layout.nranks();
  const size_t elem = 2;
  const double b1 = double(n) * n * 4096, b2 = 4 * b1;  // large enough that every block is non-empty
  const double t1 = model.predict(algo, coll, countFor(coll, b1, n, elem), elem);
  const double t2 = model.predict(algo, coll, countFor(coll, b2, n, elem), elem);
  sims_ += 2;
  Fit f;
  if (t1 < 0 || t2 < 0) {
    f.a = f.b = -1;
  } else {
    f.b = (t2 - t1) / (b2 - b1);
    f.a = std::max(0.0, t1 - f.b * b1);
  }
  fits_.emplace(key, f);
  return f;
}

double CommCoster::timeOf(const GroupShape& g, CollType coll, Algo algo, double bytes) {
  const int k = int(g.locals.size());
  if (g.size <= kMaxSimRanks) {
    const Fit f = fitAt(g, g.nodes, coll, algo);
    return f.b < 0 ? -1 : f.a + f.b * bytes;
  }
  // Extrapolate from the two largest simulable node counts (powers of two).
  int n2 = 1;
  while (2 * n2 * k <= kMaxSimRanks && 2 * n2 < g.nodes) n2 *= 2;
  const int n1 = std::max(1, n2 / 2);
  const Fit f1 = fitAt(g, n1, coll, algo), f2 = fitAt(g, n2, coll, algo);
  if (f1.b < 0 || f2.b < 0 || n1 == n2) return f2.b < 0 ? -1 : f2.a + f2.b * bytes;
  const double N = g.nodes;
  double a, b;
  if (logScaling(algo)) {
    const double steps = std::log2(N / n2) / std::log2(double(n2) / n1);
    a = f2.a + (f2.a - f1.a) * steps;
    b = algo == Algo::Rhd ? f2.b : f2.b + (f2.b - f1.b) * steps;  // rhd's bandwidth term saturates
  } else {
    a = f2.a + (f2.a - f1.a) / (n2 - n1) * (N - n2);
    const double c1 = (f2.b - f1.b) / (1.0 / n1 - 1.0 / n2), c0 = f2.b + c1 / n2;  // b = c0 - c1 / N
    b = c0 - c1 / N;
  }
  return std::max(0.0, a) + std::max(0.0, b) * bytes;
}

CommTime CommCoster::collective(const GroupShape& g, CollType coll, double bytes) {
  CommTime out;
  if (g.size <= 1 || bytes <= 0) return out;
  // The runtime's choice. On one node and above the tuner's simulation limit, chooseAlgo decides
  // without timing (thresholds; hierarchical); in between it takes the fastest predicted candidate.
  Algo algo = Algo::Auto;
  const long bucket = std::lround(std::log2(std::max(bytes, 1.0)) * 4);  // quarter-octave buckets
  const auto ckey = std::make_tuple(g.key(), int(coll), bucket);
  auto it = choice_.find(ckey);
  if (it != choice_.end()) {
    algo = it->second;
  } else if (g.nodes == 1 || g.size > kTunerSimLimit) {
    const topology::CommLayout layout = g.nodes == 1 ? shapeLayout(g, 1, hw_) : shapeLayout(g, g.nodes, hw_);
    const CostModel model(layout, costsFor(g));
    TunerInput in{coll, g.size, size_t(bytes), g.nodes == 1, countFor(coll, bytes, g.size, 2), 2, &model};
    algo = chooseAlgo(in);
    choice_.emplace(ckey, algo);
  } else {
    Algo cand[8];
    const int nc = tunerCandidates(coll, g.size, cand);
    double best = -1;
    for (int i = 0; i < nc; ++i) {
      if (cand[i] == Algo::Hier && !g.uniform) continue;
      const double t = timeOf(g, coll, cand[i], bytes);
      if (t >= 0 && (best < 0 || t < best)) best = t, algo = cand[i];
    }
    choice_.emplace(ckey, algo);
  }
  out.algo = algo;
  out.seconds = timeOf(g, coll, algo, bytes);
  if (out.seconds < 0) {  // the chosen algorithm has no schedule here: ring's time
    out.algo = Algo::Ring;
    out.seconds = std::max(0.0, timeOf(g, coll, Algo::Ring, bytes));
  }
  return out;
}

double CommCoster::seconds(const GroupShape& g, CollType coll, Algo algo, double bytes) {
  if (g.size <= 1 || bytes <= 0) return 0;
  const double t = timeOf(g, coll, algo, bytes);
  return t >= 0 ? t : std::max(0.0, timeOf(g, coll, Algo::Ring, bytes));
}

double CommCoster::exact(const GroupShape& g, CollType coll, Algo algo, double bytes) {
  if (g.size <= 1 || bytes <= 0) return 0;
  const auto key = std::make_tuple(g.key(), int(coll), int(algo), bytes);
  auto it = exact_.find(key);
  if (it != exact_.end()) return it->second;
  const topology::CommLayout layout = shapeLayout(g, g.nodes, hw_);
  const CostModel model(layout, costsFor(g));
  const double t = model.predict(algo, coll, countFor(coll, bytes, g.size, 2), 2);
  ++sims_;
  exact_.emplace(key, t);
  return t;
}

double CommCoster::p2p(const GroupShape& g, double bytes) {
  if (g.size <= 1 || bytes <= 0) return 0;
  const topology::CommLayout layout = shapeLayout(g, std::min(g.nodes, 2), hw_);
  const CostModel model(layout, costsFor(g));
  double worst = 0;
  for (int r = 0; r + 1 < layout.nranks(); ++r)
    worst = std::max(worst, model.latency(r, r + 1) + bytes * model.secondsPerByte(r, r + 1));
  return worst;
}

}  // namespace strata::planner
