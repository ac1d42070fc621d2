// registry.cc: which family implements which collective (algoSupports) and buildSchedule dispatch.
// The table below is the single source of truth; schedule_sim_test proves every entry with the
// symbolic simulator for n = 1..64.
#include <cassert>

#include "collectives/algorithms/algorithms.h"

namespace strata {

namespace {

using Builder = void (*)(const CollArgs&, Schedule*);

Builder builderFor(Algo algo, CollType coll) {
  using C = CollType;
  switch (algo) {
    case Algo::Ring:
      switch (coll) {
        case C::AllReduce: return algo::ringAllReduce;
        case C::ReduceScatter: return algo::ringReduceScatter;
        case C::AllGather: return algo::ringAllGather;
        case C::Broadcast: return algo::ringBroadcast;
        case C::Reduce: return algo::ringReduce;
        default: return nullptr;
      }
    case Algo::Rhd:
      switch (coll) {
        case C::AllReduce: return algo::rhdAllReduce;
        case C::ReduceScatter: return algo::rhdReduceScatter;
        case C::AllGather: return algo::rhdAllGather;
        default: return nullptr;
      }
    case Algo::Tree:
      switch (coll) {
        case C::AllReduce: return algo::treeAllReduce;
        case C::Broadcast: return algo::treeBroadcast;
        case C::Reduce: return algo::treeReduce;
        case C::Gather: return algo::treeGather;
        case C::Scatter: return algo::treeScatter;
        default: return nullptr;
      }
    case Algo::Direct:
      switch (coll) {
        case C::AllReduce: return algo::directAllReduce;
        case C::ReduceScatter: return algo::directReduceScatter;
        case C::AllGather: return algo::directAllGather;
        default: return nullptr;
      }
    case Algo::OneShot:
      switch (coll) {
        case C::AllReduce: return algo::oneshotAllReduce;
        case C::Reduce: return algo::oneshotReduce;
        case C::Broadcast: return algo::oneshotBroadcast;
        default: return nullptr;
      }
    case Algo::Pairwise: return coll == C::AllToAll ? algo::pairwiseAllToAll : nullptr;
    case Algo::Bruck: return coll == C::AllToAll ? algo::bruckAllToAll : nullptr;
    case Algo::Linear:
      switch (coll) {
        case C::Broadcast: return algo::linearBroadcast;
        case C::Reduce: return algo::linearReduce;
        case C::Gather: return algo::linearGather;
        case C::Scatter: return algo::linearScatter;
        case C::AllToAll: return algo::linearAllToAll;
        default: return nullptr;
      }
    case Algo::Hier:
      switch (coll) {
        case C::AllReduce: return algo::hierAllReduce;
        case C::ReduceScatter: return algo::hierReduceScatter;
        case C::AllGather: return algo::hierAllGather;
        case C::Broadcast: return algo::hierBroadcast;
        case C::Reduce: return algo::hierReduce;
        case C::AllToAll: return algo::hierAllToAll;
        default: return nullptr;
      }
    case Algo::Auto: return nullptr;
  }
  return nullptr;
}

}  // namespace

bool algoSupports(Algo algo, CollType coll) { return builderFor(algo, coll) != nullptr; }

void buildSchedule(Algo algo, const CollArgs& args, Schedule* out) {
  out->clear();
  const Builder b = builderFor(algo, args.coll);
  assert(b && "buildSchedule: algorithm does not implement this collective");
  assert(args.nranks >= 1 && args.rank >= 0 && args.rank < args.nranks);
  assert(args.root >= 0 && args.root < args.nranks);
  if (!b) return;
  b(args, out);
  out->compact();
}

}  // namespace strata
