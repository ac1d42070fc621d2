// host.h: the planner's description of this machine running the reference trainer's ranks as CPU
// processes (strata-plan --host-ranks N): the cores they share (detected), the rate of the
// trainer's own GEMM loops and the memory bandwidth of its element-wise loops on one core
// (measured here, at the model's shapes, with the trainer's kernels), and shared-memory links.
// The step model then runs the pipeline with the ranks sharing the cores (pipeline.h: CoreSharing).
#pragma once

#include "planner/hardware.h"
#include "planner/model_spec.h"

namespace strata::planner {

struct HostCalibration {
  double gemmFlops = 0;   ///< FLOP/s of one core running the trainer's layer GEMMs forward and backward
  double attnFlops = 0;  ///< FLOP/s of one core in the trainer's causal attention (forward and backward)
  double memBytes = 0;    ///< the planner's element-wise bytes per second of the trainer's norm, GELU and add loops
  int gemmTokens = 0, gemmIn = 0, gemmOut = 0;  ///< the shape measured
};

/// Times the trainer's host lane (backend.h: its -O3 loops) on one layer's four GEMMs of `m`'s
/// sizes (one sequence of tokens, forward, input and weight gradients), its causal attention over
/// that sequence, and its layer norms, GELU and residual adds; on the calling thread, best of a few
/// repetitions, well under a second.
HostCalibration calibrateHost(const ModelSpec& m);

/// One node of `ranks` ranks sharing `cores` cores (0: the CPUs this process may run on), at the
/// calibrated rates (efficiency 1: they are measured), host memory divided among the ranks, and
/// the default link costs with the shared-memory bandwidth from the measured memory bandwidth.
HardwareSpec hostHardware(int ranks, int cores, const HostCalibration& cal);

/// The predicted step of `m` on a single rank at these rates (compute and optimizer only): what a
/// measured one-rank step is compared with to scale the rates (strata-plan --host-step-seconds).
double oneRankStep(const ModelSpec& m, const HostCalibration& cal);

}  // namespace strata::planner
