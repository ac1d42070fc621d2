// host.h: the planner's description of this machine running the reference trainer's ranks as CPU
// processes (strata-plan --host-ranks N): the cores they share (detected), the rate of the
// trainer's own GEMM loops and the memory bandwidth of its element-wise loops on one core
// (measured here, at the model's shapes, with the trainer's kernels), and shared-memory links; or
// the same ranks on a virtual cluster of network namespaces with rate-limited rails.
// The step model then runs the pipeline with the ranks sharing the cores (pipeline.h: CoreSharing).
#pragma once

#include "planner/hardware.h"
#include "planner/model_spec.h"

namespace strata::planner {

struct HostCalibration {
  double gemmFlops = 0;   ///< FLOP/s of one core running the trainer's layer GEMMs forward and backward
  double attnFlops = 0;  ///< FLOP/s of one core in the trainer's causal attention (forward and backward)
  double memBytes = 0;    ///< the planner's element-wise bytes per second of the trainer's norm, GELU and add loops
  double optimizerBytes = 0;  ///< the planner's optimizer bytes per second of the trainer's AdamW loop
  int gemmTokens = 0, gemmIn = 0, gemmOut = 0;  ///< the shape measured
};

/// Times the trainer's host lane (backend.h: its -O3 loops) on one layer's four GEMMs of `m`'s
/// sizes (one sequence of tokens, forward, input and weight gradients), its causal attention over
/// that sequence, and its layer norms, GELU and residual adds; on the calling thread, best of a few
/// repetitions, well under a second.
HostCalibration calibrateHost(const ModelSpec& m);

/// The network of a virtual cluster (strata-run --nodes N --rails R --rail-rate RATE): the ranks
/// split node-major over `nodes` network namespaces of this machine, each with `rails` veth
/// interfaces shaped by tc tbf to `railBitsPerSec` per direction (0: not shaped).
struct HostNetwork {
  int nodes = 1;
  int rails = 1;
  double railBitsPerSec = 0;
  double latencyUs = 50;  ///< one TCP message through veth and a bridge (stated, as topology/files/virtual_*.json)
};

/// The payload share of a shaped link's rate: tc tbf counts every frame's Ethernet, IP and TCP
/// headers (with timestamps: 66 of 1514 bytes per full frame).
constexpr double kTcpPayloadShare = 1448.0 / 1514.0;

/// `ranks` ranks sharing `cores` cores (0: the CPUs this process may run on), at the calibrated
/// rates (efficiency 1: they are measured), host memory divided among the ranks; on one node, or
/// on the virtual cluster `net` (all its nodes still share this machine's cores). Shared memory
/// inside a node at the measured memory bandwidth; between nodes the rail class at the shaped
/// rate's payload share (unshaped: the default rail cost).
HardwareSpec hostHardware(int ranks, int cores, const HostCalibration& cal, const HostNetwork& net = {});

/// The predicted step of `m` on a single rank at these rates (compute and optimizer only): what a
/// measured one-rank step is compared with to scale the rates (strata-plan --host-step-seconds).
double oneRankStep(const ModelSpec& m, const HostCalibration& cal);

}  // namespace strata::planner
