// dev_peers.h: the peers each channel of the device collectives talks to: the ring neighbours
// (ring and chain algorithms) and the channel's binary-tree links (tree all-reduce; channel c's
// tree is rooted at rank c mod n). Shared by the algorithms and by the network proxy, which
// connects exactly these peers for collectives (send/recv entries name their own).
#pragma once

#include "kernels/hd.h"

namespace strata::dev {

STRATA_HD_INLINE int mod(int a, int n) { return ((a % n) + n) % n; }

/// Channel `c`'s binary tree over n ranks (a heap over virtual ranks v = rank - c mod n), as seen
/// by `rank`: its parent (-1 at the root) and up to two children (-1: none).
STRATA_HD_INLINE void treeLinks(int rank, int n, int c, int* parent, int* kid0, int* kid1) {
  const int shift = c % n, v = mod(rank - shift, n);
  auto real = [&](int vv) { return vv < n ? mod(vv + shift, n) : -1; };
  *parent = v == 0 ? -1 : real((v - 1) / 2);
  *kid0 = real(2 * v + 1);
  *kid1 = real(2 * v + 2);
}

}  // namespace strata::dev
