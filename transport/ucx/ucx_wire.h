// ucx_wire.h: what the UCX transport puts on the wire. The oob-socket frames (the hello that carries
// the worker address, and the failure notice), the message head that starts every transfer, and the
// 64-bit tag layout: [sender rank: 20 bits][per-direction sequence: 44 bits], matched with a full
// mask, so each receive matches exactly one send of one peer, in posting order (FIFO) whatever order
// UCX delivers in. Each transfer is one head message (sequence s) followed, when larger than the
// inline limit, by its chunks (s+1 ..); both sides derive the same sequence numbers from the sizes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::ucx {

constexpr uint32_t kHelloMagic = 0x58435553;  // "SUCX"
constexpr uint32_t kFailMagic = 0x4641494c;   // "FAIL": the peer failed; payload is its reason
constexpr uint32_t kHeadMagic = 0x44414548;   // "HEAD"
constexpr uint32_t kWireVersion = 1;

/// Sent by both sides over the oob socket, followed by `addrBytes` of UCX worker address.
struct Hello {
  uint32_t magic;
  uint32_t version;
  uint32_t rank;
  uint32_t addrBytes;
  uint64_t chunkBytes;   ///< both sides must cut messages alike
  uint64_t inlineBytes;
};

/// After the hello, the only thing either side may write on the oob socket: why it failed.
struct FailFrame {
  uint32_t magic;
  uint32_t reasonBytes;
};

/// Starts every transfer; small transfers carry their payload right after it.
struct Head {
  uint32_t magic;
  uint32_t pad;
  uint64_t msgBytes;
};

constexpr int kTagRankBits = 20;
constexpr int kTagSeqBits = 64 - kTagRankBits;
constexpr uint64_t kTagSeqMask = (uint64_t{1} << kTagSeqBits) - 1;
constexpr int kMaxRanks = 1 << kTagRankBits;
constexpr uint64_t kTagFullMask = ~uint64_t{0};

/// The tag of message `seq` sent by `senderRank` (sequences wrap after 2^44 messages).
constexpr uint64_t makeTag(int senderRank, uint64_t seq) {
  return (static_cast<uint64_t>(senderRank) << kTagSeqBits) | (seq & kTagSeqMask);
}

/// Chunks after the head of a message of `bytes`: none when it travels inline with the head.
constexpr uint64_t chunksAfterHead(size_t bytes, size_t inlineBytes, size_t chunkBytes) {
  return bytes <= inlineBytes ? 0 : (bytes + chunkBytes - 1) / chunkBytes;
}

}  // namespace strata::ucx
