// detect.cc: a Node from this machine (hwloc + NVML + sysfs), from an hwloc XML export or from an
// hwloc synthetic description (see detect.h).
#include "topology/detect.h"

#include <hwloc.h>

#include <fmt/format.h>

#include "topology/host_identity.h"

namespace strata::topology {

namespace {

// Owns an hwloc topology for the length of one detection.
class Topology {
 public:
  Topology() { ok_ = hwloc_topology_init(&t_) == 0; }
  ~Topology() {
    if (ok_) hwloc_topology_destroy(t_);
  }
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;
  bool ok() const { return ok_; }
  hwloc_topology_t get() const { return t_; }

 private:
  hwloc_topology_t t_ = nullptr;
  bool ok_ = false;
};

// "hwloc 2.9.0": the release hwloc records on the root object (its API version differs).
std::string hwlocVersion(hwloc_topology_t topo) {
  hwloc_obj_t root = hwloc_get_root_obj(topo);
  const char* v = root ? hwloc_obj_get_info_by_name(root, "hwlocVersion") : nullptr;
  return std::string("hwloc ") + (v ? v : "2");
}

// Loads `topo` with PCI and OS devices (GPUs, NICs) kept, bridges pruned.
Status loadWithIo(Topology& topo, const std::string& what) {
  if (!topo.ok()) return systemError("hwloc: cannot initialise a topology");
  hwloc_topology_set_io_types_filter(topo.get(), HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(topo.get()) != 0) return systemError("hwloc: cannot load {}", what);
  return OkStatus();
}

}  // namespace

Status detectLocalNode(Node* out) {
  *out = Node();
  Topology topo;
  STRATA_RETURN_IF_ERROR(loadWithIo(topo, "this machine's topology"));
  STRATA_RETURN_IF_ERROR(nodeFromHwloc(topo.get(), /*osDevices=*/false, out));
  out->hostname = hostName();
  out->source = "detected (" + hwlocVersion(topo.get()) + ")";
  STRATA_RETURN_IF_ERROR(detectNvmlGpus(&out->gpus));
  out->nics = scanSysfsNics("/sys", interfaceIpv4());
  for (Gpu& g : out->gpus) g.numa = pciNumaDomain(topo.get(), g.pciBusId);
  for (Nic& n : out->nics) n.numa = pciNumaDomain(topo.get(), n.pciBusId);
  return OkStatus();
}

Status loadHwlocXml(const std::string& path, Node* out) {
  *out = Node();
  Topology topo;
  if (!topo.ok()) return systemError("hwloc: cannot initialise a topology");
  if (hwloc_topology_set_xml(topo.get(), path.c_str()) != 0)
    return invalidArgument("{}: not a readable hwloc XML file", path);
  STRATA_RETURN_IF_ERROR(loadWithIo(topo, fmt::format("the hwloc XML file {}", path)));
  STRATA_RETURN_IF_ERROR(nodeFromHwloc(topo.get(), /*osDevices=*/true, out));
  hwloc_obj_t root = hwloc_get_root_obj(topo.get());
  if (const char* host = root ? hwloc_obj_get_info_by_name(root, "HostName") : nullptr) out->hostname = host;
  out->source = "hwloc-xml " + path;
  return OkStatus();
}

Status loadHwlocSynthetic(const std::string& description, Node* out) {
  *out = Node();
  Topology topo;
  if (!topo.ok()) return systemError("hwloc: cannot initialise a topology");
  if (hwloc_topology_set_synthetic(topo.get(), description.c_str()) != 0)
    return invalidArgument("'{}' is not an hwloc synthetic topology", description);
  STRATA_RETURN_IF_ERROR(loadWithIo(topo, fmt::format("the synthetic topology '{}'", description)));
  STRATA_RETURN_IF_ERROR(nodeFromHwloc(topo.get(), /*osDevices=*/true, out));
  out->source = "hwloc-synthetic " + description;
  return OkStatus();
}

}  // namespace strata::topology
