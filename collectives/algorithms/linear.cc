// linear.cc: the root exchanges with every rank in a single step (flat tree).
//
// Broadcast, 1 step: the root sends Input to every rank (and copies it to its Output).
// Reduce, 1 step + ceil(log2 n) local steps at the root: every non-root sends Input to the root,
//   which receives into Scratch slots (n*C) and sums with reduceTree() (rank-order balanced tree).
// Gather, 1 step: every non-root sends Input; the root receives block j into Output directly.
// Scatter, 1 step: the root sends Input block j to rank j, which receives it into Output.
// AllToAll, 1 step: every rank sends block j to rank j and receives block j from rank j (n-1
//   concurrent messages each way, peers visited r+1, r+2, .. to spread the load).
// Root volume (n-1)*C each way in one step: latency-optimal, bandwidth-poor; small n or small C.
#include "collectives/algorithms/algorithms.h"

namespace strata::algo {

void linearBroadcast(const CollArgs& a, Schedule* s) {
  const int n = a.nranks, r = a.rank;
  const size_t C = a.count;
  if (r != a.root) {
    s->recv(a.root, out(0), C);
    return;
  }
  s->copy(in(0), out(0), C);  // no-op in place
  for (int k = 1; k < n; ++k) s->send(mod(r + k, n), in(0), C);
}

void linearReduce(const CollArgs& a, Schedule* s) {
  const int n = a.nranks, r = a.rank;
  const size_t C = a.count;
  if (r != a.root) {
    s->send(a.root, in(0), C);
    return;
  }
  s->beginStep();
  for (int k = 1; k < n; ++k) {
    const int j = mod(r + k, n);
    s->recv(j, scr(j * C), C);
  }
  std::vector<Slice> loc(n);
  for (int j = 0; j < n; ++j) loc[j] = j == r ? in(0) : scr(j * C);
  reduceTree(s, loc, C, 0, C, out(0));
  if (n > 1) s->scratchElems = n * C;
}

void linearGather(const CollArgs& a, Schedule* s) {
  const int n = a.nranks, r = a.rank;
  const size_t C = a.count;
  if (r != a.root) {
    s->send(a.root, in(0), C);
    return;
  }
  s->copy(in(0), out(r * C), C);  // no-op in place
  for (int k = 1; k < n; ++k) {
    const int j = mod(r + k, n);
    s->recv(j, out(j * C), C);
  }
}

void linearScatter(const CollArgs& a, Schedule* s) {
  const int n = a.nranks, r = a.rank;
  const size_t C = a.count;
  if (r != a.root) {
    s->recv(a.root, out(0), C);
    return;
  }
  s->copy(in(r * C), out(0), C);  // no-op in place
  for (int k = 1; k < n; ++k) {
    const int j = mod(r + k, n);
    s->send(j, in(j * C), C);
  }
}

void linearAllToAll(const CollArgs& a, Schedule* s) {
  const int n = a.nranks, r = a.rank;
  const size_t C = a.count;
  s->copy(in(r * C), out(r * C), C);
  for (int k = 1; k < n; ++k) {
    const int j = mod(r + k, n), from = mod(r - k, n);
    s->send(j, in(j * C), C);
    s->recv(from, out(from * C), C);
  }
}

}  // namespace strata::algo
