// pairwise.cc: pairwise-exchange all-to-all.
//
// Out of place, n-1 steps (1 for n = 1): step s = 1..n-1 sends Input block r+s to rank r+s and
// receives Output block r-s from rank r-s; every rank is busy with exactly one peer each way per
// step, so the pattern is contention-free and deadlock-free under rendezvous. The own block is
// copied in the first step. (n-1)*C elements out and in per rank; no Scratch.
//
// In place (CollArgs::inPlace, Input == Output; sets Schedule::inPlace so that the executor does
// not stage the input): the same n-1 shifts, ordered in pairs d, n-d for d = 1..(n-1)/2, then n/2
// when n is even. Shift d sends block r+d and receives into block r-d; shift n-d sends block r-d
// and receives into block r+d. So of the two blocks only r-d is overwritten before it is sent: it
// is copied to Scratch before shift d and sent from there at shift n-d, while block r+d is sent
// straight from the buffer before shift n-d receives into it. Shift n/2 (n even) sends and
// receives block r+n/2 with the same peer: that block is staged likewise. The own block stays in
// place. Each pair's staging copy runs in the step of the previous pair's last exchange (after its
// send and receive are posted; it reads block r-d, which that step's receive, into block r+d-1,
// never touches as 2d-1 is not a multiple of n), alternating between two Scratch slots; the
// first pair's copy is a local step of its own. Copies: (n-1)/2 blocks rounded up (a whole-input
// stage copies n); Scratch: 2*C elements (C for n <= 3); steps: n (one local, n-1 exchanges).
#include "collectives/algorithms/algorithms.h"

namespace strata::algo {

namespace {

void pairwiseAllToAllInPlace(const CollArgs& a, Schedule* s) {
  const int n = a.nranks, r = a.rank;
  const size_t C = a.count;
  s->inPlace = true;
  if (n == 1) return;  // the own block is already in place
  const int pairs = n / 2;  // d = 1..pairs; d == n/2 (n even) is a single shift
  auto slot = [&](int d) { return scr(static_cast<size_t>((d - 1) % 2) * C); };
  auto block = [&](int peer) { return static_cast<size_t>(peer) * C; };
  s->copy(in(block(mod(r - 1, n))), slot(1), C);
  for (int d = 1; d <= pairs; ++d) {
    const int up = mod(r + d, n), down = mod(r - d, n);
    // Shift d: block `down` was staged in slot(d); block `up` is still the caller's.
    s->beginStep();
    if (up == down) {
      s->send(up, slot(d), C);
      s->recv(down, out(block(down)), C);
    } else {
      s->send(up, in(block(up)), C);
      s->recv(down, out(block(down)), C);
      // Shift n-d: block `up` has been sent, `down` goes from its staged copy.
      s->beginStep();
      s->send(down, slot(d), C);
      s->recv(up, out(block(up)), C);
    }
    if (d < pairs) s->copy(in(block(mod(r - d - 1, n))), slot(d + 1), C);  // after this step's posts
  }
  s->scratchElems = (pairs > 1 ? 2 : 1) * C;
}

}  // namespace

void pairwiseAllToAll(const CollArgs& a, Schedule* s) {
  if (a.inPlace) return pairwiseAllToAllInPlace(a, s);
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
