// schedule.h: pipeline schedules as data, and their simulations.
//
// A schedule is, per pipeline rank, an ordered list of passes: F (forward), B (backward) and, in a
// zero-bubble schedule, W. Without W, B is the whole backward (input and weight gradients); with
// W, B computes only the input gradient (on the critical path: it goes to the previous stage at
// once) and W the weight gradients of the same (microbatch, chunk), later, filling bubbles.
//
//   gpipe:       all forwards, then all backwards                          bubble (p-1)/(m+p-1)
//   1f1b:        p-s-1 warm-up forwards, then one forward, one backward      bubble (p-1)/(m+p-1), less memory
//   interleaved: v chunks per rank, Megatron's order                         bubble (p-1)/(v*m+p-1)
//   zb:          ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): 1F1B's order with
//                the backward split; stage s runs W(k-s) after B(k) for k >= s and its last s W's at
//                the end. Peak in-flight microbatches = 1F1B's (p, on stage 0; every stage reaches
//                it), bubble (p-1)/(3m+p-1) at F = B = W: about a third of 1F1B's.
//
// Two simulations of the same lists: in unit ticks (the executor's plan: who runs which pass and
// which activations/gradients cross between neighbours at the end of each tick), and in time with
// a cost per pass (the bubble fraction, the drawn grid). Costs are F = B = W = 1 unless given, so
// an unsplit backward (B + W) costs 2: the ZB paper's H1 analysis.
#pragma once

#include <string>
#include <vector>

#include "config.h"

namespace trainer {

enum class Op : char { F = 'F', B = 'B', W = 'W' };

struct Action {
  Op op;
  int mb, v;  // microbatch, local chunk
};

/// An activation (grad = 0: input of `chunk`) or gradient (grad = 1: of `chunk`'s output) crossing
/// from pipeline rank src to dst at the end of a tick.
struct Transfer {
  int grad, mb, chunk, src, dst;
};

/// True when the configured schedule has separate W passes (zb with pp > 1).
bool splitBackward(const Config& cfg);
/// Pipeline rank s's pass order.
std::vector<Action> scheduleFor(const Config& cfg, int s);
/// Runs every rank's list in unit ticks. Fills, for pipeline rank `me`, its action index per tick
/// (-1: idle) and every tick's transfers. Throws std::logic_error if the schedule stalls.
void simulateSchedule(const Config& cfg, int me, std::vector<int>* tickAction,
                      std::vector<std::vector<Transfer>>* tickTransfers);
/// The theoretical bubble fraction of the configured schedule (F = B = W).
double theoreticalBubble(const Config& cfg);

/// Time a pass takes; an unsplit backward takes b + w.
struct PassCosts {
  double f = 1, b = 1, w = 1;
};
struct TimedPass {
  int index;  // into scheduleFor(cfg, stage)
  double start, end;
};
struct Timeline {
  std::vector<std::vector<TimedPass>> stages;
  double makespan = 0;
  /// Idle share of all stages' time: 1 - busy / (stages * makespan).
  double bubble() const;
};
/// Each pass starts when its stage is free and its input is there (the previous chunk's forward,
/// the next chunk's backward, this chunk's earlier passes); transfers take no time. Throws
/// std::logic_error if the schedule stalls.
Timeline simulateTimeline(const Config& cfg, PassCosts costs = {});
/// Per stage: the most microbatches it holds activations for at once (forward run, last backward
/// pass, W or the unsplit B, not yet).
std::vector<int> peakInFlight(const Config& cfg);
/// The timeline as a text grid, one row per stage and one cell per time unit (integer costs), then
/// the bubble against the formula and the peak in-flight microbatches.
std::string drawSchedule(const Config& cfg, PassCosts costs = {});

}  // namespace trainer
