// bruck.cc: Bruck's all-to-all for small blocks: ceil(log2 n) exchange rounds instead of n-1.
//
// Conceptually rank r first rotates its blocks so that block i holds the data for rank r+i, then
// in round k (bit = 2^k) sends every block whose index has bit k set to rank r+bit, receiving the
// same block indices from rank r-bit; after all rounds block i holds the data from rank r-i, and an
// inverse rotation puts it at Output block r-i.
// The schedule never materialises the rotation: block i is read from Input block r+i when it is
// first packed, received blocks stay in the receive pack until they are packed again or are final,
// and a block waiting for a later round is parked at its final Output position (distinct per
// block, so parking never collides). Per round: one local step that packs the blocks of this
// round into the send pack (and unpacks the previous round's blocks that are not sent again), then
// one exchange step of one message each way. Steps: 2*ceil(log2 n) + 1. Elements per rank per
// round ~ n/2 * C, in all ~ n/2 * C * log2 n. Scratch: send pack + receive pack, 2 * (max blocks
// per round) * C <= n*C.
#include <algorithm>

#include "collectives/algorithms/algorithms.h"

namespace strata::algo {

void bruckAllToAll(const CollArgs& a, Schedule* s) {
  const int n = a.nranks, r = a.rank;
  const size_t C = a.count;
  if (n == 1) {
    s->copy(in(0), out(0), C);
    return;
  }
  int K = 0;
  while ((1 << K) < n) ++K;
  size_t maxSel = 0;
  for (int k = 0; k < K; ++k) {
    size_t c = 0;
    for (int i = 1; i < n; ++i) c += (i >> k) & 1;
    maxSel = std::max(maxSel, c);
  }
  const size_t sendPack = 0, recvPack = maxSel * C;
  std::vector<Slice> loc(n);
  for (int i = 0; i < n; ++i) loc[i] = in(mod(r + i, n) * C);
  auto park = [&](int i) { return out(mod(r - i, n) * C); };
  for (int k = 0; k < K; ++k) {
    const int bit = 1 << k;
    s->beginStep();
    if (k == 0) s->copy(in(r * C), out(r * C), C);  // block 0 is final from the start
    for (int i = 1; i < n; ++i) {
      if (k > 0 && (i >> (k - 1)) & 1 && !(i & bit)) {
        s->copy(loc[i], park(i), C);
        loc[i] = park(i);
      }
    }
    size_t pos = 0;
    for (int i = 1; i < n; ++i) {
      if (!(i & bit)) continue;
      s->copy(loc[i], scr(sendPack + pos * C), C);
      loc[i] = scr(recvPack + pos * C);  // after the exchange
      ++pos;
    }
    s->beginStep();
    s->send(mod(r + bit, n), scr(sendPack), pos * C);
    s->recv(mod(r - bit, n), scr(recvPack), pos * C);
  }
  s->beginStep();
  for (int i = 1; i < n; ++i)
    if ((i >> (K - 1)) & 1) s->copy(loc[i], park(i), C);
  s->scratchElems = 2 * maxSel * C;
}

}  // namespace strata::algo
