// hier_alltoall.cc: hierarchical all-to-all that aggregates per destination node (PXN-like).
//
// Rank (a, i) = local rank i of node a; C = count per rank pair; L ranks per node, N nodes.
// Phase 1, intra-node pairwise (L-1 steps): (a, i) hands local rank j every block it has for the
//   ranks (b, j) of every node b: the block for (a, j) lands in its Output, the blocks for other
//   nodes in j's Scratch staging area S[b] (L blocks, by source local rank). Its own blocks for
//   (b, i) are copied into its own S[b].
// Phase 2, inter-node pairwise among the ranks with local rank i (N-1 steps, each rank on its own
//   rail): (a, i) sends S[b] to (b, i) as one message of L*C per node pair per rail, and receives
//   node b's blocks for it straight into Output (node-major layouts; otherwise one message per
//   source rank).
// Uneven nodes fall back to the flat pairwise exchange.
#include "collectives/algorithms/hier.h"

namespace strata::algo {

void hierAllToAll(const CollArgs& a, Schedule* s) {
  const NodeView v(a);
  if (!v.uniform || v.nnodes == 1) return pairwiseAllToAll(a, s);
  const int L = v.ppn(), N = v.nnodes, i = v.local, me = a.rank, node = v.node;
  const size_t C = a.count, LC = static_cast<size_t>(L) * C;
  const std::vector<int>& M = v.members[node];
  auto rk = [&](int k, int j) { return static_cast<size_t>(v.rankAt(k, j)); };
  auto stage = [&](int b, int j) { return scr(static_cast<size_t>(b) * LC + static_cast<size_t>(j) * C); };
  if (L > 1) s->scratchElems = static_cast<size_t>(N) * LC;

  s->beginStep();
  s->copy(in(me * C), out(me * C), C);
  if (L > 1)
    for (int b = 0; b < N; ++b)
      if (b != node) s->copy(in(rk(b, i) * C), stage(b, i), C);
  for (int st = 1; st < L; ++st) {
    if (st > 1) s->beginStep();
    const int to = mod(i + st, L), from = mod(i - st, L);
    for (int b = 0; b < N; ++b) s->send(M[to], in(rk(b, to) * C), C);
    for (int b = 0; b < N; ++b)
      s->recv(M[from], b == node ? out(rk(node, from) * C) : stage(b, from), C);
  }
  for (int st = 1; st < N; ++st) {
    s->beginStep();
    const int to = mod(node + st, N), from = mod(node - st, N);
    const int peerTo = v.rankAt(to, i), peerFrom = v.rankAt(from, i);
    if (L == 1) s->send(peerTo, in(rk(to, 0) * C), C);
    else if (v.blocked) s->send(peerTo, stage(to, 0), LC);
    else
      for (int j = 0; j < L; ++j) s->send(peerTo, stage(to, j), C);
    if (v.blocked) s->recv(peerFrom, out(rk(from, 0) * C), LC);
    else
      for (int j = 0; j < L; ++j) s->recv(peerFrom, out(rk(from, j) * C), C);
  }
}

}  // namespace strata::algo
