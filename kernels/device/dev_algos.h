// dev_algos.h: the device collectives as sequences of Prims steps, one CUDA block per channel
// (each channel owns a contiguous part of the data) or, for send/recv, one block per entry:
// ring all-reduce (reduce-scatter then all-gather, the last reduction fused with the first
// forward), binary-tree all-reduce (reduce up, broadcast down; channel c rooted at rank c),
// ring reduce-scatter and all-gather, chain broadcast and reduce, send/recv/copy entries
// (all-to-all, gather and scatter are built from those by the planner), and deterministic mode's
// rank-tree all-reduce, reduce-scatter and reduce. The same code runs in the CUDA kernel and,
// with one host thread per block, in the emulation tests.
#pragma once

#include <cstdint>

#include "kernels/device/dev_peers.h"
#include "kernels/device/dev_prims.h"
#include "kernels/device/dev_work.h"

namespace strata::dev {

STRATA_HD_INLINE uint32_t dtypeBytes(uint8_t t) {
  switch (t) {
    case 0: case 1: case 10: case 11: return 1;
    case 6: case 9: return 2;
    case 4: case 5: case 8: return 8;
    default: return 4;
  }
}

/// Elements [off, off + cnt) of `count` that channel `c` of `nch` owns (16-byte-aligned splits).
STRATA_HD_INLINE void channelPart(uint64_t count, int c, int nch, uint64_t unit, uint64_t* off, uint64_t* cnt) {
  const uint64_t units = (count + unit - 1) / unit;
  const uint64_t per = (units + uint64_t(nch) - 1) / uint64_t(nch) * unit;
  const uint64_t b = per * uint64_t(c);
  *off = b < count ? b : count;
  const uint64_t e = b + per < count ? b + per : count;
  *cnt = e > *off ? e - *off : 0;
}

template <class Exec>
class Algorithms {
 public:
  STRATA_HD Algorithms(const Exec& ex, const DevWork& w, int block)
      : w_(w), block_(block), esize_(dtypeBytes(w.dtype)),
        prims_(ex, w, w.conns + (w.coll == Coll::P2P ? 0 : block) * w.nranks,
               w.coll == Coll::P2P && block < w.nops ? w.ops[block].proto : w.proto) {
    ctx_.dtype = w.dtype;
    ctx_.op = w.op;
    ctx_.scalar = w.scalar;
    ctx_.nranks = w.nranks;
  }

  /// Runs this block's share; false if aborted.
  STRATA_HD bool run() {
    switch (w_.coll) {
      case Coll::AllReduce:
        return w_.algo == Algo::RankTree ? rankTreeOwned() : w_.algo == Algo::Tree ? treeAllReduce() : ringAllReduce();
      case Coll::ReduceScatter: return w_.algo == Algo::RankTree ? rankTreeReduceScatter() : ringReduceScatter();
      case Coll::AllGather: return ringAllGather();
      case Coll::Broadcast: return chainBroadcast();
      case Coll::Reduce: return w_.algo == Algo::RankTree ? rankTreeOwned() : chainReduce();
      case Coll::P2P: return p2p();
    }
    return true;
  }

 private:
  STRATA_HD const char* in(uint64_t e) const { return w_.in + e * esize_; }
  STRATA_HD char* out(uint64_t e) const { return w_.out + e * esize_; }
  /// The step context: `scale` when the step reads this rank's input of a pre-multiplied sum,
  /// `divide` when it produces the final result of an avg.
  STRATA_HD RedCtx ctx(bool scale, bool divide) const {
    RedCtx c = ctx_;
    c.scaleSrc0 = scale && w_.scale;
    c.divide = divide && w_.divide;
    return c;
  }
  STRATA_HD bool step(Peers r, Peers s, const char* src, char* dst, uint64_t n, const RedCtx& c) {
    return prims_.step(r, s, src, dst, n, esize_, c);
  }

  STRATA_HD bool localCopy(const char* src, char* dst, uint64_t n) {
    // One rank: the result is the (scaled, divided) input.
    return step(Peers::none(), Peers::none(), src, dst, n, ctx(true, true));
  }

