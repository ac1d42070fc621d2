// schedule.h: a collective algorithm's output, one rank's list of steps over symbolic buffer slices.
//
// An algorithm is a pure function (collective, nranks, rank, count, root) -> Schedule. Steps run in
// order; the ops inside one step run concurrently (their sends and receives progress together), so
// no op in a step may read what another op of the same step writes. The host executor resolves
// slices to pointers and runs the steps over transport connections; the symbolic simulator
// (simulator.h) runs every rank's schedule in one process and proves the result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace strata {
namespace topology {
class CommLayout;
}

/// The collectives that have schedules (send/recv are not collectives: the executor builds their
/// ops directly).
enum class CollType : uint8_t {
  AllReduce,
  ReduceScatter,
  AllGather,
  Broadcast,
  Reduce,
  AllToAll,
  Gather,
  Scatter,
};
const char* collName(CollType c);
/// All-reduce, reduce-scatter, reduce: the collectives that combine values.
inline bool isReduction(CollType c) {
  return c == CollType::AllReduce || c == CollType::ReduceScatter || c == CollType::Reduce;
}

/// Algorithm families. `Auto` lets the tuner choose.
enum class Algo : uint8_t {
  Auto,
  Ring,      ///< ring: reduce-scatter + all-gather phases, n-1 steps each
  Rhd,       ///< recursive halving-doubling / recursive doubling, non-power-of-two fix-up
  Tree,      ///< binomial tree (k-nomial with k = 2): small messages, rooted collectives
  Direct,    ///< two-shot: direct reduce-scatter then direct all-gather (every peer in one step)
  OneShot,   ///< one-shot: every rank sends its whole input to every rank and reduces locally
  Pairwise,  ///< all-to-all: n-1 steps, step s exchanges with rank +s / -s
  Bruck,     ///< all-to-all: log2(n) steps of combined blocks (small messages)
  Linear,    ///< root sends to / receives from every rank (gather, scatter, broadcast, reduce)
  Hier,      ///< hierarchical: intra-node phases around inter-node phases on every rail (layout)
};
const char* algoName(Algo a);
/// Parses "ring", "rhd", "tree", "direct", "oneshot", "pairwise", "bruck", "linear", "hier", "auto";
/// false if unknown.
bool parseAlgo(const std::string& name, Algo* out);

/// The buffers a schedule names. Sizes in elements (see CollArgs for each collective):
///   Input:  the rank's send buffer       Output: the rank's receive buffer
///   Scratch: a temporary of Schedule::scratchElems elements owned by the executor.
enum class BufId : uint8_t { Input, Output, Scratch };

struct Slice {
  BufId buf = BufId::Input;
  size_t offset = 0;  ///< in elements
};

enum class OpCode : uint8_t {
  Send,        ///< send `count` elements at src to `peer`
  Recv,        ///< receive `count` elements from `peer` into dst
  RecvReduce,  ///< dst = reduce(src, incoming from `peer`), `count` elements
  Copy,        ///< dst = src (local)
  Reduce,      ///< dst = reduce(src, src2) (local)
};

struct Op {
  OpCode code = OpCode::Copy;
  int peer = -1;
  Slice src{}, src2{}, dst{};
  size_t count = 0;
};

/// One rank's schedule. Steps index into `ops`; reuse an instance (clear() keeps capacity) so that
/// building a schedule on the hot path allocates nothing after warm-up.
struct Schedule {
  struct Step {
    uint32_t firstOp = 0;
    uint32_t numOps = 0;
  };
  std::vector<Op> ops;
  std::vector<Step> steps;
  size_t scratchElems = 0;
  /// AllToAll only: the builder honoured CollArgs::inPlace, so the schedule runs on Input == Output
  /// itself (the executor does not stage the input). False: a schedule for distinct buffers.
  bool inPlace = false;

  void clear() {
    ops.clear();
    steps.clear();
    scratchElems = 0;
    inPlace = false;
  }
  /// Opens a new step; following add() calls belong to it.
  void beginStep() { steps.push_back(Step{static_cast<uint32_t>(ops.size()), 0}); }
  /// Adds an op to the current step (opens one if none). Ops with count 0 are dropped.
  void add(const Op& op) {
    if (op.count == 0) return;
    if (steps.empty()) beginStep();
    ops.push_back(op);
    steps.back().numOps++;
  }
  /// Removes trailing empty steps and empty steps in between.
  void compact();
  std::string toString() const;

  // Shorthands used by the algorithm files.
  void send(int peer, Slice src, size_t count) { add(Op{OpCode::Send, peer, src, {}, {}, count}); }
  void recv(int peer, Slice dst, size_t count) { add(Op{OpCode::Recv, peer, {}, {}, dst, count}); }
  void recvReduce(int peer, Slice src, Slice dst, size_t count) {
    add(Op{OpCode::RecvReduce, peer, src, {}, dst, count});
  }
  void copy(Slice src, Slice dst, size_t count) { add(Op{OpCode::Copy, -1, src, {}, dst, count}); }
  void reduce(Slice a, Slice b, Slice dst, size_t count) { add(Op{OpCode::Reduce, -1, a, b, dst, count}); }
};

inline Slice in(size_t off) { return Slice{BufId::Input, off}; }
inline Slice out(size_t off) { return Slice{BufId::Output, off}; }
inline Slice scr(size_t off) { return Slice{BufId::Scratch, off}; }

/// What a schedule is asked to compute. `count` means, per collective (n = nranks):
///   AllReduce:     Input[count] -> Output[count]                       (in place: Input == Output)
///   ReduceScatter: Input[count*n] -> Output[count]          (in place: Output == Input + rank*count)
///   AllGather:     Input[count] -> Output[count*n]          (in place: Input == Output + rank*count)
///   Broadcast:     Input[count] on root -> Output[count]   (in place: Input == Output on the root)
///   Reduce:        Input[count] -> Output[count] on root only (non-roots have no Output)
///   AllToAll:      Input[count*n] -> Output[count*n]  (in place: Input == Output, only for schedules
///                  built with CollArgs::inPlace that set Schedule::inPlace; otherwise the executor
///                  runs an out-of-place schedule on a staged copy of the input)
///   Gather:        Input[count] -> Output[count*n] on root   (in place: Input == Output + root*count)
///   Scatter:       Input[count*n] on root -> Output[count]   (in place: Output == Input + root*count)
/// Every schedule must be correct both with distinct buffers and with the in-place aliasing above
/// (AllToAll: see above); Input is read-only; non-roots of Broadcast/Scatter have no Input.
struct CollArgs {
  CollType coll = CollType::AllReduce;
  int nranks = 1;
  int rank = 0;
  int root = 0;
  size_t count = 0;
  /// Where the ranks sit (nodes, local ranks, rails); the communicator's, identical on every rank.
  /// Only hierarchical schedules read it; null means one node.
  const topology::CommLayout* layout = nullptr;
  /// AllToAll only (ignored otherwise): the call is in place (Input == Output). A builder that has an
  /// in-place variant (Pairwise) builds it and sets Schedule::inPlace; the others ignore it.
  bool inPlace = false;
};

/// True if `algo` implements `coll`.
bool algoSupports(Algo algo, CollType coll);
/// Builds rank args.rank's schedule into *out (cleared first). `algo` must not be Auto and must
/// support args.coll.
void buildSchedule(Algo algo, const CollArgs& args, Schedule* out);

}  // namespace strata
