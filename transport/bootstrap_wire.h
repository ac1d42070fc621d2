// bootstrap_wire.h: the rendezvous join protocol as it travels: a joining rank's message to the
// root and the root's reply. Shared by the bootstrap and by the tests that play a stranger.
#pragma once

#include <cstdint>
#include <string>

#include "transport/bootstrap.h"

namespace strata::wire {

constexpr uint32_t kJoinMagic = 0x4a4f494e;  // "JOIN"

/// rank -> root.
struct JoinMsg {
  uint32_t magic;
  uint8_t secret[16];
  int32_t rank;
  int32_t nranks;
  RankInfo info;
};

/// root -> rank; `msgLen` bytes of error text follow a failure.
struct JoinReply {
  int32_t status;  // strataResult_t
  int32_t nranks;
  uint32_t msgLen;
  uint64_t roundTag;  // fresh per rendezvous round: names this communicator's resources
};

constexpr uint32_t kHelloMagic = 0x48454c4f;  // "HELO"

/// rank -> rank: the first bytes of every connection made to a rank's listener.
struct Hello {
  uint32_t magic;
  uint32_t kind;  // Bootstrap::Kind
  uint8_t secret[16];
  uint64_t commTag;
  int32_t rank;
  int32_t index;
};
static_assert(sizeof(Hello) <= 64);

// The checks of what arrives, apart from the socket handling (and fuzzed on their own,
// tests/fuzz/fuzz_bootstrap_wire.cc).

/// Why the root refuses a join message that proved the secret, "" when it takes it: `roundNranks`
/// is the current round's rank count (-1: this join opens the round), `expectNranks` the job's (0:
/// any). Whether the rank is already taken is the round's to check.
std::string joinRefusal(const JoinMsg& m, int expectNranks, int roundNranks);
/// Why a listener drops a complete hello (nullptr: it names a connection of this communicator).
const char* helloProblem(const Hello& h, const uint8_t secret[16], uint64_t commTag, int nranks);
/// The error of a failed join reply (r.status is not strataSuccess) with the root's text `msg`.
Status joinReplyError(const JoinReply& r, const std::string& msg);

}  // namespace strata::wire
