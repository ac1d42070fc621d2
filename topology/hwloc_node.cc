// hwloc_node.cc: a Node's CPUs, NUMA domains and (for XML exports) GPUs and NICs, read from a
// loaded hwloc topology; and the NUMA locality of a PCI device (see detect.h).
#include <hwloc.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>

#include "topology/detect.h"

namespace strata::topology {

namespace {

constexpr unsigned kVendorNvidia = 0x10de;
constexpr unsigned kVendorAmd = 0x1002;

std::string cpuList(hwloc_const_bitmap_t set) {
  if (!set || hwloc_bitmap_iszero(set)) return "";
  char* s = nullptr;
  if (hwloc_bitmap_list_asprintf(&s, set) < 0 || !s) return "";
  std::string out(s);
  std::free(s);
  return out;
}

std::string busIdOf(hwloc_obj_t pci) {
  const auto& a = pci->attr->pcidev;
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", a.domain, a.bus, a.dev, a.func);
}

hwloc_obj_t pciParent(hwloc_obj_t obj) {
  for (hwloc_obj_t p = obj->parent; p; p = p->parent) {
    if (p->type == HWLOC_OBJ_PCI_DEVICE) return p;
  }
  return nullptr;
}

std::string info(hwloc_obj_t obj, const char* name) {
  const char* v = obj ? hwloc_obj_get_info_by_name(obj, name) : nullptr;
  return v ? v : "";
}

int numaOfObject(hwloc_obj_t obj) {
  if (!obj || !obj->nodeset || hwloc_bitmap_weight(obj->nodeset) != 1) return -1;
  return hwloc_bitmap_first(obj->nodeset);
}

// GPUs: GPU and co-processor OS devices of NVIDIA or AMD PCI devices, one per PCI device (hwloc
// may list one device as CUDA, NVML, OpenCL and DRM objects), indexed in PCI bus order.
void gpusFromOsDevices(hwloc_topology_t topo, Node* out) {
  std::map<std::string, Gpu> byBus;
  for (hwloc_obj_t os = hwloc_get_next_osdev(topo, nullptr); os; os = hwloc_get_next_osdev(topo, os)) {
    const auto t = os->attr->osdev.type;
    if (t != HWLOC_OBJ_OSDEV_GPU && t != HWLOC_OBJ_OSDEV_COPROC) continue;
    hwloc_obj_t pci = pciParent(os);
    if (!pci) continue;
    const unsigned vendor = pci->attr->pcidev.vendor_id;
    if (vendor != kVendorNvidia && vendor != kVendorAmd) continue;
    Gpu& g = byBus[busIdOf(pci)];
    g.pciBusId = busIdOf(pci);
    g.numa = numaOfObject(hwloc_get_non_io_ancestor_obj(topo, pci));
    if (std::string model = info(os, "GPUModel"); !model.empty()) g.name = model;
    if (g.name.empty()) g.name = info(pci, "PCIDevice");
    // CUDA co-processor objects carry the device memory in KiB.
    if (std::string kib = info(os, "CUDAGlobalMemorySize"); !kib.empty())
      g.memoryBytes = std::strtoull(kib.c_str(), nullptr, 10) << 10;
  }
  int index = 0;
  for (auto& [bus, g] : byBus) {
    g.index = index++;
    out->gpus.push_back(g);
  }
}

// NICs: OpenFabrics OS devices (verbs devices; the link layer is not in hwloc's data, so the kind
// stays unknown) and network OS devices that are not the netdev of one of them ("eth").
void nicsFromOsDevices(hwloc_topology_t topo, Node* out) {
  std::map<hwloc_obj_t, size_t> verbsOfPci;
  std::vector<hwloc_obj_t> netdevs;
  for (hwloc_obj_t os = hwloc_get_next_osdev(topo, nullptr); os; os = hwloc_get_next_osdev(topo, os)) {
    const auto t = os->attr->osdev.type;
    if (t == HWLOC_OBJ_OSDEV_NETWORK) {
      if (os->name && std::string(os->name) != "lo") netdevs.push_back(os);
      continue;
    }
    if (t != HWLOC_OBJ_OSDEV_OPENFABRICS) continue;
    Nic n;
    n.name = os->name ? os->name : "";
    hwloc_obj_t pci = pciParent(os);
    if (pci) {
      n.pciBusId = busIdOf(pci);
      n.numa = numaOfObject(hwloc_get_non_io_ancestor_obj(topo, pci));
      verbsOfPci[pci] = out->nics.size();
    }
    const std::string state = info(os, "Port1State");  // 4: ACTIVE
    n.up = state == "4";
    out->nics.push_back(n);
  }
  for (hwloc_obj_t os : netdevs) {
    hwloc_obj_t pci = pciParent(os);
    if (auto it = pci ? verbsOfPci.find(pci) : verbsOfPci.end(); it != verbsOfPci.end()) {
      if (out->nics[it->second].netdev.empty()) out->nics[it->second].netdev = os->name;
      continue;
    }
    Nic n;
    n.name = os->name;
    n.netdev = os->name;
    n.kind = "eth";
    if (pci) {
      n.pciBusId = busIdOf(pci);
      n.numa = numaOfObject(hwloc_get_non_io_ancestor_obj(topo, pci));
    }
    out->nics.push_back(n);
  }
}

}  // namespace

Status nodeFromHwloc(hwloc_topology* topo, bool osDevices, Node* out) {
  if (!topo) return invalidArgument("no hwloc topology");
  const int cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  const int pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
  out->cores = std::max(cores, 0);
  out->cpus = std::max(pus, 0);
  out->numa.clear();
  const int nnuma = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < nnuma; ++i) {
    hwloc_obj_t obj = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i);
    NumaDomain d;
    const unsigned id = obj->os_index != HWLOC_UNKNOWN_INDEX ? obj->os_index : obj->logical_index;
    d.id = static_cast<int>(id);
    d.cpus = cpuList(obj->cpuset);
    d.memoryBytes = obj->attr ? obj->attr->numanode.local_memory : 0;
    out->numa.push_back(d);
  }
  if (osDevices) {
    out->gpus.clear();
    out->nics.clear();
    gpusFromOsDevices(topo, out);
    nicsFromOsDevices(topo, out);
  }
  return OkStatus();
}

int pciNumaDomain(hwloc_topology* topo, const std::string& pciBusId) {
  if (!topo || pciBusId.empty()) return -1;
  hwloc_obj_t pci = hwloc_get_pcidev_by_busidstring(topo, pciBusId.c_str());
  if (!pci) return -1;
  return numaOfObject(hwloc_get_non_io_ancestor_obj(topo, pci));
}

}  // namespace strata::topology
