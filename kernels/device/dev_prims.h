// dev_prims.h: the one communication primitive every device algorithm is built from. A step
// waits for data from its receive peers and for free slots at its send peers, then writes
// reduce(local source, received slots) to the local destination and to the send peers' slots,
// then posts (Simple: data-ready counter after a fence; LL: the flags travel with the data) and
// returns credits. `Exec` is a CUDA block (device) or one host thread (the emulation in tests);
// every thread of the block calls step() with the same arguments and keeps identical counters.
// stepTree() is deterministic mode's variant: one step from every other rank at once, combined in
// the rank-order tree (rank_tree.h) instead of the order the data arrives in.
#pragma once

#include <cstdint>

#include "kernels/device/dev_reduce.h"
#include "kernels/device/dev_sync.h"
#include "kernels/device/dev_work.h"
#include "kernels/device/rank_tree.h"

namespace strata::dev {

constexpr int kMaxStepPeers = 2;
/// stepTree's send side: nobody, every other rank, or (>= 0) that one rank.
constexpr int kNoPeer = -1, kAllPeers = -2;

/// Peers of one step on one side (receive or send): up to two (a tree node's children).
struct Peers {
  int n = 0;
  int p[kMaxStepPeers] = {-1, -1};
  STRATA_HD static Peers none() { return Peers{}; }
  STRATA_HD static Peers one(int a) {
    Peers s;
    if (a >= 0) s.p[s.n++] = a;
    return s;
  }
  STRATA_HD static Peers two(int a, int b) {
    Peers s = one(a);
    if (b >= 0) s.p[s.n++] = b;
    return s;
  }
};

template <class Exec>
class Prims {
 public:
  /// `conns`: this rank's PeerConn row of one channel. The step counters live in the arena and are
  /// advanced there by thread 0 between barriers, so the next launch continues from them.
  STRATA_HD Prims(const Exec& ex, const DevWork& w, const PeerConn* conns, Proto proto)
      : ex_(ex), w_(w), conns_(conns), proto_(proto) {}

  /// Elements one step may carry (a multiple of 16 bytes' worth).
  STRATA_HD uint64_t chunkElems(uint32_t esize) const {
    const uint64_t bytes = proto_ == Proto::LL ? w_.llSlotBytes / 2 : w_.slotBytes;
    const uint64_t e = (bytes / esize) / unitElems(esize) * unitElems(esize);
    return e ? e : unitElems(esize);
  }
  STRATA_HD static uint64_t unitElems(uint32_t esize) { return esize >= 16 ? 1 : 16 / esize; }

  /// One step over `n` elements of size `esize`. Returns false when the abort flag stopped it.
  STRATA_HD bool step(Peers recv, Peers send, const char* src, char* dst, uint64_t n, uint32_t esize,
                      const RedCtx& ctx) {
    return proto_ == Proto::LL ? stepLL(recv, send, src, dst, n, esize, ctx)
                                 : stepSimple(recv, send, src, dst, n, esize, ctx);
  }

  /// Deterministic mode's reduction step over `n` elements: waits for one step from every other
  /// rank (and for room at the send peers), combines the nranks contributions in the rank-order
  /// tree (rank_tree.h; rank q's from its slot, this rank's from `own`, scaled first for a
  /// pre-multiplied sum) and writes the result (divided for avg) to `dst` (may be null) and to
  /// `sendTo` (kNoPeer, kAllPeers or one rank). Both protocols; 8-byte packs combined with packAdd,
  /// so no dtype x op code beyond the LL protocol's. Returns false when the abort flag stopped it.
  STRATA_HD STRATA_DEVICE_NOINLINE bool stepTree(const char* own, char* dst, int sendTo, uint64_t n, uint32_t esize,
                                                 const RedCtx& ctx) {
    const int me = w_.rank, nr = w_.nranks;
    const bool ll = proto_ == Proto::LL;
    auto sends = [&](int q) { return q != me && (sendTo == kAllPeers || sendTo == q); };
    bool ok = true;
    if (ex_.tid() == 0) {
      for (int q = 0; q < nr && ok; ++q)
        if (sends(q)) ok = waitCredit(conns_[q]);
      for (int q = 0; q < nr && ok && !ll; ++q)
        if (q != me) ok = waitData(conns_[q]);
      for (int q = 0; q < nr && !ll; ++q)  // proxied peers: the step's size, published by the head
        if (sends(q) && conns_[q].sendSizes) conns_[q].sendSizes[*conns_[q].sendStep % kSteps] = n * esize;
    }
    if (ex_.syncOr(!ok)) return false;
    const uint64_t bytes = n * esize, npk = (bytes + 7) / 8, llSlotWords = w_.llSlotBytes / 8;
    for (uint64_t k = uint64_t(ex_.tid()); k < npk && ok; k += uint64_t(ex_.nthreads())) {
      const uint64_t valid = bytes - 8 * k < 8 ? bytes - 8 * k : 8;
      auto leaf = [&](int q) -> uint64_t {
        if (q == me) return packFirst(load8(own + 8 * k, valid), ctx);
        const PeerConn& pc = conns_[q];
        const uint64_t s = *pc.recvStep;
        if (!ll) return loadSlot8(pc.recvSimple + (s % kSteps) * w_.slotBytes + 8 * k, valid);
        uint64_t v = 0;
        uint32_t spins = 0;
        while (ok && !loadLL(pc.recvLL + (s % kSteps) * llSlotWords + 2 * k, llFlag(s), &v)) {
          if ((++spins & 1023u) == 0 && loadVolatile32(w_.abortFlag)) ok = false;
          ex_.pause(spins);
        }
        return v;
      };
      auto combine = [&](uint64_t lo, uint64_t hi) { return packAdd(lo, hi, ctx); };
      const uint64_t acc = packLast(rankTreeFold<uint64_t>(nr, leaf, combine), ctx);
      if (!ok) break;
      if (dst) store8(dst + 8 * k, acc, valid);
      for (int q = 0; q < nr; ++q) {
        if (!sends(q)) continue;
        const PeerConn& pc = conns_[q];
        const uint64_t s = *pc.sendStep;
        if (ll) storeLL(pc.sendLL + (s % kSteps) * llSlotWords + 2 * k, acc, llFlag(s));
        else store8(pc.sendSimple + (s % kSteps) * w_.slotBytes + 8 * k, acc, valid);
      }
    }
    if (ex_.syncOr(!ok)) return false;
    fenceSystem();
    ex_.sync();
    if (ex_.tid() == 0)
      for (int q = 0; q < nr; ++q) {
        if (q == me) continue;
        if (sends(q)) advanceSend(conns_[q], !ll);
        advanceRecv(conns_[q]);
      }
    ex_.sync();
    return true;
  }

