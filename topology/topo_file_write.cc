// topo_file_write.cc: a Cluster written as a topology file (see topo_file.h). Unknown values
// (0, -1, "") are left out, as the reader takes a left-out value to be unknown.
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>

#include "topology/topo_file.h"

namespace strata::topology {

namespace {

using Json = nlohmann::ordered_json;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Integral values as integers ("80", not "80.0"), others as the shortest exact decimal.
Json number(double v) {
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) return static_cast<int64_t>(v);
  return v;
}

Json gib(uint64_t bytes) { return number(static_cast<double>(bytes) / kGiB); }  // exact: a power of two

Json numaJson(const NumaDomain& d) {
  Json j = {{"id", d.id}};
  if (!d.cpus.empty()) j["cpus"] = d.cpus;
  if (d.memoryBytes) j["memory_GiB"] = gib(d.memoryBytes);
  return j;
}

Json gpuJson(const Gpu& g) {
  Json j = Json::object();
  if (!g.name.empty()) j["name"] = g.name;
  if (!g.pciBusId.empty()) j["pci_bus_id"] = g.pciBusId;
  if (g.numa >= 0) j["numa"] = g.numa;
  if (g.memoryBytes) j["memory_GiB"] = gib(g.memoryBytes);
  if (g.peakTflops > 0) j["peak_tflops"] = number(g.peakTflops);
  if (g.nvlinks) j["nvlinks"] = g.nvlinks;
  if (g.nvswitch) j["nvswitch"] = true;
  if (!g.nvlinkPeers.empty()) j["nvlink_peers"] = g.nvlinkPeers;
  return j;
}

Json nicJson(const Nic& n) {
  Json j = {{"name", n.name}};
  if (!n.netdev.empty()) j["netdev"] = n.netdev;
  if (!n.kind.empty()) j["kind"] = n.kind;
  if (n.port != 1) j["port"] = n.port;
  if (!n.up) j["up"] = false;
  if (n.rateGbps > 0) j["rate_Gbit_s"] = number(n.rateGbps);
  if (!n.pciBusId.empty()) j["pci_bus_id"] = n.pciBusId;
  if (n.numa >= 0) j["numa"] = n.numa;
  if (n.rail >= 0) j["rail"] = n.rail;
  if (!n.ipv4.empty()) j["ipv4"] = n.ipv4;
  return j;
}

Json nodeJson(const Node& n) {
  Json j = {{"hostname", n.hostname}};
  if (n.cores) j["cores"] = n.cores;
  if (n.cpus) j["cpus"] = n.cpus;
  auto list = [&](const char* key, const auto& items, auto toJson) {
    if (items.empty()) return;
    Json a = Json::array();
    for (const auto& x : items) a.push_back(toJson(x));
    j[key] = std::move(a);
  };
  list("numa", n.numa, numaJson);
  list("gpus", n.gpus, gpuJson);
  list("nics", n.nics, nicJson);
  return j;
}

// {"ranks_per_node": k} when ranks fill the nodes in order, k each; else the list.
Json placementJson(const Cluster& c) {
  const size_t nnodes = c.nodes.size();
  if (nnodes && c.rankNode.size() % nnodes == 0) {
    const size_t ppn = c.rankNode.size() / nnodes;
    bool blocked = true;
    for (size_t r = 0; r < c.rankNode.size() && blocked; ++r) blocked = c.rankNode[r] == static_cast<int>(r / ppn);
    if (blocked) return {{"ranks_per_node", ppn}};
  }
  return c.rankNode;
}

}  // namespace

std::string clusterToJson(const Cluster& c) {
  Json j = {{"version", 1}};
  if (c.rails) j["rails"] = c.rails;
  Json classes = Json::object();
  for (int i = 0; i < kLinkClassCount; ++i) {
    if (!c.costFromFile[i]) continue;
    classes[linkClassName(static_cast<LinkClass>(i))] = {{"latency_us", number(c.cost[i].latencyUs)},
                                                          {"bandwidth_GB_s", number(c.cost[i].bandwidthGBps)}};
  }
  if (!classes.empty()) j["link_classes"] = std::move(classes);
  Json nodes = Json::array();
  for (const Node& n : c.nodes) nodes.push_back(nodeJson(n));
  j["nodes"] = std::move(nodes);
  if (!c.rankNode.empty()) j["placement"] = placementJson(c);
  // Invalid UTF-8 in a detected name must not throw: replace it.
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace strata::topology
