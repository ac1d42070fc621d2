// soak_plan.h: strata-soak's operation plan. From one seed every rank draws the same sequence of
// steps (a step: one call, or a group of calls on one or several communicators), the same split
// communicators and their re-creation, so ranks agree on what to run without talking. Nothing here
// depends on the rank that draws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "strata/strata.h"

namespace strata::soak {

/// What one item of a step runs. The first eight are the collectives of the C API; then the
/// point-to-point patterns and the barrier.
enum class Kind : uint8_t {
  AllReduce,
  ReduceScatter,
  AllGather,
  Broadcast,
  Reduce,
  AllToAll,
  Gather,
  Scatter,
  Shift,      ///< grouped send to r+d and receive from r-d (in place: one buffer)
  AllToAllV,  ///< grouped send/recv with every peer (itself included), per-pair counts, some 0
  Pair,       ///< one sender, one receiver (plain strataSend / strataRecv outside a group)
  Barrier,
  kCount
};
constexpr int kKinds = static_cast<int>(Kind::kCount);
const char* kindName(Kind k);
bool isReduction(Kind k);
bool isRooted(Kind k);
/// Kinds whose buffers hold count elements per rank (n x count in all).
bool perRankCount(Kind k);

/// Reduction op of an item: a strataRedOp_t, or kPreMulSum (as in tests/support/coll_checks.h:
/// a pre-multiplied sum with scalar 2).
constexpr int kPreMulSum = -1;
const char* opName(int op);

/// Deterministic generator (xoshiro256**, seeded by splitmix64): identical on every rank.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next();
  uint64_t below(uint64_t n);  ///< uniform in [0, n); 0 when n == 0
  bool chance(unsigned percent) { return below(100) < percent; }

 private:
  uint64_t s_[4];
};

/// A family of communicators made by one strataCommSplit (slot 0: the world). Every rank knows
/// every family's groups, so each knows each communicator's size and its members' order.
struct CommSpec {
  int parent = -1;                      ///< slot split from; -1 for the world
  std::vector<int> color, key;          ///< per world rank (colour -1: NOCOLOR, or not in the parent)
  std::vector<std::vector<int>> groups; ///< each communicator's world ranks in comm-rank order
  std::vector<int> groupOf, rankIn;     ///< per world rank: its group (-1: none) and rank in it
  int maxSize = 0;                      ///< largest group
  int generation = 0;                   ///< times the slot was re-created
};

/// One call (or point-to-point pattern) on the communicators of one slot: each group of the slot
/// runs it with the same parameters; roots and peers are drawn values reduced modulo its size.
struct Item {
  int slot = 0;
  Kind kind = Kind::AllReduce;
  strataDataType_t dtype = strataFloat32;
  int op = strataSum;
  size_t count = 0;         ///< the count argument (per peer or rank for perRankCount kinds;
                            ///< Shift, Pair: elements sent; AllToAllV: the bound of a pair's count)
  uint32_t rootDraw = 0, peerDraw = 0;
  bool inPlace = false;
  bool nullUnused = false;  ///< NULL for buffers a rank does not use (else a guarded buffer that must stay untouched)
  uint8_t arena = 0;        ///< 0: heap memory, 1: strataHostMemAlloc memory
  uint8_t misalign = 0;     ///< buffers start this many elements past an aligned address
  uint64_t salt = 0;        ///< shifts the element values, so consecutive operations differ
};

struct Step {
  uint64_t index = 0;
  int resplit = 0;          ///< > 0: re-create this slot (destroy, split its parent) before the items
  bool grouped = false;     ///< the items run between strataGroupStart / strataGroupEnd
  bool nested = false;      ///< ... inside a second, nested group
  std::vector<Item> items;
};

struct PlanOptions {
  size_t maxBytes = size_t{1} << 20;  ///< largest buffer of one call, per rank
  int slots = 4;                      ///< slot 0 (world) + this many - 1 split families
  int maxGroupItems = 4;
  unsigned resplitPerMille = 4;       ///< chance per step that a split family is re-created
};

class Planner {
 public:
  Planner(uint64_t seed, int worldSize, const PlanOptions& opt);
  /// The world and the initial split families, in slot order (slot s splits a slot < s).
  std::vector<CommSpec> initialSpecs();
  /// The next step. A step that re-splits a slot replaces its spec in `specs` before its items
  /// are drawn (the caller re-creates the communicator first).
  Step next(std::vector<CommSpec>& specs);

 private:
  CommSpec drawSplit(int slot, const std::vector<CommSpec>& specs);
  Item drawItem(const std::vector<CommSpec>& specs);
  size_t drawCount(size_t maxElems);
  Rng rng_;
  int world_;
  PlanOptions opt_;
  uint64_t steps_ = 0;
};

/// Whether reduceInput / reduceExpect (tests/support/coll_checks.h) are exact for `op` on `dtype`
/// over `n` ranks: always for n <= 8; beyond, only 32- and 64-bit types (products while they fit).
bool exactReduction(int op, strataDataType_t dtype, int n);

}  // namespace strata::soak
