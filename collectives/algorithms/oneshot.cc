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
// Also home of reduceTree(), shared with Direct and Linear; its association is rank_tree.h's, the one
// the device kernels of deterministic mode use too.
#include <algorithm>

#include "collectives/algorithms/algorithms.h"
#include "kernels/device/rank_tree.h"

namespace strata::algo {

void reduceTree(Schedule* s, const std::vector<Slice>& loc, size_t len, size_t slotBase,
                size_t slotStride, Slice dst) {
  const int n = static_cast<int>(loc.size());
  if (n == 1) {
    s->beginStep();
    s->copy(loc[0], dst, len);
    return;
  }
  // The association is rankTreeFold's (kernels/device/rank_tree.h, shared with the device
  // kernels), evaluated here on slices: each partial sum goes to the scratch slot of its lowest
  // rank, and the combines are emitted one step per tree level (a level's combines are
  // independent), in rank order within a level; the root's writes dst.
  struct Node {
    Slice at;
    int low, level;
  };
  struct Combine {
    Slice a, b;
    int low, level;
  };
  std::vector<Combine> combines;
  dev::rankTreeFold<Node>(
      n, [&](int k) { return Node{loc[static_cast<size_t>(k)], k, 0}; },
      [&](const Node& lo, const Node& hi) {
        const int level = std::max(lo.level, hi.level) + 1;
        combines.push_back(Combine{lo.at, hi.at, lo.low, level});
        return Node{scr(slotBase + static_cast<size_t>(lo.low) * slotStride), lo.low, level};
      });
  std::stable_sort(combines.begin(), combines.end(), [](const Combine& x, const Combine& y) {
    return x.level != y.level ? x.level < y.level : x.low < y.low;
  });
  int level = 0;
  for (const Combine& c : combines) {
    if (c.level != level) s->beginStep(), level = c.level;
    const bool last = &c == &combines.back();  // the root: the only combine of the top level
    s->reduce(c.a, c.b, last ? dst : scr(slotBase + static_cast<size_t>(c.low) * slotStride), len);
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
