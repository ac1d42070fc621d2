// oneshot.cc: one-shot schedules: one communication step, then local work.
//
// AllReduce, 1 communication step + ceil(log2 n) local steps: every rank sends its whole Input to
//   every peer and receives every peer's Input into Scratch slot j (n*C Scratch), then
//   reduceTree() sums the n contributions in rank order as a balanced binary tree (one step per
//   level, the last level writing Output). Every rank applies the same association, so every rank
//   computes identical bits, equal to Direct's. Per rank (n-1)*C elements out and in: small
//   messages only.
// Reduce: every non-root sends its Input to the root in one step; the root receives into Scratch
//   slots and sums as above (same schedule as Linear's Reduce).
// Broadcast: the root sends its Input to every rank in one step (same as Linear's Broadcast).
//
// Also home of reduceTree(), shared with Direct and Linear.
#include "collectives/algorithms/algorithms.h"

namespace strata::algo {

void reduceTree(Schedule* s, const std::vector<Slice>& loc, size_t len, size_t slotBase,
                size_t slotStride, Slice dst) {
  const int n = static_cast<int>(loc.size());
  if (n == 1) {
    s->beginStep();
    s->copy(loc[0], dst, len);
    return;
  }
  std::vector<Slice> cur = loc;
  for (int st = 1; st < n; st *= 2) {
    s->beginStep();
    for (int i = 0; i + st < n; i += 2 * st) {
      const Slice d = 2 * st >= n ? dst : scr(slotBase + i * slotStride);
      s->reduce(cur[i], cur[i + st], d, len);
      cur[i] = d;
    }
  }
}

void oneshotAllReduce(const CollArgs& a, Schedule* s) {
  const int n = a.nranks, r = a.rank;
  const size_t C = a.count;
  s->beginStep();
  for (int k = 1; k < n; ++k) {
    const int j = mod(r + k, n), from = mod(r - k, n);
    s->send(j, in(0), C);
    s->recv(from, scr(from * C), C);
  }
  std::vector<Slice> loc(n);
  for (int j = 0; j < n; ++j) loc[j] = j == r ? in(0) : scr(j * C);
  reduceTree(s, loc, C, 0, C, out(0));
  if (n > 1) s->scratchElems = n * C;
}

void oneshotReduce(const CollArgs& a, Schedule* s) { linearReduce(a, s); }

void oneshotBroadcast(const CollArgs& a, Schedule* s) { linearBroadcast(a, s); }

}  // namespace strata::algo