 private:
  /// Spins until *p >= target; false if the abort flag is raised meanwhile.
  STRATA_HD bool waitAtLeast(const uint64_t* p, uint64_t target) const {
    uint32_t spins = 0;
    while (loadAcquire(p) < target) {
      if ((++spins & 1023u) == 0 && loadVolatile32(w_.abortFlag)) return false;
      ex_.pause(spins);
    }
    return true;
  }

  /// Room for one more step to `c`: the peer has consumed all but kSteps - 1 of ours.
  STRATA_HD bool waitCredit(const PeerConn& c) const {
    const uint64_t s = *c.sendStep;
    return waitAtLeast(c.sendTail, s + 1 > uint64_t(kSteps) ? s + 1 - kSteps : 0);
  }
  /// The next step from `c` has landed (Simple: its head announces it).
  STRATA_HD bool waitData(const PeerConn& c) const { return waitAtLeast(c.recvHead, *c.recvStep + 1); }

  /// Thread 0, after the block's barrier: one more step sent to `c` (and, for Simple, its head
  /// posted), or one more received from `c` (its slot credited back).
  STRATA_HD static void advanceSend(const PeerConn& c, bool postHead) {
    const uint64_t s = *c.sendStep + 1;
    *c.sendStep = s;
    if (postHead) storeRelease(c.sendHeadRemote, s);
  }
  STRATA_HD static void advanceRecv(const PeerConn& c) {
    const uint64_t s = *c.recvStep + 1;
    *c.recvStep = s;
    storeRelease(c.recvTailRemote, s);
  }

  /// Thread 0 waits for room at every send peer (and, for Simple, data from every receive peer).
  STRATA_HD bool waitPeers(Peers recv, Peers send, bool needData) {
    bool ok = true;
    if (ex_.tid() == 0) {
      for (int i = 0; i < send.n && ok; ++i) ok = waitCredit(conns_[send.p[i]]);
      for (int i = 0; i < recv.n && ok && needData; ++i) ok = waitData(conns_[recv.p[i]]);
    }
    return !ex_.syncOr(!ok);
  }

  /// Thread 0 advances the persistent counters (after the block's barrier) and posts them.
  STRATA_HD void post(Peers recv, Peers send, bool postHeads) {
    fenceSystem();
    ex_.sync();
    if (ex_.tid() == 0) {
      for (int i = 0; i < send.n; ++i) advanceSend(conns_[send.p[i]], postHeads);
      for (int i = 0; i < recv.n; ++i) advanceRecv(conns_[recv.p[i]]);
    }
    ex_.sync();
  }