  /// Cuts this channel's `cnt` elements from `off` into rounds of n parts, each unit-aligned and at
  /// most `chunk` elements, and runs body(at, len) per round (at(q): where part q starts, len(q):
  /// its length, 0 past the end). Stops at the first round that returns false.
  template <class Body>
  STRATA_HD bool forEachRound(uint64_t off, uint64_t cnt, uint64_t unit, uint64_t chunk, const Body& body) {
    const int n = w_.nranks;
    for (uint64_t base = 0; base < cnt; base += uint64_t(n) * chunk) {
      const uint64_t left = cnt - base;
      uint64_t real = (left + n - 1) / n;
      real = (real + unit - 1) / unit * unit;
      if (real > chunk) real = chunk;
      auto len = [&](int q) -> uint64_t {
        const uint64_t s = uint64_t(q) * real;
        return s >= left ? 0 : (left - s < real ? left - s : real);
      };
      auto at = [&](int q) { return off + base + uint64_t(q) * real; };
      if (!body(at, len)) return false;
    }
    return true;
  }

  /// The first n-1 steps of a ring reduction: send this rank's input of chunk r-1, then for
  /// chunks r-2 .. r-n+1 receive the partial sum, add this rank's input and forward it. at(c) is
  /// where chunk c starts (elements), len(c) its length; the caller does the final step.
  template <class At, class Len>
  STRATA_HD bool ringPartials(const At& at, const Len& len) {
    const int n = w_.nranks, r = w_.rank;
    const Peers prev = Peers::one(mod(r - 1, n)), next = Peers::one(mod(r + 1, n));
    int c = mod(r - 1, n);
    if (!step(Peers::none(), next, in(at(c)), nullptr, len(c), ctx(true, false))) return false;
    for (int j = 1; j <= n - 2; ++j) {
      c = mod(r - 1 - j, n);
      if (!step(prev, next, in(at(c)), nullptr, len(c), ctx(true, false))) return false;
    }
    return true;
  }

  STRATA_HD bool ringAllReduce() {
    const int n = w_.nranks, r = w_.rank;
    const uint64_t unit = Prims<Exec>::unitElems(esize_);
    uint64_t off, cnt;
    channelPart(w_.count, block_, w_.nch, unit, &off, &cnt);
    if (n == 1) return localCopy(in(off), out(off), cnt);
    const Peers prev = Peers::one(mod(r - 1, n)), next = Peers::one(mod(r + 1, n)), none = Peers::none();
    return forEachRound(off, cnt, unit, prims_.chunkElems(esize_), [&](const auto& at, const auto& len) {
      if (!ringPartials(at, len)) return false;
      int c = r;
      if (!step(prev, next, in(at(c)), out(at(c)), len(c), ctx(true, true))) return false;
      for (int j = 1; j <= n - 2; ++j) {
        c = mod(r - j, n);
        if (!step(prev, next, nullptr, out(at(c)), len(c), ctx(false, false))) return false;
      }
      c = mod(r + 1, n);
      return step(prev, none, nullptr, out(at(c)), len(c), ctx(false, false));
    });
  }

  STRATA_HD bool treeAllReduce() {
    const int n = w_.nranks;
    const uint64_t unit = Prims<Exec>::unitElems(esize_);
    uint64_t off, cnt;
    channelPart(w_.count, block_, w_.nch, unit, &off, &cnt);
    if (n == 1) return localCopy(in(off), out(off), cnt);
    // Binary heap over virtual ranks v = rank - c: channel c is rooted at rank c mod n.
    int parent, kid0, kid1;
    treeLinks(w_.rank, n, block_, &parent, &kid0, &kid1);
    const Peers kids = Peers::two(kid0, kid1), none = Peers::none();
    const uint64_t chunk = prims_.chunkElems(esize_);
    for (uint64_t b = 0; b < cnt; b += chunk) {
      const uint64_t len = cnt - b < chunk ? cnt - b : chunk;
      const uint64_t e = off + b;
      if (parent < 0) {  // root: reduce the children into the output and send it back down
        if (!step(kids, kids, in(e), out(e), len, ctx(true, true))) return false;
        continue;
      }
      if (!step(kids, Peers::one(parent), in(e), nullptr, len, ctx(true, false))) return false;
      if (!step(Peers::one(parent), kids.n ? kids : none, nullptr, out(e), len, ctx(false, false)))
        return false;
    }
    return true;
  }

