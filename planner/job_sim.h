// job_sim.h: strata-plan --simulate. One training step of a layout as a discrete-event run over
// every rank of the job, no data moved, to check the analytic prediction (step_model.h).
//
// Each rank runs its stage's pass order (the trainer's schedules as data, as pipeline.h does):
// a forward or backward pass waits for the activation or gradient its neighbour stage sent
// (arriving one pipeline hop after it was sent), computes its chunk's layers, and meets the other
// members of its tensor/expert-parallel group in a rendezvous for the pass's collectives, whose
// time is each collective's schedule run through strata's simulator on the group's full placement
// at the exact size (CommCoster::exact: no fitted line, no extrapolation). As a chunk's last
// backward goes through its layers, each layer's share of the gradient reduction (and ZeRO-1/2
// weight gather) runs on the rank's communication lane once every member of its data-parallel
// group has it, bucket by layer as the trainer reduces (one reduction after the passes without
// overlap). The step is the last rank's end, optimizer included.
#pragma once

#include <string>
#include <vector>

#include "planner/step_model.h"

namespace strata::planner {

struct JobSimCall {
  std::string what;     ///< "tp all-gather (ring) on 1x{0,1,2,3}, 64.0 MiB"
  double fitted = 0;    ///< the analytic model's seconds per call
  double exact = 0;     ///< the schedule simulated at the group's full size
};

struct JobSimResult {
  long ranks = 0;
  long passes = 0;       ///< F, B and W passes run, all ranks
  long rendezvous = 0;   ///< collective rendezvous completed (pass and data-parallel groups)
  long messages = 0;     ///< pipeline activations and gradients sent
  double makespan = 0;   ///< last pass end over all ranks
  double step = 0;       ///< last rank's end of step, data-parallel tail and optimizer included
  double dpTail = 0;     ///< step - makespan - optimizer: the exposed data-parallel reduction
  double wallSeconds = 0;
  std::vector<JobSimCall> calls;
};

/// Simulates one step of `pred.layout` (pred from StepModel::predict, whose plan it replays).
JobSimResult simulateJob(const ModelSpec& m, const Prediction& pred, CommCoster& coster, bool dpOverlap);

/// The report strata-plan prints for a simulation, against the prediction.
std::string describeJobSim(const JobSimResult& r, const Prediction& pred);

}  // namespace strata::planner