  STRATA_HD STRATA_DEVICE_NOINLINE bool stepSimple(Peers recv, Peers send, const char* src, char* dst, uint64_t n, uint32_t esize,
                            const RedCtx& ctx) {
    if (!waitPeers(recv, send, true)) return false;
    StepIO io;
    RedCtx c = ctx;
    c.scaleSrc0 = ctx.scaleSrc0 && src != nullptr;
    if (src) io.src[io.nsrc++] = src;
    for (int i = 0; i < recv.n; ++i) {
      const PeerConn& pc = conns_[recv.p[i]];
      io.src[io.nsrc++] = pc.recvSimple + (*pc.recvStep % kSteps) * w_.slotBytes;
    }
    if (dst) io.dst[io.ndst++] = dst;
    for (int i = 0; i < send.n; ++i) {
      const PeerConn& pc = conns_[send.p[i]];
      io.dst[io.ndst++] = pc.sendSimple + (*pc.sendStep % kSteps) * w_.slotBytes;
      // A proxied peer's proxy learns the step's size; the head's release (post) publishes it.
      // (The slot's previous step was consumed, so the proxy has read its size already.)
      if (pc.sendSizes && ex_.tid() == 0) pc.sendSizes[*pc.sendStep % kSteps] = n * esize;
    }
    ex_.sync();  // every thread has read the counters before thread 0 advances them
    if (io.nsrc > 0) reduceCopy(ex_.tid(), ex_.nthreads(), io, n, esize, c);
    post(recv, send, true);
    return true;
  }

  STRATA_HD STRATA_DEVICE_NOINLINE bool stepLL(Peers recv, Peers send, const char* src, char* dst, uint64_t n, uint32_t esize,
                        const RedCtx& ctx) {
    if (!waitPeers(recv, send, false)) return false;
    const uint64_t bytes = n * esize, npk = (bytes + 7) / 8;
    uint64_t* rl[kMaxStepPeers] = {};
    uint64_t* sl[kMaxStepPeers] = {};
    uint32_t rf[kMaxStepPeers] = {}, sf[kMaxStepPeers] = {};
    const uint64_t lines = w_.llSlotBytes / 16;
    for (int i = 0; i < recv.n; ++i) {
      const PeerConn& pc = conns_[recv.p[i]];
      rl[i] = pc.recvLL + (*pc.recvStep % kSteps) * lines * 2;
      rf[i] = llFlag(*pc.recvStep);
    }
    for (int i = 0; i < send.n; ++i) {
      const PeerConn& pc = conns_[send.p[i]];
      sl[i] = pc.sendLL + (*pc.sendStep % kSteps) * lines * 2;
      sf[i] = llFlag(*pc.sendStep);
    }
    ex_.sync();
    bool ok = true;
    const bool finalOnly = ctx.divide;
    for (uint64_t k = uint64_t(ex_.tid()); k < npk && ok; k += uint64_t(ex_.nthreads())) {
      const uint64_t valid = bytes - 8 * k < 8 ? bytes - 8 * k : 8;
      uint64_t acc = 0;
      bool have = false;
      if (src) {
        acc = load8(src + 8 * k, valid);
        if (ctx.scaleSrc0) acc = packFirst(acc, ctx);
        have = true;
      }
      for (int i = 0; i < recv.n && ok; ++i) {
        uint64_t v;
        uint32_t spins = 0;
        while (!loadLL(rl[i] + 2 * k, rf[i], &v)) {
          if ((++spins & 1023u) == 0 && loadVolatile32(w_.abortFlag)) {
            ok = false;
            break;
          }
          ex_.pause(spins);
        }
        if (!ok) break;
        acc = have ? packAdd(acc, v, ctx) : v;
        have = true;
      }
      if (!ok) break;
      if (finalOnly) acc = packLast(acc, ctx);
      if (dst) store8(dst + 8 * k, acc, valid);
      for (int i = 0; i < send.n; ++i) storeLL(sl[i] + 2 * k, acc, sf[i]);
    }
    if (ex_.syncOr(!ok)) return false;
    post(recv, send, false);
    return true;
  }

  STRATA_HD static uint64_t load8(const char* p, uint64_t valid) {
    uint64_t v = 0;
    if (valid == 8 && (reinterpret_cast<uintptr_t>(p) & 7u) == 0) return *reinterpret_cast<const uint64_t*>(p);
    memcpy(&v, p, valid);
    return v;
  }
  STRATA_HD static void store8(char* p, uint64_t v, uint64_t valid) {
    if (valid == 8 && (reinterpret_cast<uintptr_t>(p) & 7u) == 0) {
      *reinterpret_cast<uint64_t*>(p) = v;
      return;
    }
    memcpy(p, &v, valid);
  }
  /// load8 from a FIFO slot another GPU may have rewritten since this SM last read it (L2 on the device).
  STRATA_HD static uint64_t loadSlot8(const char* p, uint64_t valid) {
#if defined(__CUDA_ARCH__)
    if (valid == 8 && (reinterpret_cast<uintptr_t>(p) & 7u) == 0)
      return __ldcg(reinterpret_cast<const unsigned long long*>(p));
    uint64_t v = 0;
    for (uint64_t i = 0; i < valid; ++i) v |= uint64_t(loadFresh<unsigned char>(p + i)) << (8 * i);
    return v;
#else
    return load8(p, valid);
#endif
  }

  const Exec& ex_;
  const DevWork& w_;
  const PeerConn* conns_;
  Proto proto_;
};

}  // namespace strata::dev
