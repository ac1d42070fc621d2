// tree.cc: binomial tree (k-nomial, k = 2) schedules on ranks relative to the root, v = r - root.
//
// Tree shape: vrank v > 0 has parent v - lowbit(v) and children v + m for m = lowbit(v)/2, .., 2, 1
// (those < n); the root's children are v + m for m = 2^(ceil(log2 n)-1), .., 1. The subtree of v
// is the contiguous range [v, min(n, v + lowbit(v))), which Gather and Scatter rely on.
// Broadcast, ceil(log2 n) rounds: a rank receives from its parent, then sends to its children,
//   largest subtree first, one child per step. C elements per edge.
// Reduce, ceil(log2 n) rounds: the reverse: receive children smallest subtree first, each a
//   recvReduce (acc = acc + child), then send acc to the parent. Non-roots accumulate in Scratch
//   (they have no Output), the root in Output. Contribution order depends only on (n, root).
// AllReduce: Reduce to rank 0 accumulating in Output on every rank (no Scratch), then Broadcast from
//   rank 0: 2*ceil(log2 n) rounds, every rank holds rank 0's bits.
// Gather / Scatter: the Reduce / Broadcast pattern moving whole subtrees: an edge carries
//   (subtree size) * C elements, staged in Scratch in relative-rank order; the root reads/writes
//   its Input/Output directly, so a subtree that wraps past rank n-1 travels as two messages.
//   Root volume (n-1)*C, ceil(log2 n) rounds.
#include <algorithm>

#include "collectives/algorithms/algorithms.h"

namespace strata::algo {

namespace {

struct Binomial {
  int n, root;
  int lowbit(int v) const { return v == 0 ? ceilPow2(n) : (v & -v); }
  int parent(int v) const { return v - lowbit(v); }
  int end(int v) const { return std::min(n, v + lowbit(v)); }
  int real(int v) const { return (v + root) % n; }
  /// Children of v, largest subtree first (broadcast order).
  std::vector<int> childrenDesc(int v) const {
    std::vector<int> c;
    for (int m = lowbit(v) / 2; m >= 1; m /= 2)
      if (v + m < n) c.push_back(v + m);
    return c;
  }
  /// Calls fn(lo, hi) for the pieces of relative range [lo, hi) of a subtree exchanged with the
  /// root, split where the real ranks wrap past n-1 (vrank n - root).
  template <class Fn>
  void pieces(int lo, int hi, bool withRoot, Fn fn) const {
    const int w = n - root;
    if (withRoot && lo < w && w < hi) {
      fn(lo, w);
      fn(w, hi);
    } else {
      fn(lo, hi);
    }
  }
};

// Binomial broadcast of C elements: the root sends from rootSrc (and copies it to Output unless
// rootSrc is Output itself), the others receive into Output and forward.
void bcastCore(const Binomial& t, int v, size_t C, Slice rootSrc, Schedule* s) {
  Slice src = out(0);
  s->beginStep();
  if (v == 0) {
    if (rootSrc.buf != BufId::Output) s->copy(rootSrc, out(0), C);  // no-op in place
    src = rootSrc;
  } else {
    s->recv(t.real(t.parent(v)), out(0), C);
  }
  bool first = v == 0;  // the root's first send shares the copy's step
  for (int c : t.childrenDesc(v)) {
    if (!first) s->beginStep();
    first = false;
    s->send(t.real(c), src, C);
  }
}

// Binomial reduce of C elements into acc (Output on the root), children smallest subtree first.
void reduceCore(const Binomial& t, int v, size_t C, Slice acc, Schedule* s) {
  std::vector<int> ch = t.childrenDesc(v);
  std::reverse(ch.begin(), ch.end());
  Slice cur = in(0);
  for (int c : ch) {
    s->beginStep();
    s->recvReduce(t.real(c), cur, acc, C);
    cur = acc;
  }
  if (v == 0) {
    if (ch.empty()) s->copy(in(0), acc, C);
  } else {
    s->beginStep();
    s->send(t.real(t.parent(v)), cur, C);
  }
}

}  // namespace

void treeBroadcast(const CollArgs& a, Schedule* s) {
  const Binomial t{a.nranks, a.root};
  bcastCore(t, mod(a.rank - a.root, a.nranks), a.count, in(0), s);
}

void treeReduce(const CollArgs& a, Schedule* s) {
  const Binomial t{a.nranks, a.root};
  const int v = mod(a.rank - a.root, a.nranks);
  const bool leaf = t.childrenDesc(v).empty();
  reduceCore(t, v, a.count, v == 0 ? out(0) : scr(0), s);
  if (v != 0 && !leaf) s->scratchElems = a.count;
}

void treeAllReduce(const CollArgs& a, Schedule* s) {
  const Binomial t{a.nranks, 0};
  reduceCore(t, a.rank, a.count, out(0), s);
  bcastCore(t, a.rank, a.count, out(0), s);
}

void treeGather(const CollArgs& a, Schedule* s) {
  const int n = a.nranks;
  const size_t C = a.count;
  const Binomial t{n, a.root};
  const int v = mod(a.rank - a.root, n);
  std::vector<int> ch = t.childrenDesc(v);
  std::reverse(ch.begin(), ch.end());
  // Where relative block u lands on this rank: the root writes Output in real order, the others
  // stage their subtree in Scratch.
  auto dst = [&](int u) { return v == 0 ? out(t.real(u) * C) : scr((u - v) * C); };
  s->beginStep();
  if (v == 0)
    s->copy(in(0), out(a.root * C), C);  // no-op in place
  else if (!ch.empty())
    s->copy(in(0), scr(0), C);
  bool first = true;
  for (int c : ch) {
    if (!first) s->beginStep();
    first = false;
    t.pieces(c, t.end(c), v == 0, [&](int lo, int hi) { s->recv(t.real(c), dst(lo), (hi - lo) * C); });
  }
  if (v != 0) {
    s->beginStep();
    const int p = t.parent(v);
    if (ch.empty())
      s->send(t.real(p), in(0), C);
    else
      t.pieces(v, t.end(v), p == 0,
               [&](int lo, int hi) { s->send(t.real(p), scr((lo - v) * C), (hi - lo) * C); });
    if (!ch.empty()) s->scratchElems = (t.end(v) - v) * C;
  }
}

void treeScatter(const CollArgs& a, Schedule* s) {
  const int n = a.nranks;
  const size_t C = a.count;
  const Binomial t{n, a.root};
  const int v = mod(a.rank - a.root, n);
  const std::vector<int> ch = t.childrenDesc(v);
  // Where relative block u is read from: the root's Input in real order, else the staged subtree.
  auto src = [&](int u) { return v == 0 ? in(t.real(u) * C) : scr((u - v) * C); };
  if (v != 0) {
    const int p = t.parent(v);
    s->beginStep();
    if (ch.empty()) {
      s->recv(t.real(p), out(0), C);
    } else {
      t.pieces(v, t.end(v), p == 0,
               [&](int lo, int hi) { s->recv(t.real(p), scr((lo - v) * C), (hi - lo) * C); });
      s->scratchElems = (t.end(v) - v) * C;
    }
  }
  s->beginStep();
  if (v == 0)
    s->copy(in(a.root * C), out(0), C);  // no-op in place
  else if (!ch.empty())
    s->copy(scr(0), out(0), C);
  bool first = true;
  for (int c : ch) {
    if (!first) s->beginStep();
    first = false;
    t.pieces(c, t.end(c), v == 0, [&](int lo, int hi) { s->send(t.real(c), src(lo), (hi - lo) * C); });
  }
}

}  // namespace strata::algo
