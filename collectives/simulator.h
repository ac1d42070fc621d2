// simulator.h: the symbolic schedule simulator. It builds every rank's schedule and runs them all in
// one process on symbolic values under the executor's rules, proving the result or naming the rank,
// step and op that breaks it. Used by tests/schedule_sim_test.cc (n = 1..64, every algorithm) and,
// with values off, by the tuner to cost schedules (steps, rendezvous depth, elements moved).
//
// Rules checked (see schedule.h):
//  - buffers: bounds of Input/Output/Scratch per collective and rank (a rank without a buffer, e.g.
//    a non-root of Broadcast/Scatter without Input or of Reduce/Gather without Output, may not
//    touch it); nothing writes Input; in place, the aliasing documented on CollArgs is applied.
//  - steps: within a step no op reads or writes what another op of the step writes; inside one op
//    dst equals src exactly or does not overlap it. A Copy whose src and dst resolve to the same
//    memory (the in-place own-block copy) is a no-op: it reads and writes nothing.
//  - matching: the k-th Send a->b matches the k-th Recv/RecvReduce at b from a; counts equal.
//  - rendezvous: a send/receive pair completes only while both ranks execute the steps holding
//    them; a rank leaves a step when all its send/receive ops completed. No progress = deadlock.
//  - values: a reduction element is (index, mask of contributing ranks); reducing two values needs
//    equal indices and disjoint masks ("index mismatch" / "double counted"). Non-reduction
//    collectives carry (index, source rank) and may not reduce. Every Output element must hold its
//    expected value; an uninitialised value reaching Output is reported with its first read.
//  - AllReduce: every rank must hold the same reduction tree for each element (bitwise identical
//    floating-point results), tracked as a commutative hash of the tree.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "collectives/schedule.h"

namespace strata {

struct SimResult {
  bool ok = true;
  std::string error;  ///< the first error, naming rank, step and op; empty if ok
  int steps = 0;      ///< max over ranks of schedule steps (local steps included)
  int commSteps = 0;  ///< max over ranks of steps holding a send or receive
  /// Communication rounds on the critical path: each send/receive pair costs 1 and starts when both
  /// ranks have entered their steps; local-only steps cost 0. A latency (alpha) multiplier.
  int depth = 0;
  size_t maxSentElems = 0;  ///< max over ranks of elements sent
  size_t maxRecvElems = 0;  ///< max over ranks of elements received
  size_t maxScratchElems = 0;
  size_t maxOps = 0;  ///< max over ranks of ops in its schedule
  /// With SimOptions::links: predicted seconds until the last rank finishes (0 otherwise).
  double seconds = 0;
};

/// What a message costs, for timed simulation (the cost model implements it from the topology).
/// A message a -> b of B bytes starts when both ranks are in its step and every resource it
/// occupies is free; it holds the resources for B * secondsPerByte and completes latency later.
/// Resources are shared links (a node's egress or ingress on one rail): messages on one resource
/// are serialised, which is how contention shows up. Approximation: messages are placed on
/// resources in the simulator's matching order, not strictly in time order.
class LinkModel {
 public:
  virtual ~LinkModel() = default;
  virtual double latency(int a, int b) const = 0;
  virtual double secondsPerByte(int a, int b) const = 0;
  /// Writes up to 2 resource ids (< resourceCount()) the message a -> b occupies; returns how many.
  virtual int resources(int a, int b, int out[2]) const = 0;
  virtual int resourceCount() const = 0;
  /// Seconds per byte of a local copy or reduction on rank r (bytes written).
  virtual double localSecondsPerByte(int r) const = 0;
};

struct SimOptions {
  /// false: build, check and match the schedules and compute the statistics, but do not execute
  /// values (no n <= 64 limit; memory is not allocated). For costing.
  bool values = true;
  /// Non-null: time the schedules with this model (SimResult::seconds).
  const LinkModel* links = nullptr;
  size_t elemBytes = 4;  ///< bytes per element, for timing
};

/// Builds the schedules of ranks 0..args.nranks-1 (args.rank is ignored) with `algo` and simulates
/// them. inPlace applies the collective's aliasing. AllToAll: the schedules are built with
/// CollArgs::inPlace and aliased only if the builder made them in place (Schedule::inPlace); others
/// run out of place, as the executor runs them on a staged copy of the input.
SimResult simulate(Algo algo, const CollArgs& args, bool inPlace, const SimOptions& opt = {});

/// Simulates given schedules (perRank[r] is rank r's; args.rank ignored). For tests of the
/// simulator itself and for schedules composed outside buildSchedule. AllToAll in place aliases
/// only schedules marked Schedule::inPlace (all ranks must agree; such a schedule out of place fails).
SimResult simulateSchedules(const CollArgs& args, bool inPlace, const std::vector<Schedule>& perRank,
                            const SimOptions& opt = {});

/// "send(to 3, in[12], 5)"-style text of one op (defined in schedule.cc).
std::string opToString(const Op& op);

}  // namespace strata
