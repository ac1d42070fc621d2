// rank_tree.h: the one definition of deterministic mode's summation order, shared by the host
// schedules (collectives/algorithms: reduceTree) and the device kernels (dev_prims.h: stepTree):
// a balanced binary tree over the contributions of ranks 0..n-1 in rank order. Level 1 forms
// (x0+x1), (x2+x3), ...; level 2 ((x0+x1)+(x2+x3)), ...; a node whose right half is missing
// passes its left half up unchanged. For n = 6: ((x0+x1)+(x2+x3))+(x4+x5).
#pragma once

#include "kernels/hd.h"

namespace strata::dev {

/// Enough partial sums for any int rank count (the stack holds one per set bit of k + 1, plus one).
constexpr int kRankTreeMaxDepth = 33;

/// Folds leaf(0) .. leaf(n-1) (n >= 1) with combine(lower, upper) in the rank-order tree, calling
/// each leaf once, in rank order, and combining as soon as both halves of a node are known (a
/// stack of complete power-of-two subtrees; the ragged right edge is folded in at the end,
/// smallest subtrees first). combine's first argument always holds the lower ranks.
template <class T, class Leaf, class Combine>
STRATA_HD T rankTreeFold(int n, const Leaf& leaf, const Combine& combine) {
  T stack[kRankTreeMaxDepth];
  int top = 0;
  for (int k = 0; k < n; ++k) {
    stack[top++] = leaf(k);
    // Leaf k closes one subtree per trailing one bit of k: merge the two topmost that many times.
    for (unsigned m = unsigned(k) + 1u; (m & 1u) == 0; m >>= 1) {
      --top;
      stack[top - 1] = combine(stack[top - 1], stack[top]);
    }
  }
  T acc = stack[--top];
  while (top > 0) {
    --top;
    acc = combine(stack[top], acc);
  }
  return acc;
}

}  // namespace strata::dev
