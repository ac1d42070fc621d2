// hardware.cc: a topology file's cluster as the planner's HardwareSpec, with the GPU table.
#include "planner/hardware.h"

#include <fmt/format.h>

#include "topology/topo_file.h"

namespace strata::planner {

// Dense bf16 peak and HBM bandwidth from the vendors' data sheets (SXM parts); the GEMM
// efficiencies are stated priors for large bf16 GEMMs (cuBLAS reaches ~80% of peak on A100 and
// ~70% on H100/H200 for transformer-sized shapes), not fitted to the validation runs.
static const GpuFacts kGpus[] = {
    {"A100-SXM4-40GB", 312, 1555, 40, 0.80},
    {"A100", 312, 2039, 80, 0.80},
    {"H100", 989, 3350, 80, 0.70},
    {"H200", 989, 4800, 141, 0.70},
};

bool gpuFacts(const std::string& name, GpuFacts* out) {
  for (const GpuFacts& g : kGpus)
    if (name.find(g.match) != std::string::npos) return *out = g, true;
  return false;
}

Status hardwareFromCluster(const topology::Cluster& c, HardwareSpec* out) {
  const std::string& src = c.source;
  if (c.nodes.empty()) return invalidArgument("{}: nodes: the cluster has no nodes", src);
  HardwareSpec h;
  h.nodes = int(c.nodes.size());
  h.gpusPerNode = int(c.nodes[0].gpus.size());
  if (h.gpusPerNode == 0) return invalidArgument("{}: nodes[0].gpus: the planner needs GPUs on every node", src);
  for (size_t i = 0; i < c.nodes.size(); ++i)
    if (int(c.nodes[i].gpus.size()) != h.gpusPerNode)
      return invalidArgument("{}: nodes[{}].gpus: {} GPUs, node 0 has {} (the planner needs uniform nodes)", src, i,
                             c.nodes[i].gpus.size(), h.gpusPerNode);
  const topology::Gpu& g = c.nodes[0].gpus[0];
  h.gpuName = g.name;
  h.nvlink = g.nvswitch || g.nvlinks > 0;
  h.rails = c.rails;
  GpuFacts f{};
  const bool known = gpuFacts(g.name, &f);
  h.peakFlops = g.peakTflops > 0 ? g.peakTflops * 1e12 : known ? f.peakTflops * 1e12 : 0;
  h.memoryBytes = g.memoryBytes > 0 ? double(g.memoryBytes) : known ? f.memoryGiB * double(1ull << 30) : 0;
  if (h.peakFlops <= 0)
    return invalidArgument("{}: nodes[0].gpus[0].peak_tflops: missing, and GPU \"{}\" is not in the planner's table "
                           "(A100, H100, H200): give peak_tflops",
                           src, g.name);
  if (h.memoryBytes <= 0)
    return invalidArgument("{}: nodes[0].gpus[0].memory_GiB: missing, and GPU \"{}\" is not in the planner's table",
                           src, g.name);
  h.hbmBytesPerSec = known ? f.hbmGBps * 1e9 : 2000e9;
  h.matmulEfficiency = known ? f.matmulEfficiency : 0.7;
  for (int k = 0; k < topology::kLinkClassCount; ++k) h.costs[size_t(k)] = c.cost[size_t(k)];
  h.setNodes(h.nodes);
  *out = h;
  return OkStatus();
}

void HardwareSpec::setNodes(int n) {
  nodes = n;
  description = fmt::format("{} nodes x {} {} ({:.0f} TFLOP/s, {:.0f} GiB), {} rails", nodes, gpusPerNode,
                            gpuName.empty() ? "GPUs" : gpuName, peakFlops / 1e12, memoryBytes / double(1ull << 30),
                            rails);
}

Status loadClusterFile(const std::string& path, HardwareSpec* out) {
  topology::Cluster c;
  STRATA_RETURN_IF_ERROR(topology::loadTopologyFile(path, &c));
  if (c.source.empty()) c.source = path;
  return hardwareFromCluster(c, out);
}

}  // namespace strata::planner
