// ring.cc: ring schedules. Rank r sends to r+1 and receives from r-1 only (n = nranks, C = count).
//
// AllReduce, 2(n-1) steps: Input is cut into n near-equal segments (possibly empty).
//   Reduce-scatter, steps s = 0..n-2: send segment r-s (step 0 from Input, later the partial sum in
//   Output), recvReduce segment r-s-1 as Output = Input + incoming. Segment j's sum is built along
//   the ring starting at rank j, so rank r ends owning segment r+1.
//   All-gather, steps s = 0..n-2: send segment r+1-s, receive segment r-s into Output.
//   Per rank: 2(n-1)/n * C elements sent and received; every rank holds the same bits.
// ReduceScatter, n-1 steps: block j's sum starts at rank j+1 and ends at rank j. Step s sends block
//   r-s-1 and recvReduces block r-s-2 (= Input + incoming) into one of two Scratch slots (the slot
//   received in step s is sent in step s+1), the last step straight into Output. Scratch 2C.
// AllGather, n-1 steps: step 0 copies own block and sends it from Input; step s sends block r-s and
//   receives block r-s-1 into Output.
// AllReduce, Broadcast and Reduce follow RingOrder (rank order, or node by node for layouts that
//   are not node-major); below, "rank r" means ring position r.
// Broadcast / Reduce, P + n - 2 steps: a chain along the ring from the root (broadcast: root, root+1,
//   ..., root-1) or to it (reduce: root+1, ..., root-1, root), pipelined over P chunks
//   (ringPipelineChunks: chunks of >= 256 elements, at most 4n chunks): the rank at chain position q
//   receives chunk t-q+1 and forwards chunk t-q in step t. Time ~ (P+n-2)(a + b*C/P): close to
//   b*C for large C. Reduce: middle ranks accumulate into two alternating Scratch chunk slots
//   (they have no Output), the root into Output; contributions are added in chain order.
#include <algorithm>

#include "collectives/algorithms/algorithms.h"
#include "topology/layout.h"

