// pp.h: pipeline parallelism: GPipe, 1F1B and interleaved 1F1B over send/recv.
//
// A schedule is, per pipeline rank, an ordered list of actions F(microbatch, chunk) and
// B(microbatch, chunk). Every rank simulates all ranks' lists in unit-time ticks (an action runs
// at the first tick its input has arrived), which yields, per tick, who computes what and which
// activations/gradients cross between neighbours at the end of the tick. Each tick's transfers run
// as one strata group (sends and receives together), so no ordering of blocking calls can
// deadlock, and both sides of every transfer agree on it by construction.
//
//   gpipe:       all forwards, then all backwards                     bubble (p-1)/(m+p-1)
//   1f1b:        p-s-1 warm-up forwards, then one forward, one backward bubble (p-1)/(m+p-1), less memory
//   interleaved: v chunks per rank, Megatron's order                   bubble (p-1)/(v*m+p-1)
#pragma once

#include <map>
#include <vector>

#include "context.h"
#include "model.h"

namespace trainer {

struct Action {
  bool fwd;
  int mb, v;  // microbatch, local chunk
};

/// An activation (grad = 0: input of `chunk`) or gradient (grad = 1: of `chunk`'s output) crossing
/// from pipeline rank src to dst at the end of a tick.
struct Transfer {
  int grad, mb, chunk, src, dst;
};

/// Pipeline rank s's action order.
std::vector<Action> scheduleFor(const Config& cfg, int s);
/// Runs every rank's action list in unit ticks. Fills, for pipeline rank `me`, its action index per
/// tick (-1: idle) and every tick's transfers. Throws std::logic_error if the schedule stalls.
void simulateSchedule(const Config& cfg, int me, std::vector<int>* tickAction,
                      std::vector<std::vector<Transfer>>* tickTransfers);
/// The theoretical bubble fraction of the configured schedule.
double theoreticalBubble(const Config& cfg);

class Pipeline {
 public:
  /// Simulates the schedule (throws std::logic_error if it cannot complete).
  Pipeline(Ctx& c, Model& m);
  /// Runs this rank's part of one step's schedule. Returns the wall time it took.
  double run(int rowsPerMicro);
  int ticks() const { return int(tickAction_.size()); }

 private:
  Ctx& c_;
  Model& model_;
  std::vector<Action> mine_;
  std::vector<int> tickAction_;             // this rank's action index per tick, or -1
  std::vector<std::vector<Transfer>> tickMsgs_;  // every transfer at the end of each tick
};

}  // namespace trainer
