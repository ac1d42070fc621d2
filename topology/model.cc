// model.cc: link-class names and the default cost of each link class (see model.h).
#include "topology/model.h"

namespace strata::topology {

namespace {

constexpr const char* kNames[kLinkClassCount] = {"same-process", "shm", "pcie", "nvlink", "rail", "cross-rail"};

}  // namespace

const char* linkClassName(LinkClass c) {
  const int i = static_cast<int>(c);
  return i >= 0 && i < kLinkClassCount ? kNames[i] : "unknown";
}

bool parseLinkClass(const std::string& name, LinkClass* out) {
  for (int i = 0; i < kLinkClassCount; ++i) {
    if (name == kNames[i]) {
      *out = static_cast<LinkClass>(i);
      return true;
    }
  }
  return false;
}

// The defaults are stated guesses, one direction, for a message that is already in place:
//   same-process  0.3 us   20 GB/s   a memcpy between threads' buffers (one socket, DRAM bound)
//   shm           1 us     10 GB/s   copy in and out of a shared-memory slot (two copies)
//   pcie          2 us     20 GB/s   GPU to GPU through the host bridge (PCIe Gen4 x16 ~25 GB/s peak)
//   nvlink        2 us    300 GB/s   NVLink / NVSwitch. A100 NVLink3 peaks at 300 GB/s per direction,
//                                    H100 NVLink4 at 450 GB/s (18 links x 25 GB/s), where collectives
//                                    reach ~360; 300 is the conservative middle. Files for a known
//                                    machine should set it (the DGX H100 example says 360).
//   rail          5 us     12.5 GB/s one 100 Gbit/s NIC port, both ends on one leaf switch
//   cross-rail    7 us     12.5 GB/s the same NICs, two more switch hops through the spine
// Calibration (or a topology file's "link_classes") replaces them.
LinkCost defaultLinkCost(LinkClass c) {
  switch (c) {
    case LinkClass::SameProcess: return {0.3, 20};
    case LinkClass::SharedMemory: return {1, 10};
    case LinkClass::Pcie: return {2, 20};
    case LinkClass::NvLink: return {2, 300};
    case LinkClass::Rail: return {5, 12.5};
    case LinkClass::CrossRail: return {7, 12.5};
  }
  return {};
}

void Cluster::applyDefaultCosts() {
  for (int i = 0; i < kLinkClassCount; ++i) {
    if (!costFromFile[i]) cost[i] = defaultLinkCost(static_cast<LinkClass>(i));
  }
}

}  // namespace strata::topology
