// ib_protocol.h: the verbs-free parts of the ibverbs transport's wire protocol, testable alone:
// the slot header, the encodings of immediates and work-request ids, the slot/credit bookkeeping
// of both sides, the striping of single-copy reads, and the choice of a GID.
//
// Protocol. Each side owns a FIFO of `slots` registered slots that the peer RDMA-writes (write
// with immediate: the immediate names the slot, the slot's header the sequence number and message
// size). Chunk `seq` goes to slot seq % slots over queue pair seq % qps; the receiver consumes
// slots in sequence order (queue pairs may deliver out of order among themselves) and returns
// credits with a send-with-immediate once slots are consumed. A message of at least the
// single-copy size travels as one RTS slot naming the sender's registered buffer (address and one
// rkey per rail); the receiver RDMA-reads it straight into the destination (a reduction reads
// into a registered scratch ring and reduces from there), then sends FIN naming the rendezvous.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "transport/call_tag.h"

namespace strata::ib {

constexpr int kMaxRails = 4;
constexpr int kMaxQps = 64;

/// The first 64 bytes of every slot.
struct SlotHeader {
  enum Type : uint32_t { Data = 1, Rts = 2 };
  uint64_t seq;
  uint64_t msgBytes;
  CallTag call;         ///< the sender's call (transport/call_tag.h)
  uint32_t chunkBytes;  ///< Data: payload bytes in this slot
  uint32_t type : 4;
  uint32_t rndvId : 28; ///< Rts: names the rendezvous in FIN (as the FIN immediate's 28-bit value)
  uint64_t addr;        ///< Rts: the sender's buffer
  uint32_t rkey[kMaxRails];  ///< Rts: the buffer's rkey on each rail
};
static_assert(sizeof(SlotHeader) == 64);
constexpr size_t kSlotHeaderBytes = 64;

/// 32-bit immediates: 4 bits of kind, 28 of value.
enum class ImmKind : uint32_t { Slot = 1, Credit = 2, Fin = 3 };
inline uint32_t makeImm(ImmKind k, uint32_t value) {
  return (static_cast<uint32_t>(k) << 28) | (value & 0x0fffffffu);
}
inline ImmKind immKind(uint32_t imm) { return static_cast<ImmKind>(imm >> 28); }
inline uint32_t immValue(uint32_t imm) { return imm & 0x0fffffffu; }

/// 64-bit work-request ids: 8 bits of kind, 8 of queue-pair index, 48 of value.
enum class WrKind : uint64_t { Recv = 1, SlotWrite = 2, Ctrl = 3, Read = 4 };
inline uint64_t makeWrId(WrKind k, unsigned qp, uint64_t value) {
  return (static_cast<uint64_t>(k) << 56) | (static_cast<uint64_t>(qp & 0xff) << 48) |
         (value & 0xffffffffffffull);
}
inline WrKind wrKind(uint64_t id) { return static_cast<WrKind>(id >> 56); }
inline unsigned wrQp(uint64_t id) { return static_cast<unsigned>((id >> 48) & 0xff); }
inline uint64_t wrValue(uint64_t id) { return id & 0xffffffffffffull; }

/// Sender side of the slot FIFO: which sequence numbers may be written now.
class SlotCredits {
 public:
  explicit SlotCredits(uint32_t slots) : slots_(slots) {}
  uint32_t slots() const { return slots_; }
  bool canSend() const { return next_ < returned_ + slots_; }
  /// Takes the next sequence number (canSend() must hold).
  uint64_t take() { return next_++; }
  /// The receiver consumed `n` more slots.
  void addCredits(uint64_t n) { returned_ += n; }
  uint64_t next() const { return next_; }
  uint64_t inFlight() const { return next_ - returned_; }
  uint32_t slotOf(uint64_t seq) const { return static_cast<uint32_t>(seq % slots_); }

 private:
  uint32_t slots_;
  uint64_t next_ = 0, returned_ = 0;
};

/// Receiver side: slots arrive in any order; they are consumed in sequence order and their
/// credits handed back in batches.
class SlotArrivals {
 public:
  explicit SlotArrivals(uint32_t slots) : arrived_(slots, 0) {}
  /// A write landed in `slot`. False if that slot already held an unconsumed chunk (a protocol
  /// violation: the sender overran its credits).
  bool arrive(uint32_t slot);
  /// The slot of the next sequence number, if it arrived.
  bool headReady() const { return arrived_[next_ % arrived_.size()] != 0; }
  uint64_t headSeq() const { return next_; }
  uint32_t headSlot() const { return static_cast<uint32_t>(next_ % arrived_.size()); }
  /// The head slot was consumed; its credit is owed to the sender.
  void consume();
  uint64_t owed() const { return owed_; }
  /// Hands the owed credits out (to send them).
  uint64_t takeOwed() {
    uint64_t n = owed_;
    owed_ = 0;
    return n;
  }

 private:
  std::vector<uint8_t> arrived_;
  uint64_t next_ = 0, owed_ = 0;
};

/// A single-copy message cut into read chunks, striped over the queue pairs.
struct ReadPlan {
  size_t bytes = 0, chunk = 0;
  unsigned qps = 1;
  uint64_t chunks() const { return bytes == 0 ? 0 : (bytes + chunk - 1) / chunk; }
  size_t offsetOf(uint64_t c) const { return c * chunk; }
  size_t lengthOf(uint64_t c) const { return bytes - c * chunk < chunk ? bytes - c * chunk : chunk; }
  unsigned qpOf(uint64_t c) const { return static_cast<unsigned>(c % qps); }
};

/// One GID table entry as the device reports it.
struct GidEntry {
  int index;
  uint8_t raw[16];
  int type;  ///< IBV_GID_TYPE_*, or -1 when unknown
};
/// The GID to use on a port: `forced` >= 0 wins; on Ethernet (RoCE) a RoCE v2 IPv4-mapped GID
/// (::ffff:a.b.c.d), then any RoCE v2 non-link-local one, then any RoCE v2, then any non-zero
/// (RoCE v1); on InfiniBand index 0. Returns -1 when none is usable.
int chooseGid(const std::vector<GidEntry>& table, bool ethernet, int forced);

}  // namespace strata::ib