  STRATA_HD bool ringReduceScatter() {
    const int n = w_.nranks, r = w_.rank;
    const uint64_t unit = Prims<Exec>::unitElems(esize_);
    uint64_t off, cnt;
    channelPart(w_.count, block_, w_.nch, unit, &off, &cnt);
    if (n == 1) return localCopy(in(off), out(off), cnt);
    const Peers prev = Peers::one(mod(r - 1, n)), none = Peers::none();
    const uint64_t chunk = prims_.chunkElems(esize_);
    for (uint64_t b = 0; b < cnt; b += chunk) {
      const uint64_t len = cnt - b < chunk ? cnt - b : chunk;
      auto blk = [&](int c) { return uint64_t(c) * w_.count + off + b; };
      if (!ringPartials(blk, [&](int) { return len; })) return false;
      if (!step(prev, none, in(blk(r)), out(off + b), len, ctx(true, true))) return false;
    }
    return true;
  }

  STRATA_HD bool ringAllGather() {
    const int n = w_.nranks, r = w_.rank;
    const uint64_t unit = Prims<Exec>::unitElems(esize_);
    uint64_t off, cnt;
    channelPart(w_.count, block_, w_.nch, unit, &off, &cnt);
    const Peers prev = Peers::one(mod(r - 1, n)), next = Peers::one(mod(r + 1, n)), none = Peers::none();
    const uint64_t chunk = prims_.chunkElems(esize_);
    for (uint64_t b = 0; b < cnt; b += chunk) {
      const uint64_t len = cnt - b < chunk ? cnt - b : chunk;
      auto blk = [&](int c) { return uint64_t(c) * w_.count + off + b; };
      char* mine = out(blk(r));
      const char* src = in(off + b);
      if (!step(none, n > 1 ? next : none, src, mine == src ? nullptr : mine, len, ctx(false, false)))
        return false;
      if (n == 1) continue;
      for (int j = 1; j <= n - 2; ++j)
        if (!step(prev, next, nullptr, out(blk(mod(r - j, n))), len, ctx(false, false))) return false;
      if (!step(prev, none, nullptr, out(blk(mod(r + 1, n))), len, ctx(false, false))) return false;
    }
    return true;
  }

  STRATA_HD bool chainBroadcast() {
    const int n = w_.nranks, r = w_.rank, pos = mod(r - w_.root, n);
    const uint64_t unit = Prims<Exec>::unitElems(esize_);
    uint64_t off, cnt;
    channelPart(w_.count, block_, w_.nch, unit, &off, &cnt);
    const Peers prev = Peers::one(mod(r - 1, n)), none = Peers::none();
    const Peers next = pos == n - 1 ? none : Peers::one(mod(r + 1, n));
    const uint64_t chunk = prims_.chunkElems(esize_);
    for (uint64_t b = 0; b < cnt; b += chunk) {
      const uint64_t len = cnt - b < chunk ? cnt - b : chunk;
      const uint64_t e = off + b;
      if (pos == 0) {
        char* dst = out(e) == in(e) ? nullptr : out(e);
        if ((next.n || dst) && !step(none, next, in(e), dst, len, ctx(false, false))) return false;
      } else if (!step(prev, next, nullptr, out(e), len, ctx(false, false))) {
        return false;
      }
    }
    return true;
  }

  STRATA_HD bool chainReduce() {
    const int n = w_.nranks, r = w_.rank, pos = mod(r - w_.root - 1, n);  // the root is last
    const uint64_t unit = Prims<Exec>::unitElems(esize_);
    uint64_t off, cnt;
    channelPart(w_.count, block_, w_.nch, unit, &off, &cnt);
    if (n == 1) return localCopy(in(off), out(off), cnt);
    const Peers prev = pos == 0 ? Peers::none() : Peers::one(mod(r - 1, n));
    const Peers next = pos == n - 1 ? Peers::none() : Peers::one(mod(r + 1, n));
    const uint64_t chunk = prims_.chunkElems(esize_);
    for (uint64_t b = 0; b < cnt; b += chunk) {
      const uint64_t len = cnt - b < chunk ? cnt - b : chunk;
      const uint64_t e = off + b;
      const bool root = pos == n - 1;
      if (!step(prev, next, in(e), root ? out(e) : nullptr, len, ctx(true, root))) return false;
    }
    return true;
  }

  // Deterministic mode (Algo::RankTree): every element is the rank-order tree of rank_tree.h,
  // whatever the channel, chunk or protocol, the same association the host algorithms of that
  // mode use. Each pipeline chunk is split into n parts, part q owned by rank q: every rank sends
  // its input of part q to rank q (n - 1 direct sends), and the owner combines the n contributions
  // in one stepTree. All-reduce: the owner's stepTree also sends the result to every rank, which
  // receives each other owner's part. Reduce: the owner's result goes to the root only.
  // Reduce-scatter: part q is rank q's block, so the owner's output is the result.

