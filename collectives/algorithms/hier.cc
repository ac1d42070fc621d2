// hier.cc: hierarchical all-reduce, reduce-scatter, all-gather, broadcast and reduce (N nodes,
// L ranks per node, rank (k, i) = local rank i of node k; see hier_alltoall.cc for all-to-all).
//
// AllReduce, uniform nodes: intra-node ring reduce-scatter (L-1 steps; (k, i) ends owning segment
//   i+1 of C/L), then an all-reduce of that segment among the N ranks with local rank i (each
//   local rank on its own rail, all rails busy at once; ring, or rhd for small segments), then an
//   intra-node ring all-gather (L-1 steps). Network bytes per rank: 2(N-1)/N * C/L on its rail.
//   Uneven nodes: reduce to each node's first rank, all-reduce among those, broadcast back.
// ReduceScatter, uniform: intra-node ring reduce-scatter of super-blocks (super-block j = the N
//   blocks of ranks (0, j) .. (N-1, j)); (k, i) ends with super-block i summed over its node, in
//   node order in Scratch; then a reduce-scatter of it among the local-rank-i group.
// AllGather, uniform: all-gather among the local-rank-i group into Scratch (node order), then an
//   intra-node ring all-gather of super-blocks straight into their places in Output.
//   (Uneven nodes: reduce-scatter and all-gather fall back to the flat ring.)
// Broadcast / Reduce, any layout: the root's node runs the inter-node phase through the root;
//   other nodes through their rank with the root's local rank (or local rank 0): an inter-node
//   broadcast (reduce) among these leaders and an intra-node one around it.
#include "collectives/algorithms/hier.h"

#include <algorithm>

#include "topology/layout.h"

