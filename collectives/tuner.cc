// tuner.cc: size thresholds per collective. Small messages are latency-bound (fewest steps wins:
// one-shot, recursive doubling, trees, Bruck); large ones are bandwidth-bound (ring, pairwise).
// The thresholds are first estimates, to be replaced by the cost model as measurements arrive.
#include "collectives/tuner.h"

#include "transport/config.h"

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

Algo chooseAlgo(const TunerInput& in) {
  const std::string& forced = config().algo;
  if (forced != "auto") {
    Algo a;
    if (parseAlgo(forced, &a) && a != Algo::Auto && algoSupports(a, in.coll)) return a;
  }
  return defaultAlgo(in);
}

}  // namespace strata
