// dev_work.h: what one rank's collective kernel needs, as plain data shared by the host planner,
// the CUDA kernels and the host emulation of those kernels: the connection table (one PeerConn per
// channel and peer, pointing into this rank's and its peers' FIFO arenas) and the work descriptor
// passed by value as the kernel parameter.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::dev {

constexpr int kMaxChannels = 32;
constexpr int kMaxThreads = 512;  ///< per block: 128 registers per thread, no spills (1024 forced spills)
constexpr int kSteps = 8;          ///< FIFO slots per connection: a sender runs at most this far ahead
constexpr int kMaxP2POps = 512;    ///< send/recv/copy entries in one launch (parameters < 32 KiB: CUDA >= 12.1, sm_70+)
constexpr uint32_t kErrAborted = 1;  ///< errorFlag value: a wait saw the abort flag

enum class Proto : uint8_t { LL, Simple };
/// RankTree: deterministic mode's reductions (dev_algos.h), the rank-order tree of rank_tree.h.
enum class Algo : uint8_t { Ring, Tree, RankTree };
enum class Coll : uint8_t { AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, P2P };

/// One rank's view of one directed pair of connections with one peer on one channel.
/// Receiving: the slots live in this rank's arena; the peer writes them and `recvHead`; this rank
/// returns credits by writing the peer's `sendTail` through `recvTailRemote`.
/// Sending: the mirror image. Step counters persist across kernels in this rank's arena, so
/// launches (and CUDA graph replays) continue where the previous one stopped.
/// A peer on another node (collectives/device_proxy.h) has no mapped arena: every pointer but the
/// step counters then points into this rank's proxy shadows (GPU-visible host memory), the LL
/// pointers are null (Simple only), and `sendSizes` tells the proxy how many bytes each step holds.
struct PeerConn {
  char* recvSimple = nullptr;        ///< kSteps * slotBytes, written by the peer
  uint64_t* recvLL = nullptr;        ///< kSteps * llSlotBytes of 16-byte lines, written by the peer
  uint64_t* recvHead = nullptr;      ///< the peer's send count (Simple data ready), local
  uint64_t* recvTailRemote = nullptr;  ///< the peer's sendTail: our consumed count
  uint64_t* recvStep = nullptr;      ///< local persistent receive counter
  char* sendSimple = nullptr;        ///< the peer's recvSimple for us
  uint64_t* sendLL = nullptr;        ///< the peer's recvLL for us
  uint64_t* sendHeadRemote = nullptr;  ///< the peer's recvHead for us
  uint64_t* sendTail = nullptr;      ///< the peer's consumed count, local
  uint64_t* sendStep = nullptr;      ///< local persistent send counter
  uint64_t* sendSizes = nullptr;     ///< proxied peers only: bytes of step s at [s % kSteps], set before the head
};

enum class OpKind : uint8_t { Send, Recv, Copy };
/// One entry of a send/recv launch: Send reads `src`, Recv writes `dst`, Copy copies src -> dst.
/// The protocol is chosen per entry from its size, so that both ends of a connection agree
/// whatever else their launches hold.
struct P2POp {
  const char* src;
  char* dst;
  uint64_t bytes;
  int32_t peer;
  OpKind kind;
  Proto proto;
};

struct DevWork {
  const PeerConn* conns = nullptr;  ///< [nch][nranks], this rank's row per channel
  const volatile uint32_t* abortFlag = nullptr;  ///< set by the host: every wait gives up
  uint32_t* errorFlag = nullptr;    ///< set by the kernel when it gave up
  uint64_t slotBytes = 0, llSlotBytes = 0;
  int32_t rank = 0, nranks = 1, nch = 1;
  Coll coll = Coll::AllReduce;
  Algo algo = Algo::Ring;
  Proto proto = Proto::Simple;  ///< collectives (send/recv entries carry their own)
  uint8_t dtype = 0;       ///< strataDataType_t
  uint8_t op = 0;          ///< kernels::RedKind
  bool scale = false;      ///< pre-multiplied sum: inputs times `scalar` first
  bool divide = false;     ///< avg: results divided by nranks
  uint64_t scalar = 0;     ///< the scalar's bits in `dtype`
  int32_t root = 0;
  const char* in = nullptr;
  char* out = nullptr;
  uint64_t count = 0;      ///< elements: per rank block (reduce-scatter, all-gather) or total
  int32_t nops = 0;
  P2POp ops[kMaxP2POps];
};

/// Where each part of a rank's FIFO arena lives. Every rank's arena has the same layout: per
/// channel and per other rank a control block (counters on their own 128-byte lines), the Simple
/// slots and the LL slots.
struct ArenaLayout {
  int nranks = 1, nch = 1;
  uint64_t slotBytes = 0, llSlotBytes = 0;

  static constexpr uint64_t kCtrlBytes = 512;
  enum CtrlWord { kHead = 0, kTail = 16, kSendStep = 32, kRecvStep = 48 };  ///< in uint64_t units

  /// Index of `other`'s entry in `owner`'s arena (0 .. nranks-2).
  uint64_t entry(int c, int owner, int other) const {
    return uint64_t(c) * uint64_t(nranks - 1) + uint64_t((other - owner - 1 + nranks) % nranks);
  }
  uint64_t entries() const { return uint64_t(nch) * uint64_t(nranks > 1 ? nranks - 1 : 0); }
  uint64_t ctrlOffset(uint64_t e) const { return e * kCtrlBytes; }
  uint64_t simpleOffset(uint64_t e) const { return entries() * kCtrlBytes + e * kSteps * slotBytes; }
  uint64_t llOffset(uint64_t e) const {
    return entries() * (kCtrlBytes + kSteps * slotBytes) + e * kSteps * llSlotBytes;
  }
  uint64_t totalBytes() const { return entries() * (kCtrlBytes + kSteps * (slotBytes + llSlotBytes)); }

  /// Fills conns[c * nranks + p] for `rank`, given every rank's arena as this rank addresses it
  /// (its own pointer, a peer-mapped pointer, or a CUDA IPC mapping). Entries for p == rank stay
  /// empty; for a peer whose arena is null (on another node) only the local step counters are
  /// set, and the network proxy fills the rest.
  void buildConns(int rank, char* const* arenas, PeerConn* conns) const {
    for (int c = 0; c < nch; ++c)
      for (int p = 0; p < nranks; ++p) {
        PeerConn& pc = conns[c * nranks + p];
        pc = PeerConn{};
        if (p == rank) continue;
        const uint64_t mine = entry(c, rank, p), theirs = entry(c, p, rank);
        auto ctrl = [&](char* base, uint64_t e, int word) {
          return reinterpret_cast<uint64_t*>(base + ctrlOffset(e)) + word;
        };
        pc.recvStep = ctrl(arenas[rank], mine, kRecvStep);
        pc.sendStep = ctrl(arenas[rank], mine, kSendStep);
        if (!arenas[p]) continue;
        pc.recvSimple = arenas[rank] + simpleOffset(mine);
        pc.recvLL = reinterpret_cast<uint64_t*>(arenas[rank] + llOffset(mine));
        pc.recvHead = ctrl(arenas[rank], mine, kHead);
        pc.recvTailRemote = ctrl(arenas[p], theirs, kTail);
        pc.sendSimple = arenas[p] + simpleOffset(theirs);
        pc.sendLL = reinterpret_cast<uint64_t*>(arenas[p] + llOffset(theirs));
        pc.sendHeadRemote = ctrl(arenas[p], theirs, kHead);
        pc.sendTail = ctrl(arenas[rank], mine, kTail);
      }
  }
};

}  // namespace strata::dev
