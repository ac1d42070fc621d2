// model.h: the topology model: a cluster of nodes, each with its CPUs and NUMA domains, GPUs and
// NICs, and the classes of links between ranks with their cost (latency, bandwidth). Filled by
// detection (detect.h) or a topology file (topo_file.h); read by the layout (layout.h), the cost
// model (cost_model.h), strata-topo and the parallel-group placement report.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace strata::topology {

/// How two ranks reach each other, fastest first.
enum class LinkClass : uint8_t {
  SameProcess,   ///< threads of one process: direct loads and stores
  SharedMemory,  ///< processes of one node, host memory
  Pcie,          ///< GPUs of one node without NVLink between them
  NvLink,        ///< GPUs of one node joined by NVLink / NVSwitch
  Rail,          ///< other node, both ends on the same network rail
  CrossRail,     ///< other node, ends on different rails (through the spine)
};
constexpr int kLinkClassCount = 6;
const char* linkClassName(LinkClass c);  ///< "same-process", "shm", "pcie", "nvlink", "rail", "cross-rail"
bool parseLinkClass(const std::string& name, LinkClass* out);
inline bool isNetwork(LinkClass c) { return c == LinkClass::Rail || c == LinkClass::CrossRail; }

/// Alpha-beta cost of one message on a link: latency + bytes / bandwidth.
struct LinkCost {
  double latencyUs = 0;
  double bandwidthGBps = 0;  ///< GB/s (1e9 bytes per second), one direction
};
/// The defaults per class (a stated guess, overridable by a topology file or calibration).
LinkCost defaultLinkCost(LinkClass c);

struct NumaDomain {
  int id = 0;
  std::string cpus;          ///< cpulist, e.g. "0-15,32-47"
  uint64_t memoryBytes = 0;
};

struct Gpu {
  int index = 0;             ///< CUDA/NVML index on its node
  std::string name;          ///< "NVIDIA H100 80GB HBM3"
  std::string pciBusId;      ///< "0000:18:00.0"
  int numa = -1;
  uint64_t memoryBytes = 0;
  double peakTflops = 0;     ///< dense bf16, when known (files); 0: unknown
  int nvlinks = 0;           ///< active NVLink links
  bool nvswitch = false;     ///< NVLinks go to NVSwitches (all GPUs of the node joined)
  std::vector<int> nvlinkPeers;  ///< GPUs reached by direct NVLink (without NVSwitch)
};

struct Nic {
  std::string name;          ///< verbs device ("mlx5_0") or netdev ("eth0")
  std::string netdev;        ///< its network interface, if any
  std::string kind;          ///< "ib", "roce", "eth"
  int port = 1;
  bool up = false;
  double rateGbps = 0;       ///< link rate in Gbit/s (0: unknown)
  std::string pciBusId;      ///< "" for virtual interfaces
  int numa = -1;
  int rail = -1;             ///< rail index across the cluster (-1: unassigned)
  std::string ipv4;          ///< first IPv4 address of the netdev, if any
};

struct Node {
  std::string hostname;
  int cores = 0;             ///< physical cores
  int cpus = 0;              ///< hardware threads
  std::vector<NumaDomain> numa;
  std::vector<Gpu> gpus;
  std::vector<Nic> nics;
  std::string source;        ///< "detected (hwloc 2.9)", "file x.json", "hwloc-xml y.xml"
};

struct Cluster {
  std::vector<Node> nodes;
  int rails = 0;             ///< network rails (0: none known)
  /// Cost per link class; `costFromFile[c]` says whether the file set it (else the default).
  std::array<LinkCost, kLinkClassCount> cost{};
  std::array<bool, kLinkClassCount> costFromFile{};
  /// Optional placement: rankNode[r] = index into `nodes` of world rank r. Empty: ranks are
  /// placed by host identity. Ranks on different nodes of one machine use the network transport.
  std::vector<int> rankNode;
  std::string source;        ///< where it came from (file path or "detected")

  /// Fills `cost` with the defaults for every class the file did not set.
  void applyDefaultCosts();
};

}  // namespace strata::topology
