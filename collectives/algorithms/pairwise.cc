// pairwise.cc: pairwise-exchange all-to-all.
//
// AllToAll, n-1 steps (1 for n = 1): step s = 1..n-1 sends Input block r+s to rank r+s and receives
// Output block r-s from rank r-s; every rank is busy with exactly one peer each way per step, so
// the pattern is contention-free and deadlock-free under rendezvous. The own block is copied in
// the first step. (n-1)*C elements out and in per rank; no Scratch.
#include "collectives/algorithms/algorithms.h"

namespace strata::algo {

void pairwiseAllToAll(const CollArgs& a, Schedule* s) {
  const int n = a.nranks, r = a.rank;
  const size_t C = a.count;
  s->copy(in(r * C), out(r * C), C);
  for (int k = 1; k < n; ++k) {
    if (k > 1) s->beginStep();
    const int to = mod(r + k, n), from = mod(r - k, n);
    s->send(to, in(to * C), C);
    s->recv(from, out(from * C), C);
  }
}

}  // namespace strata::algo