namespace strata::algo {

RingOrder::RingOrder(const CollArgs& a) {
  const topology::CommLayout* l = a.layout;
  if (!l || l->nranks() != a.nranks || l->nnodes() == 1) return;
  bool nodeMajor = true;
  for (int r = 1; r < a.nranks && nodeMajor; ++r) nodeMajor = l->node(r) >= l->node(r - 1);
  if (nodeMajor) return;
  pos_.resize(static_cast<size_t>(a.nranks));
  for (int k = 0; k < l->nnodes(); ++k)
    for (int r : l->members(k)) {
      pos_[static_cast<size_t>(r)] = static_cast<int>(ord_.size());
      ord_.push_back(r);
    }
}

int ringPipelineChunks(int n, size_t count) {
  if (count == 0) return 1;
  size_t p = (count + kRingMinChunkElems - 1) / kRingMinChunkElems;
  p = std::min(p, static_cast<size_t>(kRingMaxChunksPerRank) * static_cast<size_t>(n));
  p = std::min(p, count);
  return static_cast<int>(std::max<size_t>(p, 1));
}

void ringAllReduce(const CollArgs& a, Schedule* s) {
  const RingOrder ring(a);
  const int n = a.nranks, r = ring.position(a.rank);
  const size_t C = a.count;
  if (n == 1) {
    s->copy(in(0), out(0), C);
    return;
  }
  auto off = [&](int j) { return segOff(C, n, mod(j, n)); };
  auto len = [&](int j) { return segLen(C, n, mod(j, n)); };
  const int next = ring.rankAt(mod(r + 1, n)), prev = ring.rankAt(mod(r - 1, n));
  for (int st = 0; st < n - 1; ++st) {
    s->beginStep();
    const int sj = r - st, rj = r - st - 1;
    s->send(next, st == 0 ? in(off(sj)) : out(off(sj)), len(sj));
    s->recvReduce(prev, in(off(rj)), out(off(rj)), len(rj));
  }
  for (int st = 0; st < n - 1; ++st) {
    s->beginStep();
    const int sj = r + 1 - st, rj = r - st;
    s->send(next, out(off(sj)), len(sj));
    s->recv(prev, out(off(rj)), len(rj));
  }
}

void ringReduceScatter(const CollArgs& a, Schedule* s) {
  const int n = a.nranks, r = a.rank;
  const size_t C = a.count;
  if (n == 1) {
    s->copy(in(0), out(0), C);
    return;
  }
  const int next = mod(r + 1, n), prev = mod(r - 1, n);
  // Step st receives into slot st % 2 (the last step into Output) and sends slot (st-1) % 2.
  for (int st = 0; st < n - 1; ++st) {
    s->beginStep();
    const int sb = mod(r - st - 1, n), rb = mod(r - st - 2, n);
    s->send(next, st == 0 ? in(sb * C) : scr(((st - 1) % 2) * C), C);
    const Slice dst = st == n - 2 ? out(0) : scr((st % 2) * C);
    s->recvReduce(prev, in(rb * C), dst, C);
  }
  s->scratchElems = n > 2 ? (n > 3 ? 2 * C : C) : 0;
}

void ringAllGather(const CollArgs& a, Schedule* s) {
  const int n = a.nranks, r = a.rank;
  const size_t C = a.count;
  s->copy(in(0), out(r * C), C);  // no-op in place
  const int next = mod(r + 1, n), prev = mod(r - 1, n);
  for (int st = 0; st < n - 1; ++st) {
    if (st > 0) s->beginStep();
    const int sb = mod(r - st, n), rb = mod(r - st - 1, n);
    s->send(next, st == 0 ? in(0) : out(sb * C), C);
    s->recv(prev, out(rb * C), C);
  }
}

namespace {

// Chunk c of the pipelined chain.
struct Chunks {
  size_t C;
  int P;
  size_t off(int c) const { return segOff(C, P, c); }
  size_t len(int c) const { return segLen(C, P, c); }
  size_t maxLen() const { return segLen(C, P, 0); }
};

}  // namespace

void ringBroadcast(const CollArgs& a, Schedule* s) {
  const RingOrder ring(a);
  const int n = a.nranks, r = ring.position(a.rank);
  const size_t C = a.count;
  const Chunks ch{C, ringPipelineChunks(n, C)};
  const int P = ch.P;
  const int q = mod(r - ring.position(a.root), n);  // chain position, root = 0
  const int next = ring.rankAt(mod(r + 1, n)), prev = ring.rankAt(mod(r - 1, n));
  if (q == 0) {
    s->copy(in(0), out(0), C);  // no-op in place
    if (n == 1) return;
    for (int t = 0; t < P; ++t) {
      if (t > 0) s->beginStep();
      s->send(next, in(ch.off(t)), ch.len(t));
    }
    return;
  }
  for (int t = 0; t < P + n - 2; ++t) {
    s->beginStep();
    const int rc = t - q + 1, sc = t - q;
    if (rc >= 0 && rc < P) s->recv(prev, out(ch.off(rc)), ch.len(rc));
    if (q < n - 1 && sc >= 0 && sc < P) s->send(next, out(ch.off(sc)), ch.len(sc));
  }
}

void ringReduce(const CollArgs& a, Schedule* s) {
  const RingOrder ring(a);
  const int n = a.nranks, r = ring.position(a.rank);
  const size_t C = a.count;
  if (n == 1) {
    s->copy(in(0), out(0), C);
    return;
  }
  const Chunks ch{C, ringPipelineChunks(n, C)};
  const int P = ch.P;
  const int q = mod(r - ring.position(a.root) - 1, n);  // chain position: root+1 = 0, ..., root = n-1
  const int next = ring.rankAt(mod(r + 1, n)), prev = ring.rankAt(mod(r - 1, n));
  const size_t M = ch.maxLen();
  // Middle ranks keep chunk c's partial sum in Scratch slot c % 2.
  auto acc = [&](int c) { return q == n - 1 ? out(ch.off(c)) : scr((c % 2) * M); };
  for (int t = 0; t < P + n - 2; ++t) {
    s->beginStep();
    const int rc = t - q + 1, sc = t - q;
    if (q >= 1 && rc >= 0 && rc < P) s->recvReduce(prev, in(ch.off(rc)), acc(rc), ch.len(rc));
    if (q < n - 1 && sc >= 0 && sc < P) s->send(next, q == 0 ? in(ch.off(sc)) : acc(sc), ch.len(sc));
  }
  if (q >= 1 && q < n - 1) s->scratchElems = (P > 1 ? 2 : 1) * M;
}

}  // namespace strata::algo
