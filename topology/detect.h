// detect.h: what one node looks like, found out rather than declared. hwloc gives cores, hardware
// threads, NUMA domains and the NUMA locality of PCI devices; NVML (loaded with dlopen, optional)
// gives GPUs and their NVLinks; sysfs gives RDMA devices and network interfaces. Nothing is
// invented: a value that cannot be found stays 0, -1 or "" (see model.h), and a missing NVML or
// GPU driver means zero GPUs, not an error.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "topology/model.h"
#include "transport/status.h"

struct hwloc_topology;  // hwloc's hwloc_topology_t is `struct hwloc_topology*`

namespace strata::topology {

/// Detects this machine: hwloc (with PCI discovery), NVML GPUs, sysfs NICs, the hostname.
/// Fails only when hwloc cannot describe the machine at all.
Status detectLocalNode(Node* out);

/// The same extraction from an hwloc XML export of one node (`lstopo node.xml`). There is no NVML
/// there: GPUs come from the XML's GPU / co-processor OS devices, NICs from its network and
/// OpenFabrics OS devices (rates are not in hwloc's XML and stay unknown).
Status loadHwlocXml(const std::string& path, Node* out);

/// From an hwloc synthetic description such as "pack:2 numa:1 core:4 pu:2" (tests, examples).
Status loadHwlocSynthetic(const std::string& description, Node* out);

/// Fills cores, cpus and NUMA domains from a loaded topology; with `osDevices`, also GPUs and
/// NICs from its OS devices (the XML path; live detection asks NVML and sysfs instead).
Status nodeFromHwloc(hwloc_topology* topo, bool osDevices, Node* out);

/// The NUMA domain (OS index) nearest the PCI device "dddd:bb:dd.f", or -1 when hwloc does not
/// know the device or its locality spans several domains.
int pciNumaDomain(hwloc_topology* topo, const std::string& pciBusId);

/// GPUs through NVML: name, PCI bus id, memory, active NVLinks and whether they reach NVSwitches
/// or GPUs directly. No libnvidia-ml.so.1, or nvmlInit failing (no driver): empty and ok.
Status detectNvmlGpus(std::vector<Gpu>* out);

/// NICs from a sysfs tree rooted at `sysRoot` ("/sys"; tests pass a fake tree): every port of
/// every RDMA device in class/infiniband ("ib" or "roce" by link layer, its netdev, state, rate),
/// then every other interface in class/net except loopback ("eth", operstate, speed).
/// `ipv4ByInterface` (see interfaceIpv4) fills Nic::ipv4 by netdev name.
std::vector<Nic> scanSysfsNics(const std::string& sysRoot,
                               const std::map<std::string, std::string>& ipv4ByInterface);

/// The first IPv4 address of each network interface (getifaddrs).
std::map<std::string, std::string> interfaceIpv4();

/// "00000000:18:00.0" or "0000:18:00.0" (any case) -> "0000:18:00.0"; "" when it is not one.
std::string normalizePciBusId(const std::string& id);

}  // namespace strata::topology
