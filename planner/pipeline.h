// pipeline.h: a pipeline schedule's step time by simulating it. The pass order of every stage is
// the reference trainer's schedules as data (examples/trainer/schedule.h: gpipe, 1f1b,
// interleaved, zb), linked, not copied; this file times them with the planner's per-chunk pass
// costs and a point-to-point delay for every activation or gradient crossing between stages
// (the trainer's own timeline takes transfers as free and costs as equal on every stage).
#pragma once

#include <utility>
#include <vector>

#include "planner/compute_model.h"
#include "planner/layout.h"

namespace strata::planner {

struct PipelineResult {
  double makespan = 0;  ///< seconds from the first forward to the last backward pass
  double bubble = 0;    ///< idle share of all stages: 1 - busy / (stages * makespan)
  int peakInFlight = 0; ///< most (microbatch, chunk) activations a stage holds at once (stage 0)
  /// lastGrad[stage][v]: start and end of the pass that completes local chunk v's weight
  /// gradients (its last backward, or its last W when the backward is split): the window in which
  /// the data-parallel reduction of that chunk's layers can begin.
  std::vector<std::vector<std::pair<double, double>>> lastGrad;
};

/// Ranks that share CPU cores instead of owning a device (the trainer's host ranks on one
/// machine): every rank of a stage runs the stage's passes in lockstep, and while k stages are
/// running a pass the ranksPerStage * k busy ranks share `cores` cores, each at
/// min(1, cores / busy) of its dedicated speed (processor sharing: a stage waiting in its bubble
/// leaves its cores to the others). cores <= 0: a dedicated device per rank.
struct CoreSharing {
  int ranksPerStage = 0;
  double cores = 0;
  bool shared() const { return cores > 0 && ranksPerStage > 0; }
};

/// chunkCost[c] is the cost of chunk c (c = v * pp + stage: stage c % pp, its local chunk c / pp)
/// on a dedicated device; `p2p` the seconds of one transfer between neighbouring stages.
PipelineResult simulatePipeline(PipeSchedule sched, int pp, int vp, long microbatches,
                                const std::vector<PassCost>& chunkCost, double p2p, CoreSharing share = {});

/// The closed-form bubble for equal stages and free transfers (GPipe/1F1B (p-1)/(m+p-1),
/// interleaved (p-1)/(v*m+p-1), ZB-H1 (p-1)/(3m+p-1) at F = B = W), for tests and reports.
double formulaBubble(PipeSchedule sched, int pp, int vp, long microbatches);

}  // namespace strata::planner
