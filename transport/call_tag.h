// call_tag.h: the 16 bytes every message of a collective carries so that the receiver can tell
// whether the sender is in the same call: the collective's sequence number on its communicator and
// its shape (collective, count, dtype, op, root), packed exactly, so that a mismatch names both
// calls. Transports copy the tag of the posted Transfer into their frame header and compare the
// arriving tag with the posted receive's before anything else (transport/connection.h).
// Point-to-point messages carry the zero tag.
#pragma once

#include <cstdint>
#include <string>

#include "transport/status.h"

namespace strata {

/// word = [sequence: 28 bits][collective: 4][dtype: 6][op: 4][root: 22]; count in full.
struct CallTag {
  uint64_t word = 0;
  uint64_t count = 0;
  bool operator==(const CallTag& o) const { return word == o.word && count == o.count; }
  bool operator!=(const CallTag& o) const { return !(*this == o); }
};
static_assert(sizeof(CallTag) == 16);

/// Collective codes in the tag: 0 is point-to-point, then the collectives in CollType order.
enum CallCode : uint32_t {
  kCallSendRecv = 0,
  kCallAllReduce,
  kCallReduceScatter,
  kCallAllGather,
  kCallBroadcast,
  kCallReduce,
  kCallAllToAll,
  kCallGather,
  kCallScatter,
  kCallCodes
};
/// Op field: built-in ops by value (strataSum..strataAvg), user-created ops as one code (each
/// rank may scale by its own factor), none for collectives that do not reduce.
constexpr uint32_t kCallOpPreMulSum = 5;
constexpr uint32_t kCallOpNone = 15;
/// Root field for collectives without a root.
constexpr uint32_t kCallNoRoot = (1u << 22) - 1;
constexpr int kCallSeqBits = 28;

/// The tag of collective number `seq` (counted per communicator from 1; kept modulo 2^28).
CallTag makeCallTag(uint64_t seq, uint32_t code, uint64_t count, uint32_t dtype, uint32_t op, uint32_t root);

struct CallFields {
  uint64_t seq;  ///< modulo 2^28
  uint32_t code, dtype, op, root;
  uint64_t count;
};
CallFields decodeCallTag(const CallTag& t);

/// "all_reduce", "all_gather", ..., "send/recv".
const char* callCodeName(uint32_t code);
/// "sum", "prod", "max", "min", "avg", "premulsum", or nullptr for kCallOpNone.
const char* callOpName(uint32_t op);
/// "all_reduce #12 (count 1024 fp32 sum)", "broadcast #3 (count 10 fp32 root 2)", "send/recv".
std::string describeCall(const CallTag& t);
/// The same from parts (the hang report's dumps): an empty op and a negative root are left out.
std::string formatCall(const std::string& coll, uint64_t seq, uint64_t count, const std::string& dtype,
                       const std::string& op, long root);

/// The error for a message of call `sent` from `sender` arriving where `receiver` posted a receive
/// of call `expected`: names both ranks and both calls, lower rank first.
Status callMismatch(int sender, const CallTag& sent, int receiver, const CallTag& expected);
/// True for a status made by callMismatch.
bool isCallMismatch(const Status& st);

}  // namespace strata
