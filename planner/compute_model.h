// compute_model.h: the time one GPU spends computing one transformer layer for one microbatch,
// forward and backward (split into input-gradient and weight-gradient parts for zero-bubble
// schedules), with recomputation; and the logits layer and the optimizer step. GEMM FLOPs run at
// the GPU's peak times its matmul efficiency; element-wise kernels (norms, activations, residuals,
// dropout, unfused softmax) are memory-bound: bytes moved at the HBM bandwidth times its efficiency.
#pragma once

#include "planner/hardware.h"
#include "planner/layout.h"
#include "planner/model_spec.h"

namespace strata::planner {

struct PassCost {
  double fwd = 0;       ///< forward
  double bwdInput = 0;  ///< backward to the input (B of a zero-bubble schedule), recomputation included
  double bwdWeight = 0; ///< weight gradients (W)
  double bwd() const { return bwdInput + bwdWeight; }
};

/// FLOPs of one layer's GEMMs for `tokens` tokens of one sequence of length `seq` on one GPU of a
/// tp-way split: forward. `attnCore` receives the attention-score part (QK^T and AV).
double layerForwardFlops(const ModelSpec& m, double tokens, int tp, double* attnCore);
/// Bytes element-wise kernels move in one layer's forward on one GPU.
double layerForwardElementwiseBytes(const ModelSpec& m, const Layout& l, double tokens);

/// One transformer layer, one microbatch, one GPU of the layout.
PassCost layerCost(const ModelSpec& m, const Layout& l, const HardwareSpec& hw);
/// Forward seconds of one layer's expert GEMMs (the topk experts of every token) for one
/// microbatch on one GPU; 0 for a dense model.
double expertForwardSeconds(const ModelSpec& m, const Layout& l, const HardwareSpec& hw);
/// The busiest expert-parallel rank's expected load over the mean when `assignments`
/// (token, expert) pairs of one microbatch spread uniformly over `ep` ranks: the multinomial noise
/// of balanced routing, 1 + E[max of ep standard normals] * sqrt((1 - 1/ep) / (assignments / ep)).
/// Every rank waits for that one at the combine.
double expertImbalance(int ep, double assignments);

/// The output layer (logits and loss) on the last stage, one microbatch.
PassCost logitsCost(const ModelSpec& m, const Layout& l, const HardwareSpec& hw);
/// The optimizer step on one GPU (memory-bound: master weights, moments, gradients, weights).
double optimizerSeconds(double localParams, const Layout& l, const ModelSpec& m, const HardwareSpec& hw);

/// Model FLOPs of one step (6 per parameter-token for active parameters plus attention scores,
/// recomputation not counted): the numerator of MFU.
double modelFlopsPerStep(const ModelSpec& m);

}  // namespace strata::planner
