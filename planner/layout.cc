// layout.cc: layout description, validity checks and enumeration (see layout.h).
#include "planner/layout.h"

#include <fmt/format.h>

#include "planner/comm_cost.h"

namespace strata::planner {

const char* scheduleName(PipeSchedule s) {
  switch (s) {
    case PipeSchedule::GPipe: return "gpipe";
    case PipeSchedule::OneFOneB: return "1f1b";
    case PipeSchedule::Interleaved: return "interleaved";
    case PipeSchedule::ZeroBubble: return "zb";
  }
  return "?";
}

ParallelSpec Layout::spec() const {
  ParallelSpec s;
  s.size = {tp, cp, ep, dp, pp};
  (void)parseRankOrder(order.c_str(), &s.order);
  return s;
}

std::string Layout::describe() const {
  return fmt::format("tp{} cp{} ep{} dp{} pp{} v{} mbs{} {} zero{} rc={}{}{}", tp, cp, ep, dp, pp, vp, mbs,
                     scheduleName(schedule), zero, recomputeName(recompute), wholeExperts ? " etp1" : "",
                     order == kDefaultRankOrder ? "" : " order " + order);
}

std::string checkLayout(const Layout& l, const ModelSpec& m, int world, int gpusPerNode) {
  if (l.world() != world) return fmt::format("tp*cp*ep*dp*pp = {} != {} GPUs", l.world(), world);
  if (m.heads % l.tp || (m.kvHeads % l.tp && l.tp % m.kvHeads))
    return fmt::format("heads {} / kv heads {} do not split over tp {}", m.heads, m.kvHeads, l.tp);
  if (l.cp > 1 && m.seq % (2 * l.cp)) return fmt::format("seq {} is not divisible by 2*cp = {}", m.seq, 2 * l.cp);
  if (l.ep > 1 && (!m.moe() || m.experts % l.ep)) return fmt::format("ep {} needs experts divisible by it", l.ep);
  const int chunks = l.pp * l.vp;
  if (m.layers < chunks) return fmt::format("{} layers < pp*v = {} chunks", m.layers, chunks);
  if (l.vp > 1 && l.schedule != PipeSchedule::Interleaved) return "virtual stages need the interleaved schedule";
  const long denom = long(l.dp) * l.ep * l.mbs;
  if (m.globalBatch % denom)
    return fmt::format("global batch {} is not divisible by dp*ep*mbs = {}", m.globalBatch, denom);
  const long mb = l.microbatches(m);
  if (l.pp > 1 && l.schedule != PipeSchedule::GPipe && mb < l.pp)
    return fmt::format("{} microbatches < pp {}", mb, l.pp);
  if (l.schedule == PipeSchedule::Interleaved && (l.vp < 2 || mb % l.pp))
    return fmt::format("interleaved needs v >= 2 and microbatches ({}) divisible by pp ({})", mb, l.pp);
  if (l.schedule == PipeSchedule::ZeroBubble && m.moe()) return "zb splits dense backwards only (no MoE)";
  if (l.zero > 0 && l.dp * l.cp * l.ep == 1) return "ZeRO needs data-parallel ranks";
  if (l.wholeExperts && !m.moe()) return "whole experts (etp1) need a MoE model";
  (void)gpusPerNode;
  return "";
}

// True when some group kind has a different shape (nodes spanned, GPUs held per node) under the
// two layouts' orders: only then can the orders cost differently.
static bool shapesDiffer(const Layout& a, const Layout& b, int gpusPerNode) {
  const ParallelSpec sa = a.spec(), sb = b.spec();
  for (int d = 0; d < kParallelDims; ++d)
    if (groupShape(sa, 1u << d, gpusPerNode).key() != groupShape(sb, 1u << d, gpusPerNode).key()) return true;
  constexpr unsigned kDpCpEp = (1u << 1) | (1u << 2) | (1u << 3);  // the dense gradient reduction's group
  return groupShape(sa, kDpCpEp, gpusPerNode).key() != groupShape(sb, kDpCpEp, gpusPerNode).key();
}

static std::vector<int> powersOfTwoUpTo(int n) {
  std::vector<int> v;
  for (int x = 1; x <= n; x *= 2) v.push_back(x);
  return v;
}

std::vector<Layout> enumerateLayouts(const ModelSpec& m, int world, int gpusPerNode, const SearchSpace& space) {
  std::vector<Layout> out;
  const int maxTp = space.maxTp > 0 ? space.maxTp : gpusPerNode;
  std::vector<Recompute> rcs = m.recomputeFixed ? std::vector<Recompute>{m.recompute}
                                                : std::vector<Recompute>{Recompute::None, Recompute::Selective,
                                                                         Recompute::Full};
  std::vector<int> eps{1};
  if (m.moe())
    for (int e = 2; e <= m.experts && e <= world; e *= 2)
      if (m.experts % e == 0) eps.push_back(e);
  for (int tp : powersOfTwoUpTo(maxTp))
    for (int cp : powersOfTwoUpTo(space.maxCp > 0 ? space.maxCp : std::max(1, m.seq / 2048)))
      for (int ep : eps)
        for (int pp = 1; pp <= m.layers && pp <= world; ++pp) {
          const long rest = long(tp) * cp * ep * pp;
          if (world % rest) continue;
          const int dp = int(world / rest);
          for (int mbs : space.mbsChoices) {
            Layout base;
            base.tp = tp, base.cp = cp, base.ep = ep, base.dp = dp, base.pp = pp, base.mbs = mbs;
            base.sp = tp > 1;
            base.wholeExperts = space.wholeExperts && m.moe() && tp > 1;
            std::vector<std::string> orders{kDefaultRankOrder};
            if (space.searchOrders && dp > 1 && pp > 1) {
              Layout alt = base;
              alt.order = kPipelineInsideDataOrder;
              if (shapesDiffer(base, alt, gpusPerNode)) orders.push_back(alt.order);
            }
            std::vector<std::pair<PipeSchedule, int>> scheds{{PipeSchedule::OneFOneB, 1}};
            if (pp > 1) {
              if (space.allSchedules) scheds.push_back({PipeSchedule::GPipe, 1});
              if (space.allSchedules) scheds.push_back({PipeSchedule::ZeroBubble, 1});
              for (int v : space.virtualStages) scheds.push_back({PipeSchedule::Interleaved, v});
            }
            for (const std::string& order : orders)
              for (auto [sched, v] : scheds)
                for (int zero : space.zeroStages)
                  for (Recompute rc : rcs) {
                    Layout l = base;
                    l.order = order, l.schedule = sched, l.vp = v, l.zero = zero, l.recompute = rc;
                    if (checkLayout(l, m, world, gpusPerNode).empty()) out.push_back(l);
                  }
          }
        }
  return out;
}

}  // namespace strata::planner
