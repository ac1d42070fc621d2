// ucx_wire.h: what the UCX transport puts on the wire. The oob-socket frames (the hello that carries
// every rail's worker address, and the failure notice), the message head that starts every
// transfer, and the 64-bit tag layout: [sender rank: 20 bits][per-direction sequence: 44 bits],
// matched with a full mask, so each receive matches exactly one send of one peer, in posting order
// (FIFO) whatever order UCX delivers in. Each transfer is one head message (sequence s) followed,
// when larger than the inline limit, by its chunks (s+1 ..); both sides derive the same sequence
// numbers from the sizes. Heads travel on rail 0; chunk c of the direction's chunk count (counted
// over all transfers in posting order, both sides alike) travels on rail c % rails (railOfChunk).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "transport/call_tag.h"

namespace strata::ucx {

constexpr uint32_t kHelloMagic = 0x58435553;  // "SUCX"
constexpr uint32_t kFailMagic = 0x4641494c;   // "FAIL": the peer failed; payload is its reason
constexpr uint32_t kHeadMagic = 0x44414548;   // "HEAD"
constexpr uint32_t kWireVersion = 3;
/// At most this many rails per connection (one UCX context and worker each; see ucx_context.h).
constexpr int kMaxRails = 4;

/// Sent by both sides over the oob socket, followed by `rails` HelloRail records and then the
/// rails' worker addresses, back to back in rail order.
struct Hello {
  uint32_t magic;
  uint32_t version;
  uint32_t rank;
  uint32_t rails;        ///< worker addresses that follow (1..kMaxRails)
  uint32_t railsWanted;  ///< the `rails` argument of connect (rails both ranks share)
  uint32_t pad;
  uint64_t chunkBytes;   ///< both sides must cut messages alike
  uint64_t inlineBytes;
};

/// One rail of a hello: its worker address length and its interface's IPv4 subnet (network order;
/// 0/0 when unknown), by which the two sides pair their rails (pairRails).
struct HelloRail {
  uint32_t addrBytes;
  uint32_t net;
  uint32_t mask;
  uint32_t pad;
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
  CallTag call;  ///< the sender's call (transport/call_tag.h)
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

/// The rail of chunk number `chunk` (counted per direction over all transfers) on `rails` rails.
constexpr int railOfChunk(uint64_t chunk, int rails) { return static_cast<int>(chunk % static_cast<uint64_t>(rails)); }

/// Chunks after the head of a message of `bytes`: none when it travels inline with the head.
constexpr uint64_t chunksAfterHead(size_t bytes, size_t inlineBytes, size_t chunkBytes) {
  return bytes <= inlineBytes ? 0 : (bytes + chunkBytes - 1) / chunkBytes;
}

/// A rail's IPv4 subnet as the hello carries it (0/0: unknown, e.g. a device the user named).
struct RailSubnet {
  uint32_t net = 0, mask = 0;
  bool operator==(const RailSubnet&) const = default;
};

/// Pairs the rails of the lower rank (`low`) with the higher rank's (`high`): each low rail, in
/// order, takes the first unpaired high rail of the same subnet (unknown pairs with unknown, so
/// rails without subnets pair by index). When no rail pairs (routed rails in different subnets),
/// rails pair by index. Both sides compute it from the two hellos, so they agree; the connection
/// uses the first min(pairs, both `rails` arguments) pairs. Returns (low index, high index).
inline std::vector<std::pair<int, int>> pairRails(const std::vector<RailSubnet>& low,
                                                  const std::vector<RailSubnet>& high) {
  std::vector<std::pair<int, int>> pairs;
  std::vector<bool> taken(high.size(), false);
  for (size_t i = 0; i < low.size(); ++i)
    for (size_t j = 0; j < high.size(); ++j)
      if (!taken[j] && low[i] == high[j]) {
        taken[j] = true;
        pairs.emplace_back(static_cast<int>(i), static_cast<int>(j));
        break;
      }
  if (pairs.empty())
    for (size_t i = 0; i < low.size() && i < high.size(); ++i)
      pairs.emplace_back(static_cast<int>(i), static_cast<int>(i));
  return pairs;
}

}  // namespace strata::ucx
