// rhd.cc: recursive halving-doubling (Rabenseifner) for any n.
//
// Let p = largest power of two <= n, rem = n - p. Fix-up for n != p: ranks 0 .. 2*rem-1 pair up
// (2i, 2i+1); the even one folds its whole input into the odd one in one step before the core, and
// gets its result from it in one step after. The p remaining ranks (odd ranks < 2*rem and all ranks
// >= 2*rem) take virtual ranks v = r/2 resp. r-rem and run the power-of-two core:
//   Recursive halving reduce-scatter, log2(p) steps: with distance m = p/2, p/4, .., 1 a rank
//   exchanges with v^m: sends the half of its current window that the partner keeps and
//   recvReduces (own partial + incoming) the half it keeps. Volume C/2 + C/4 + ... = C(p-1)/p.
//   Recursive doubling all-gather, log2(p) steps: m = 1, 2, .., p/2, swap windows with v^m.
// Steps: 2*log2(p) (+2 for the fix-up ranks). Each segment is summed by one rank, so all ranks hold
// the same bits.
// AllReduce: the window is over p near-equal segments of C in Output (the first step reads Input).
// ReduceScatter: the window is over the n blocks of C, vrank v owning blocks [start(v), start(v+1))
//   (two blocks for a folded pair, else its own block); partial sums live in Scratch mirroring the
//   Input layout (n*C), the last halving step writes a non-folded rank's block straight into Output.
//   Steps: 1 + log2(p) + 1 with fold, log2(p) without.
// AllGather: recursive doubling over the same block windows in Output (log2(p) steps, plus a
//   gather-in step and a send-back step for the fold pairs).
#include <algorithm>
#include <utility>

#include "collectives/algorithms/algorithms.h"

namespace strata::algo {

namespace {

struct Rhd {
  int n, p, rem;
  explicit Rhd(int nranks) : n(nranks), p(floorPow2(nranks)), rem(nranks - floorPow2(nranks)) {}
  /// -1 for the folded (even, < 2*rem) ranks.
  int vrank(int r) const {
    if (r < 2 * rem) return r % 2 ? r / 2 : -1;
    return r - rem;
  }
  int real(int v) const { return v < rem ? 2 * v + 1 : v + rem; }
  /// First block (real rank) of vrank v's share; start(p) = n.
  int start(int v) const { return v < rem ? 2 * v : v + rem; }
};

}  // namespace

void rhdAllReduce(const CollArgs& a, Schedule* s) {
  const int n = a.nranks, r = a.rank;
  const size_t C = a.count;
  if (n == 1) {
    s->copy(in(0), out(0), C);
    return;
  }
  const Rhd h(n);
  const int v = h.vrank(r);
  if (v < 0) {  // folded: hand the input over, get the result back
    s->send(r + 1, in(0), C);
    s->beginStep();
    s->recv(r + 1, out(0), C);
    return;
  }
  BufId cur = BufId::Input;
  if (r < 2 * h.rem) {
    s->recvReduce(r - 1, in(0), out(0), C);
    cur = BufId::Output;
  }
  const int p = h.p;
  auto off = [&](int seg) { return segOff(C, p, seg); };  // off(p) == C
  int lo = 0, hi = p;
  for (int m = p / 2; m >= 1; m /= 2) {
    const int partner = h.real(v ^ m), mid = lo + m;
    int klo = lo, khi = mid, glo = mid, ghi = hi;
    if (v & m) std::swap(klo, glo), std::swap(khi, ghi);
    s->beginStep();
    s->send(partner, Slice{cur, off(glo)}, off(ghi) - off(glo));
    s->recvReduce(partner, Slice{cur, off(klo)}, out(off(klo)), off(khi) - off(klo));
    cur = BufId::Output;
    lo = klo, hi = khi;
  }
  for (int m = 1; m < p; m *= 2) {
    const int partner = h.real(v ^ m), plo = lo ^ m;
    s->beginStep();
    s->send(partner, out(off(lo)), off(lo + m) - off(lo));
    s->recv(partner, out(off(plo)), off(plo + m) - off(plo));
    lo = std::min(lo, plo);
  }
  if (r < 2 * h.rem) {
    s->beginStep();
    s->send(r - 1, out(0), C);
  }
}

void rhdReduceScatter(const CollArgs& a, Schedule* s) {
  const int n = a.nranks, r = a.rank;
  const size_t C = a.count;
  if (n == 1) {
    s->copy(in(0), out(0), C);
    return;
  }
  const Rhd h(n);
  const int v = h.vrank(r);
  if (v < 0) {
    s->send(r + 1, in(0), n * C);
    s->beginStep();
    s->recv(r + 1, out(0), C);
    return;
  }
  BufId cur = BufId::Input;
  bool usesScratch = false;
  if (r < 2 * h.rem) {
    s->recvReduce(r - 1, in(0), scr(0), n * C);
    cur = BufId::Scratch;
    usesScratch = true;
  }
  const int p = h.p;
  auto off = [&](int vv) { return static_cast<size_t>(h.start(vv)) * C; };  // off(p) == n*C
  int lo = 0, hi = p;
  for (int m = p / 2; m >= 1; m /= 2) {
    const int partner = h.real(v ^ m), mid = lo + m;
    int klo = lo, khi = mid, glo = mid, ghi = hi;
    if (v & m) std::swap(klo, glo), std::swap(khi, ghi);
    const bool last = m == 1 && v >= h.rem;  // keep window = own block only
    const Slice dst = last ? out(0) : scr(off(klo));
    s->beginStep();
    s->send(partner, Slice{cur, off(glo)}, off(ghi) - off(glo));
    s->recvReduce(partner, Slice{cur, off(klo)}, dst, off(khi) - off(klo));
    if (!last) usesScratch = true;
    cur = BufId::Scratch;
    lo = klo, hi = khi;
  }
  if (v < h.rem) {  // fold pair owns blocks r-1 and r
    s->beginStep();
    s->send(r - 1, scr((r - 1) * C), C);
    s->copy(scr(r * C), out(0), C);
  }
  if (usesScratch) s->scratchElems = n * C;
}

void rhdAllGather(const CollArgs& a, Schedule* s) {
  const int n = a.nranks, r = a.rank;
  const size_t C = a.count;
  if (n == 1) {
    s->copy(in(0), out(0), C);
    return;
  }
  const Rhd h(n);
  const int v = h.vrank(r);
  if (v < 0) {
    s->send(r + 1, in(0), C);
    s->beginStep();
    s->recv(r + 1, out(0), n * C);
    return;
  }
  const bool fold = r < 2 * h.rem;
  if (fold) {
    s->recv(r - 1, out((r - 1) * C), C);
    s->copy(in(0), out(r * C), C);
  }
  const int p = h.p;
  auto off = [&](int vv) { return static_cast<size_t>(h.start(vv)) * C; };
  int lo = v;
  for (int m = 1; m < p; m *= 2) {
    const int partner = h.real(v ^ m), plo = lo ^ m;
    s->beginStep();
    if (m == 1 && !fold) {  // own block still only in Input
      s->copy(in(0), out(r * C), C);  // no-op in place
      s->send(partner, in(0), C);
    } else {
      s->send(partner, out(off(lo)), off(lo + m) - off(lo));
    }
    s->recv(partner, out(off(plo)), off(plo + m) - off(plo));
    lo = std::min(lo, plo);
  }
  if (fold) {
    s->beginStep();
    s->send(r - 1, out(0), n * C);
  }
}

}  // namespace strata::algo
