// step_model.h: one training step of one layout: compute per chunk (compute_model.h), the
// communication of every parallel dimension through the runtime's tuner and cost model
// (comm_cost.h), the pipeline schedule simulated (pipeline.h), data-parallel gradient reduction
// with or without overlap, the optimizer step, and memory per GPU (memory_model.h).
#pragma once

#include <string>
#include <vector>

#include "planner/comm_cost.h"
#include "planner/layout.h"
#include "planner/memory_model.h"
#include "planner/pipeline.h"

namespace strata::planner {

struct StepOptions {
  bool dpOverlap = true;  ///< gradient reduction overlaps the last microbatch's backward
  bool tpOverlap = false; ///< tensor-parallel collectives hidden behind GEMMs (not modelled: off)
  /// The context-parallel ring exchange overlaps the attention of the block at hand (Megatron,
  /// Transformer Engine); off: each hop blocks (the reference trainer's ring, examples/trainer/cp.h).
  bool cpOverlap = true;
};

/// What one parallel dimension's communication costs per step on one GPU.
struct DimComm {
  std::string dim;       ///< "tp", "cp", "ep", "pp", "dp"
  std::string what;      ///< "2x all-gather + 2x reduce-scatter per layer, 16.0 MiB"
  std::string group;     ///< the group's shape key
  Algo algo = Algo::Auto;
  double perCall = 0;    ///< seconds of one call
  double total = 0;      ///< seconds per step, all calls
  double exposed = 0;    ///< seconds per step not hidden behind compute
};

/// One collective a pass (or the step) issues on its group, for the job simulation (job_sim.h).
struct GroupCall {
  GroupShape group;
  CollType coll = CollType::AllReduce;
  Algo algo = Algo::Auto;  ///< the runtime's choice (the analytic model's)
  double bytes = 0;        ///< per call, tuner convention
  int perFwd = 0;          ///< calls per layer in a forward pass
  int perBwd = 0;          ///< calls per layer in a backward pass (recomputed forward included)
  double fittedSeconds = 0;  ///< the analytic model's time for one call
  unsigned dims = 0;         ///< the parallel dimensions the group spans (bit d: dimension d of ParallelSpec)
};

/// What the analytic model priced, as data: the job simulation replays it rank by rank.
struct StepPlan {
  PassCost layerCompute;             ///< one layer, one microbatch: compute and hidden-overlap excess
  PassCost logitsCompute;            ///< the last chunk's output layer
  std::vector<GroupCall> layerCalls; ///< tp / ep collectives of every layer
  double ppHop = 0;                  ///< one activation or gradient between neighbouring stages
  std::vector<GroupCall> dpCalls;    ///< gradient reduction (and ZeRO 1/2 weight gather) of a stage's parameters
  double localParams = 0;            ///< parameters of the busiest stage's GPU
};

struct Prediction {
  Layout layout;
  bool fits = false;
  std::string reject;        ///< why it does not fit
  MemoryBreakdown memory;
  PipelineResult pipe;
  double step = 0, computePerStep = 0, optimizer = 0;
  double tokensPerSec = 0, mfu = 0, tflopsPerGpu = 0;
  std::vector<DimComm> comms;
  StepPlan plan;
};

class StepModel {
 public:
  StepModel(const ModelSpec& m, const HardwareSpec& hw, StepOptions opt = {});
  /// Predicts one layout; when it does not fit in memory only `memory` and `reject` are filled,
  /// unless `evenIfOver` (validation of runs whose memory the model overestimates).
  Prediction predict(const Layout& l, bool evenIfOver = false);
  CommCoster& coster() { return coster_; }

 private:
  double overlappedTail(const Prediction& p);  ///< exposed dp reduction overlapped with the backward
  double laneSeconds(const StepPlan& plan, double share);  ///< the dp calls at `share` of their size, on the lane

  ModelSpec m_;
  HardwareSpec hw_;
  StepOptions opt_;
  CommCoster coster_;
  /// The data-parallel lane's costs: on shared cores every rank reduces at once, so the lane's
  /// copies and reductions inside a node run `oversubscription` times slower; its wire time does not.
  CommCoster laneCoster_;
};

/// Layers of chunk c of C: an even split, the remainder one each from chunk 1 on (the first chunk
/// carries the embedding, the last the logits).
int chunkLayers(const ModelSpec& m, int c, int C);

/// The most (microbatch, chunk) activations stage 0 holds at once under the schedule.
int peakInFlight(const Layout& l, long microbatches);

}  // namespace strata::planner
