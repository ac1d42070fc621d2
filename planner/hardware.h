// hardware.h: what the step model needs of a cluster: nodes, GPUs per node, each GPU's peak
// FLOP/s, memory and memory bandwidth, the compute efficiency assumed for it, rails and the link
// costs. Peak FLOP/s and memory come from the topology file's GPUs ("peak_tflops", "memory_GiB");
// memory bandwidth and the default efficiency from a small table of GPU types (stated in
// docs/PLANNER.md), and every value can be overridden.
#pragma once

#include <algorithm>
#include <string>

#include "collectives/cost_model.h"
#include "topology/model.h"
#include "transport/status.h"

namespace strata::planner {

struct HardwareSpec {
  std::string description;  ///< "256 nodes x 8 NVIDIA H100 80GB HBM3, 8 rails"
  int nodes = 0, gpusPerNode = 0, rails = 0;
  bool nvlink = false;
  std::string gpuName;
  double peakFlops = 0;        ///< dense bf16 FLOP/s per GPU
  double memoryBytes = 0;      ///< per GPU
  double hbmBytesPerSec = 0;   ///< per GPU, peak
  double matmulEfficiency = 0; ///< share of peak FLOP/s the layer GEMMs reach
  double attentionFlops = 0;   ///< FLOP/s of the attention core (QK^T, AV); 0: the GEMMs' rate
  double hbmEfficiency = 0.8;  ///< share of peak memory bandwidth element-wise kernels reach
  double optimizerBytesPerSec = 0;  ///< the optimizer step's rate in its byte count; 0: HBM x hbmEfficiency
  CostModel::Costs costs{};    ///< per link class (the topology file's, else defaults)
  /// > 0: the ranks are CPU processes of one machine sharing this many cores (host.h; virtual
  /// nodes of one machine share them too); 0: a dedicated GPU per rank.
  double sharedCores = 0;

  /// How many times slower than dedicated a rank runs when every rank of a `world` is busy.
  double oversubscription(int world) const { return sharedCores > 0 ? std::max(1.0, world / sharedCores) : 1.0; }

  int gpus() const { return nodes * gpusPerNode; }
  /// Uses `n` nodes of this node type (strata-plan --nodes), the description following.
  void setNodes(int n);
  double gemmRate() const { return peakFlops * matmulEfficiency; }
  double attentionRate() const { return attentionFlops > 0 ? attentionFlops : gemmRate(); }
};

/// Facts of known GPU types, matched by name ("A100", "H100", "H200"): peak dense bf16 TFLOP/s,
/// memory bandwidth, default GEMM efficiency. False when the name matches none.
struct GpuFacts {
  const char* match;
  double peakTflops, hbmGBps, memoryGiB, matmulEfficiency;
};
bool gpuFacts(const std::string& name, GpuFacts* out);

/// From a loaded topology: every node must have the same number of GPUs (the planner's layouts are
/// uniform). Missing peak FLOP/s or memory are taken from the GPU table, or fail naming the file.
Status hardwareFromCluster(const topology::Cluster& c, HardwareSpec* out);
Status loadClusterFile(const std::string& path, HardwareSpec* out);

}  // namespace strata::planner