  /// Sends this rank's input of every other rank's part: at(q) is where part q starts, len(q) its length.
  template <class At, class Len>
  STRATA_HD bool sendParts(const At& at, const Len& len) {
    const int n = w_.nranks, r = w_.rank;
    for (int j = 1; j < n; ++j) {
      const int q = mod(r + j, n);
      if (!step(Peers::none(), Peers::one(q), in(at(q)), nullptr, len(q), ctx(true, false))) return false;
    }
    return true;
  }

  /// All-reduce and reduce: parts of `count` elements.
  STRATA_HD bool rankTreeOwned() {
    const int n = w_.nranks, r = w_.rank;
    const bool all = w_.coll == Coll::AllReduce, root = w_.rank == w_.root;
    const uint64_t unit = Prims<Exec>::unitElems(esize_);
    uint64_t off, cnt;
    channelPart(w_.count, block_, w_.nch, unit, &off, &cnt);
    if (n == 1) return localCopy(in(off), out(off), cnt);
    return forEachRound(off, cnt, unit, prims_.chunkElems(esize_), [&](const auto& at, const auto& len) {
      if (!sendParts(at, len)) return false;
      char* mine = all || root ? out(at(r)) : nullptr;
      const int to = all ? kAllPeers : root ? kNoPeer : w_.root;
      if (!prims_.stepTree(in(at(r)), mine, to, len(r), esize_, ctx(true, true))) return false;
      if (!all && !root) return true;
      for (int j = 1; j < n; ++j) {  // every other owner's result
        const int q = mod(r - j, n);
        if (!step(Peers::one(q), Peers::none(), nullptr, out(at(q)), len(q), ctx(false, false))) return false;
      }
      return true;
    });
  }

  /// Reduce-scatter: part q of each chunk is in rank q's block of the input.
  STRATA_HD bool rankTreeReduceScatter() {
    const int n = w_.nranks, r = w_.rank;
    const uint64_t unit = Prims<Exec>::unitElems(esize_);
    uint64_t off, cnt;
    channelPart(w_.count, block_, w_.nch, unit, &off, &cnt);
    if (n == 1) return localCopy(in(off), out(off), cnt);
    const uint64_t chunk = prims_.chunkElems(esize_);
    for (uint64_t b = 0; b < cnt; b += chunk) {
      const uint64_t len = cnt - b < chunk ? cnt - b : chunk;
      auto blk = [&](int q) { return uint64_t(q) * w_.count + off + b; };
      if (!sendParts(blk, [&](int) { return len; })) return false;
      if (!prims_.stepTree(in(blk(r)), out(off + b), kNoPeer, len, esize_, ctx(true, true))) return false;
    }
    return true;
  }

  /// Block b runs entry b: sends and receives move through channel 0's connection with the peer
  /// in slot-sized steps; copies are local.
  STRATA_HD bool p2p() {
    if (block_ >= w_.nops) return true;
    const P2POp& op = w_.ops[block_];
    const uint64_t chunk = prims_.chunkElems(1);
    const RedCtx c = ctx(false, false);
    if (op.kind == OpKind::Copy) {
      return step(Peers::none(), Peers::none(), op.src, op.dst, op.bytes, c);
    }
    const Peers peer = Peers::one(op.peer), none = Peers::none();
    for (uint64_t b = 0; b < op.bytes; b += chunk) {
      const uint64_t len = op.bytes - b < chunk ? op.bytes - b : chunk;
      const bool ok = op.kind == OpKind::Send ? step(none, peer, op.src + b, nullptr, len, c)
                                              : step(peer, none, nullptr, op.dst + b, len, c);
      if (!ok) return false;
    }
    return true;
  }

  const DevWork& w_;
  int block_;
  uint32_t esize_;
  Prims<Exec> prims_;
  RedCtx ctx_;
};

/// Entry point of one block (the kernel body; the emulation calls it per host thread).
template <class Exec>
STRATA_HD bool runBlock(const Exec& ex, const DevWork& w, int block) {
  Algorithms<Exec> a(ex, w, block);
  return a.run();
}

}  // namespace strata::dev
