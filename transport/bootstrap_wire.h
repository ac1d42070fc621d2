// bootstrap_wire.h: the rendezvous join protocol as it travels: a joining rank's message to the
// root and the root's reply. Shared by the bootstrap and by the tests that play a stranger.
#pragma once

#include <cstdint>

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

}  // namespace strata::wire
