// memory_model.h: bytes per GPU of a layout on its heaviest pipeline stage: weights, gradients and
// optimizer states by ZeRO stage, activations by schedule (microbatches in flight) and
// recomputation (Korthikanti et al. 2022's per-layer accounting, generalised to GQA, gated MLPs,
// MoE, flash attention and no dropout), the logits, and a fixed reserve.
#pragma once

#include <string>

#include "planner/hardware.h"
#include "planner/layout.h"
#include "planner/model_spec.h"

namespace strata::planner {

struct MemoryBreakdown {
  double weights = 0, grads = 0, optimizer = 0, activations = 0, logits = 0, reserve = 0;
  double localParams = 0;  ///< parameters on the heaviest stage's GPU (before ZeRO sharding)
  double localExpertParams = 0;  ///< of which experts
  double total() const { return weights + grads + optimizer + activations + logits + reserve; }
  std::string describe() const;  ///< "62.1 GiB = weights 3.2 + grads 6.4 + ..."
};

/// Activation bytes one layer keeps for one microbatch until its backward, per GPU.
double layerActivationBytes(const ModelSpec& m, const Layout& l);
/// Parameters one GPU of stage `stage` holds (embedding on the first, output layer on the last).
double stageParams(const ModelSpec& m, const Layout& l, int stage);
/// Parameters of one layer on one GPU.
double layerParams(const ModelSpec& m, const Layout& l);
/// Of a stage's parameters, the experts' (split over ep, and over tp unless Layout::wholeExperts).
double stageExpertParams(const ModelSpec& m, const Layout& l, int stage);
/// The reserve for the CUDA context, communicator buffers and fragmentation: 5% + 2 GiB.
double memoryReserve(const HardwareSpec& hw);
/// `inFlightChunks`: the most (microbatch, chunk) activations stage 0 holds at once (pipeline.h).
MemoryBreakdown memoryPerGpu(const ModelSpec& m, const Layout& l, const HardwareSpec& hw, int inFlightChunks);

}  // namespace strata::planner
