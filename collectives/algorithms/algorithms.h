// algorithms.h: internal to collectives/algorithms: the per-family schedule builders and the small
// helpers they share. registry.cc dispatches buildSchedule() to these; nothing else includes this.
//
// Conventions of every builder: `s` is already cleared; the builder appends steps (ops of count 0
// are dropped by Schedule::add, so empty segments need no special case) and sets s->scratchElems;
// registry.cc calls Schedule::compact() afterwards. n = nranks, r = rank, C = count.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/schedule.h"

namespace strata::algo {

/// Split `count` elements into `parts` near-equal segments: the first count % parts segments hold
/// one element more. Segments may be empty when count < parts.
inline size_t segLen(size_t count, int parts, int i) {
  const size_t p = static_cast<size_t>(parts);
  return count / p + (static_cast<size_t>(i) < count % p ? 1 : 0);
}
inline size_t segOff(size_t count, int parts, int i) {
  const size_t p = static_cast<size_t>(parts), ui = static_cast<size_t>(i);
  return ui * (count / p) + (ui < count % p ? ui : count % p);
}
inline int mod(int a, int n) { return ((a % n) + n) % n; }
/// Largest power of two <= n (n >= 1).
inline int floorPow2(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}
/// Smallest power of two >= n (n >= 1).
inline int ceilPow2(int n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

/// The order the ring all-reduce, broadcast and reduce follow: rank order, or, when the layout's
/// nodes are not node-major (e.g. ranks dealt round-robin over nodes), the ranks node by node, so
/// that the ring crosses each node boundary once instead of at every step. (Ring reduce-scatter and
/// all-gather keep rank order: rank r's block ends at rank r.)
class RingOrder {
 public:
  explicit RingOrder(const CollArgs& a);
  int position(int rank) const { return pos_.empty() ? rank : pos_[static_cast<size_t>(rank)]; }
  int rankAt(int position) const { return ord_.empty() ? position : ord_[static_cast<size_t>(position)]; }

 private:
  std::vector<int> ord_, pos_;  ///< empty: identity
};

/// Pipeline chunks of the ring broadcast/reduce chain: ceil(count / kRingMinChunkElems), at most
/// kRingMaxChunksPerRank * n and at most count (chunks are never empty).
constexpr size_t kRingMinChunkElems = 256;
constexpr int kRingMaxChunksPerRank = 4;
int ringPipelineChunks(int n, size_t count);

/// Reduces n contributions of `len` elements into dst as a balanced binary tree over the
/// contributions in rank order: level 1 forms (x0+x1), (x2+x3), ...; level 2 ((x0+x1)+(x2+x3)), ...
/// One step per level (ceil(log2 n) steps), the same association on every rank and for every
/// algorithm that uses it (OneShot and Direct therefore give bitwise identical sums).
/// `loc[k]` is where contribution k lives; partial sums are written to `slot(k)` =
/// Scratch[slotBase + k * slotStride] (slots must be free to overwrite; a slot may equal loc[k]).
void reduceTree(Schedule* s, const std::vector<Slice>& loc, size_t len, size_t slotBase,
                size_t slotStride, Slice dst);

// One builder per (family, collective); see each file's header comment.
void ringAllReduce(const CollArgs& a, Schedule* s);
void ringReduceScatter(const CollArgs& a, Schedule* s);
void ringAllGather(const CollArgs& a, Schedule* s);
void ringBroadcast(const CollArgs& a, Schedule* s);
void ringReduce(const CollArgs& a, Schedule* s);

void rhdAllReduce(const CollArgs& a, Schedule* s);
void rhdReduceScatter(const CollArgs& a, Schedule* s);
void rhdAllGather(const CollArgs& a, Schedule* s);

void treeBroadcast(const CollArgs& a, Schedule* s);
void treeReduce(const CollArgs& a, Schedule* s);
void treeAllReduce(const CollArgs& a, Schedule* s);
void treeGather(const CollArgs& a, Schedule* s);
void treeScatter(const CollArgs& a, Schedule* s);

void directAllReduce(const CollArgs& a, Schedule* s);
void directReduceScatter(const CollArgs& a, Schedule* s);
void directAllGather(const CollArgs& a, Schedule* s);

void oneshotAllReduce(const CollArgs& a, Schedule* s);
void oneshotReduce(const CollArgs& a, Schedule* s);
void oneshotBroadcast(const CollArgs& a, Schedule* s);

void pairwiseAllToAll(const CollArgs& a, Schedule* s);

void bruckAllToAll(const CollArgs& a, Schedule* s);

void linearBroadcast(const CollArgs& a, Schedule* s);
void linearReduce(const CollArgs& a, Schedule* s);
void linearGather(const CollArgs& a, Schedule* s);
void linearScatter(const CollArgs& a, Schedule* s);
void linearAllToAll(const CollArgs& a, Schedule* s);

void hierAllReduce(const CollArgs& a, Schedule* s);
void hierReduceScatter(const CollArgs& a, Schedule* s);
void hierAllGather(const CollArgs& a, Schedule* s);
void hierBroadcast(const CollArgs& a, Schedule* s);
void hierReduce(const CollArgs& a, Schedule* s);
void hierAllToAll(const CollArgs& a, Schedule* s);

/// Composition: appends `sub`, the schedule of one member of a sub-group, to `s` as new steps.
/// The sub-group's rank p is the parent's members[p]; the sub-schedule's Input, Output and
/// Scratch slices become `input`, `output` and `scratch` (each plus the slice's offset). The
/// caller sizes s->scratchElems to cover scratch.offset + sub.scratchElems.
struct SubBuffers {
  Slice input, output, scratch;
};
void appendSub(Schedule* s, const Schedule& sub, const std::vector<int>& members, const SubBuffers& b);
/// Builds the schedule of `subRank` in a sub-group of `members.size()` ranks running `algo` on
/// `coll` and appends it with appendSub (scratch grows to fit).
void appendSubCollective(Schedule* s, Algo algo, CollType coll, const std::vector<int>& members, int subRank,
                         int subRoot, size_t count, const SubBuffers& b);

}  // namespace strata::algo
