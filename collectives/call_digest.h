// call_digest.h: the tag (transport/call_tag.h) of a collective call, computed alike on every rank
// that makes the same call: fields that do not apply are left out (the op of a collective that does
// not reduce, the root of one without a root), and user-created ops are one op (each rank may
// scale by its own factor).
#pragma once

#include "collectives/task.h"
#include "transport/call_tag.h"

namespace strata {

inline CallTag collCallTag(const CollCall& c, uint64_t seq) {
  const bool rooted = c.coll == CollType::Broadcast || c.coll == CollType::Reduce || c.coll == CollType::Gather ||
                      c.coll == CollType::Scatter;
  const uint32_t op = !isReduction(c.coll)        ? kCallOpNone
                      : c.op >= strataNumOps      ? kCallOpPreMulSum
                                                  : static_cast<uint32_t>(c.op);
  return makeCallTag(seq, static_cast<uint32_t>(c.coll) + 1, c.count, static_cast<uint32_t>(c.dtype), op,
                     rooted ? static_cast<uint32_t>(c.root) : kCallNoRoot);
}

static_assert(static_cast<uint32_t>(CollType::AllReduce) + 1 == kCallAllReduce &&
                  static_cast<uint32_t>(CollType::ReduceScatter) + 1 == kCallReduceScatter &&
                  static_cast<uint32_t>(CollType::AllGather) + 1 == kCallAllGather &&
                  static_cast<uint32_t>(CollType::Broadcast) + 1 == kCallBroadcast &&
                  static_cast<uint32_t>(CollType::Reduce) + 1 == kCallReduce &&
                  static_cast<uint32_t>(CollType::AllToAll) + 1 == kCallAllToAll &&
                  static_cast<uint32_t>(CollType::Gather) + 1 == kCallGather &&
                  static_cast<uint32_t>(CollType::Scatter) + 1 == kCallScatter,
              "call codes follow CollType");

}  // namespace strata