namespace strata::algo {

NodeView::NodeView(const CollArgs& a) {
  const topology::CommLayout* l = a.layout;
  if (!l || l->nranks() != a.nranks) {
    members.assign(1, std::vector<int>());
    for (int r = 0; r < a.nranks; ++r) members[0].push_back(r);
    local = a.rank;
    return;
  }
  nnodes = l->nnodes();
  node = l->node(a.rank);
  local = l->localRank(a.rank);
  uniform = l->uniform();
  blocked = l->blocked();
  for (int k = 0; k < nnodes; ++k) members.push_back(l->members(k));
}

std::vector<int> NodeView::railGroup(int i) const {
  std::vector<int> g;
  for (int k = 0; k < nnodes; ++k) g.push_back(members[k][i]);
  return g;
}

namespace {

// The leaders of a rooted collective, one per node: the root itself on its node, else the rank
// with the root's local rank (the same rail), else local rank 0.
struct Leaders {
  std::vector<int> ranks;  ///< node k's leader, in node order
  int rootNode = 0;
  int mine = 0;            ///< this rank's node's leader
  Leaders(const CollArgs& a, const NodeView& v) {
    rootNode = v.nnodes > 1 ? a.layout->node(a.root) : 0;
    const int rootLocal = v.nnodes > 1 ? a.layout->localRank(a.root) : a.root;
    for (int k = 0; k < v.nnodes; ++k) {
      const std::vector<int>& m = v.members[k];
      ranks.push_back(k == rootNode ? a.root : rootLocal < static_cast<int>(m.size()) ? m[rootLocal] : m[0]);
    }
    mine = ranks[v.node];
  }
};

int indexIn(const std::vector<int>& v, int x) {
  return static_cast<int>(std::find(v.begin(), v.end(), x) - v.begin());
}

void leaderAllReduce(const CollArgs& a, const NodeView& v, Schedule* s) {
  const size_t C = a.count;
  const std::vector<int>& mine = v.members[v.node];
  const SubBuffers io{in(0), out(0), scr(0)};
  appendSubCollective(s, rootedInner(C), CollType::Reduce, mine, v.local, 0, C, io);
  if (v.nnodes > 1 && v.local == 0) {
    std::vector<int> leaders;
    for (int k = 0; k < v.nnodes; ++k) leaders.push_back(v.members[k][0]);
    appendSubCollective(s, allReduceInner(C), CollType::AllReduce, leaders, v.node, 0, C, {out(0), out(0), scr(0)});
  }
  appendSubCollective(s, rootedInner(C), CollType::Broadcast, mine, v.local, 0, C, {out(0), out(0), scr(0)});
}

}  // namespace

void hierAllReduce(const CollArgs& a, Schedule* s) {
  const NodeView v(a);
  if (!v.uniform) return leaderAllReduce(a, v, s);
  const int L = v.ppn(), i = v.local;
  const size_t C = a.count;
  const std::vector<int>& M = v.members[v.node];
  auto off = [&](int j) { return segOff(C, L, mod(j, L)); };
  auto len = [&](int j) { return segLen(C, L, mod(j, L)); };
  const int next = M[mod(i + 1, L)], prev = M[mod(i - 1, L)];
  // Intra-node ring reduce-scatter: local rank i ends owning segment i+1.
  for (int st = 0; st < L - 1; ++st) {
    s->beginStep();
    const int sj = i - st, rj = i - st - 1;
    s->send(next, st == 0 ? in(off(sj)) : out(off(sj)), len(sj));
    s->recvReduce(prev, in(off(rj)), out(off(rj)), len(rj));
  }
  const int own = L > 1 ? i + 1 : 0;
  const Slice ownIn = L > 1 ? out(off(own)) : in(0);
  if (v.nnodes > 1)
    appendSubCollective(s, allReduceInner(len(own)), CollType::AllReduce, v.railGroup(i), v.node, 0, len(own),
                        {ownIn, out(off(own)), scr(0)});
  else if (L == 1)
    s->copy(in(0), out(0), C);
  // Intra-node ring all-gather of the reduced segments.
  for (int st = 0; st < L - 1; ++st) {
    s->beginStep();
    const int sj = i + 1 - st, rj = i - st;
    s->send(next, out(off(sj)), len(sj));
    s->recv(prev, out(off(rj)), len(rj));
  }
}

void hierReduceScatter(const CollArgs& a, Schedule* s) {
  const NodeView v(a);
  if (!v.uniform) return ringReduceScatter(a, s);
  const int L = v.ppn(), N = v.nnodes, i = v.local;
  const size_t C = a.count, SB = static_cast<size_t>(N) * C;  // super-block
  const std::vector<int>& M = v.members[v.node];
  const int next = M[mod(i + 1, L)], prev = M[mod(i - 1, L)];
  // Scratch: two ring slots of SB, then the node-summed super-block (F), then the inner phase's.
  const size_t F = L > 2 ? 2 * SB : 0;
  const Slice finalSb = N == 1 ? out(0) : scr(F);
  auto inBlock = [&](int j, int k) { return in(static_cast<size_t>(v.rankAt(k, j)) * C); };
  if (L == 1 && N > 1 && !v.blocked)
    for (int k = 0; k < N; ++k) s->copy(inBlock(0, k), scr(F + k * C), C);
  for (int st = 0; st < L - 1; ++st) {
    s->beginStep();
    const int sb = mod(i - st - 1, L), rb = mod(i - st - 2, L);
    const bool last = st == L - 2;
    for (int k = 0; k < N; ++k) {
      s->send(next, st == 0 ? inBlock(sb, k) : scr(((st - 1) % 2) * SB + k * C), C);
      const Slice dst = last ? Slice{finalSb.buf, finalSb.offset + k * C} : scr((st % 2) * SB + k * C);
      s->recvReduce(prev, inBlock(rb, k), dst, C);
    }
  }
  const bool needFinal = N > 1 && (L > 1 || !v.blocked);
  const size_t inner = F + (needFinal ? SB : 0);
  s->scratchElems = std::max(s->scratchElems, inner);
  if (N > 1)
    appendSubCollective(s, Algo::Ring, CollType::ReduceScatter, v.railGroup(i), v.node, 0, C,
                        {needFinal ? scr(F) : in(0), out(0), scr(inner)});
  else if (L == 1)
    s->copy(in(0), out(0), C);
}

void hierAllGather(const CollArgs& a, Schedule* s) {
  const NodeView v(a);
  if (!v.uniform) return ringAllGather(a, s);
  const int L = v.ppn(), N = v.nnodes, i = v.local;
  const size_t C = a.count, SB = static_cast<size_t>(N) * C;
  const std::vector<int>& M = v.members[v.node];
  const int next = M[mod(i + 1, L)], prev = M[mod(i - 1, L)];
  auto outBlock = [&](int j, int k) { return out(static_cast<size_t>(v.rankAt(k, j)) * C); };
  // Inter-node all-gather among local rank i's group into Scratch [0, SB), node order.
  const size_t innerScratch = SB;
  if (N > 1) {
    s->scratchElems = SB;
    appendSubCollective(s, Algo::Ring, CollType::AllGather, v.railGroup(i), v.node, 0, C,
                        {in(0), scr(0), scr(innerScratch)});
  }
  auto own = [&](int k) { return N > 1 ? scr(k * C) : in(0); };
  s->beginStep();
  for (int k = 0; k < N; ++k) s->copy(own(k), outBlock(i, k), C);  // a no-op in place for k = node
  for (int st = 0; st < L - 1; ++st) {
    if (st > 0) s->beginStep();
    const int sb = mod(i - st, L), rb = mod(i - st - 1, L);
    for (int k = 0; k < N; ++k) {
      s->send(next, st == 0 ? own(k) : outBlock(sb, k), C);
      s->recv(prev, outBlock(rb, k), C);
    }
  }
}

void hierBroadcast(const CollArgs& a, Schedule* s) {
  const NodeView v(a);
  const Leaders lead(a, v);
  const size_t C = a.count;
  const std::vector<int>& mine = v.members[v.node];
  const Slice src = a.rank == a.root ? in(0) : out(0);
  if (v.nnodes > 1 && a.rank == lead.mine)
    appendSubCollective(s, rootedInner(C), CollType::Broadcast, lead.ranks, v.node, lead.rootNode, C,
                        {src, out(0), scr(0)});
  appendSubCollective(s, rootedInner(C), CollType::Broadcast, mine, v.local, indexIn(mine, lead.mine), C,
                      {src, out(0), scr(0)});
}

void hierReduce(const CollArgs& a, Schedule* s) {
  const NodeView v(a);
  const Leaders lead(a, v);
  const size_t C = a.count;
  const int me = a.rank, myLeader = lead.mine;
  const std::vector<int>& mine = v.members[v.node];
  if (v.nnodes == 1) {
    appendSubCollective(s, rootedInner(C), CollType::Reduce, mine, v.local, indexIn(mine, myLeader), C,
                        {in(0), out(0), scr(0)});
    return;
  }
  // The node's partial sum goes to Scratch [0, C) on its leader; the inter-node reduce takes it
  // from there to the root's Output.
  s->scratchElems = C;
  appendSubCollective(s, rootedInner(C), CollType::Reduce, mine, v.local, indexIn(mine, myLeader), C,
                      {in(0), scr(0), scr(C)});
  if (me == myLeader)
    appendSubCollective(s, rootedInner(C), CollType::Reduce, lead.ranks, v.node, lead.rootNode, C,
                        {scr(0), me == a.root ? out(0) : scr(0), scr(C)});
}

}  // namespace strata::algo
