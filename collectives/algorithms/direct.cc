// direct.cc: two-shot schedules: every rank talks to every other rank in a single step.
//
// AllReduce, 2 communication steps + ceil(log2 n) local steps. Input is cut into n near-equal
//   segments (possibly empty); rank r owns segment r.
//   Reduce-scatter: one step in which rank r sends segment j to rank j for every j != r and receives
//   segment r from every peer into Scratch slot j (many recvReduce ops of one step would all write
//   the owner's segment, which a step forbids, and chaining them over n-1 steps would serialise the
//   network). Then reduceTree() sums the n contributions in rank order as a balanced binary tree,
//   one local step per level, the last level writing Output: the same association as OneShot.
//   All-gather: one step, send the owned segment to every peer, receive theirs into Output.
//   Per rank (n-1)/n * C elements out and in per phase; Scratch n * ceil(C/n) (~C).
// ReduceScatter: the reduce-scatter phase over blocks of C (Scratch n*C), summing into Output.
// AllGather: one step: send Input to every peer, receive every block into Output, copy own block.
#include "collectives/algorithms/algorithms.h"

namespace strata::algo {

void directAllReduce(const CollArgs& a, Schedule* s) {
  const int n = a.nranks, r = a.rank;
  const size_t C = a.count;
  if (n == 1) {
    s->copy(in(0), out(0), C);
    return;
  }
  const size_t L = segLen(C, n, r), O = segOff(C, n, r), M = segLen(C, n, 0);
  s->beginStep();
  for (int k = 1; k < n; ++k) {
    const int j = mod(r + k, n), from = mod(r - k, n);
    s->send(j, in(segOff(C, n, j)), segLen(C, n, j));
    s->recv(from, scr(from * M), L);
  }
  std::vector<Slice> loc(n);
  for (int j = 0; j < n; ++j) loc[j] = j == r ? in(O) : scr(j * M);
  reduceTree(s, loc, L, 0, M, out(O));
  s->beginStep();
  for (int k = 1; k < n; ++k) {
    const int j = mod(r + k, n), from = mod(r - k, n);
    s->send(j, out(O), L);
    s->recv(from, out(segOff(C, n, from)), segLen(C, n, from));
  }
  s->scratchElems = L ? n * M : 0;
}

void directReduceScatter(const CollArgs& a, Schedule* s) {
  const int n = a.nranks, r = a.rank;
  const size_t C = a.count;
  if (n == 1) {
    s->copy(in(0), out(0), C);
    return;
  }
  s->beginStep();
  for (int k = 1; k < n; ++k) {
    const int j = mod(r + k, n), from = mod(r - k, n);
    s->send(j, in(j * C), C);
    s->recv(from, scr(from * C), C);
  }
  std::vector<Slice> loc(n);
  for (int j = 0; j < n; ++j) loc[j] = j == r ? in(r * C) : scr(j * C);
  reduceTree(s, loc, C, 0, C, out(0));
  s->scratchElems = n * C;
}

void directAllGather(const CollArgs& a, Schedule* s) {
  const int n = a.nranks, r = a.rank;
  const size_t C = a.count;
  s->copy(in(0), out(r * C), C);  // no-op in place
  for (int k = 1; k < n; ++k) {
    const int j = mod(r + k, n), from = mod(r - k, n);
    s->send(j, in(0), C);
    s->recv(from, out(from * C), C);
  }
}

}  // namespace strata::algo
