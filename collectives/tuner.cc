// tuner.cc: on one node, size thresholds per collective measured on the machines we have (small
// messages are latency-bound: one-shot, recursive doubling, trees, Bruck; large ones bandwidth-bound:
// ring, pairwise). Across nodes, the cost model (cost_model.h) times each candidate.
#include "collectives/tuner.h"

#include "collectives/cost_model.h"
#include "transport/config.h"
#include "transport/log.h"

namespace strata {

static Algo defaultAlgo(const TunerInput& in) {
  const size_t b = in.bytes;
  const int n = in.nranks;
  switch (in.coll) {
    case CollType::AllReduce:
      // One exchange step: the fewest round trips; over the network too (n - 1 small messages).
      if (b <= 4096 && n <= 8) return Algo::OneShot;
      if (b <= (256u << 10)) return Algo::Rhd;
      return Algo::Ring;
    case CollType::ReduceScatter:
    case CollType::AllGather:
      if (b <= (64u << 10)) return Algo::Rhd;
      return Algo::Ring;
    case CollType::Broadcast:
    case CollType::Reduce:
      if (b <= (64u << 10)) return Algo::Tree;
      return Algo::Ring;
    case CollType::AllToAll:
      if (n > 8 && b / static_cast<size_t>(n * n) <= 256) return Algo::Bruck;
      return Algo::Pairwise;
    case CollType::Gather:
    case CollType::Scatter:
      return Algo::Linear;
  }
  return Algo::Ring;
}

int tunerCandidates(CollType coll, int n, Algo out[8]) {
  int k = 0;
  const bool small = n <= 16;  // one-shot and direct schedules grow with n^2
  switch (coll) {
    case CollType::AllReduce:
      out[k++] = Algo::Hier, out[k++] = Algo::Ring, out[k++] = Algo::Rhd, out[k++] = Algo::Tree;
      if (small) out[k++] = Algo::Direct, out[k++] = Algo::OneShot;
      break;
    case CollType::ReduceScatter:
    case CollType::AllGather:
      out[k++] = Algo::Hier, out[k++] = Algo::Ring, out[k++] = Algo::Rhd;
      if (small) out[k++] = Algo::Direct;
      break;
    case CollType::Broadcast:
    case CollType::Reduce:
      out[k++] = Algo::Hier, out[k++] = Algo::Ring, out[k++] = Algo::Tree;
      break;
    case CollType::AllToAll:
      out[k++] = Algo::Hier, out[k++] = Algo::Pairwise, out[k++] = Algo::Bruck;
      break;
    case CollType::Gather:
    case CollType::Scatter:
      out[k++] = Algo::Linear, out[k++] = Algo::Tree;
      break;
  }
  return k;
}

// Timing every candidate costs O(n * steps) per new shape; beyond this many ranks the tuner
// takes the hierarchical algorithm across nodes without simulating.
constexpr int kMaxSimulatedRanks = 256;  // ~0.1 s per new shape at 256 ranks (2-core VM)

// Hierarchical reduce-scatter, all-gather and all-to-all fall back to flat algorithms on uneven
// nodes: there the tuner compares the flat ones themselves.
static bool hierApplies(CollType c, const topology::CommLayout& l) {
  return l.uniform() || c == CollType::AllReduce || c == CollType::Broadcast || c == CollType::Reduce;
}

static Algo modelAlgo(const TunerInput& in) {
  const topology::CommLayout& l = in.model->layout();
  if (in.nranks > kMaxSimulatedRanks)
    return algoSupports(Algo::Hier, in.coll) && l.uniform() ? Algo::Hier : defaultAlgo(in);
  Algo all[8], cand[8];
  int k = 0;
  const int total = tunerCandidates(in.coll, in.nranks, all);
  for (int i = 0; i < total; ++i)
    if (all[i] != Algo::Hier || hierApplies(in.coll, l)) cand[k++] = all[i];
  Algo best = defaultAlgo(in);
  double bestT = -1;
  std::string table;
  for (int i = 0; i < k; ++i) {
    const double t = in.model->predict(cand[i], in.coll, in.count, in.elemBytes);
    if (t >= 0 && (bestT < 0 || t < bestT)) bestT = t, best = cand[i];
    if (t >= 0) table += fmt::format(" {} {:.1f}us", algoName(cand[i]), t * 1e6);
  }
  log::debug("tuner: {} of {} bytes on {}: {} (predicted:{})", collName(in.coll), in.bytes, l.describe(),
             algoName(best), table);
  return best;
}

Algo deterministicAlgo(CollType coll, size_t bytes) {
  switch (coll) {
    case CollType::AllReduce: return bytes <= 4096 ? Algo::OneShot : Algo::Direct;
    case CollType::ReduceScatter: return Algo::Direct;
    default: return Algo::Linear;  // Reduce
  }
}

Algo chooseAlgo(const TunerInput& in) {
  const std::string& forced = config().algo;
  if (forced != "auto") {
    Algo a;
    if (parseAlgo(forced, &a) && a != Algo::Auto && algoSupports(a, in.coll)) return a;
  }
  if (in.model && !in.allLocal && in.model->layout().nnodes() > 1) return modelAlgo(in);
  return defaultAlgo(in);
}

}  // namespace strata
