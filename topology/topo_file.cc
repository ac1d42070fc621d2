// topo_file.cc: reading cluster topology files into a Cluster, with every error naming the file
// and the JSON path (see topo_file.h for the schema).
#include "topology/topo_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (in format.h before fmt 11)

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "topology/detect.h"
#include "topology/json_fields.h"

namespace strata::topology {

namespace {

using jsonf::Json;
using jsonf::element;
using jsonf::errorAt;
using jsonf::member;

constexpr int kVersion = 1;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// What a few bytes of file may make the reader allocate: "count" and every {"type": ...} entry
// copy a node type, and "ranks_per_node" places that many ranks on every node. 256 MiB of nodes
// is some 80000 nodes of 8 GPUs and 8 NICs.
constexpr uint64_t kMaxNodeBytes = uint64_t{256} << 20;
constexpr int64_t kMaxPlacedRanks = int64_t{1} << 22;  // as many ranks as a rendezvous takes

// A node's size in memory, roughly (what a copy of it costs).
uint64_t nodeBytes(const Node& n) {
  uint64_t b = sizeof(Node) + n.hostname.size() + n.source.size();
  for (const NumaDomain& d : n.numa) b += sizeof(d) + d.cpus.size();
  for (const Gpu& g : n.gpus) b += sizeof(g) + g.name.size() + g.pciBusId.size() + g.nvlinkPeers.size() * sizeof(int);
  for (const Nic& c : n.nics)
    b += sizeof(c) + c.name.size() + c.netdev.size() + c.kind.size() + c.pciBusId.size() + c.ipv4.size();
  return b;
}

uint64_t bytesOfGiB(double gib) { return static_cast<uint64_t>(std::llround(gib * kGiB)); }

struct Reader {
  std::string name;     // the file, for messages and sources
  std::string baseDir;  // resolves relative hwloc_xml paths
  int rails = 0;
  std::map<std::string, Node> types;
};

Status readMemory(const Json& obj, const std::string& path, uint64_t* bytes) {
  double gib = -1;
  STRATA_RETURN_IF_ERROR(jsonf::optNumber(obj, path, "memory_GiB", &gib, 0));
  if (gib >= 0) *bytes = bytesOfGiB(gib);
  return OkStatus();
}

Status readPciBusId(const Json& obj, const std::string& path, std::string* out) {
  std::string id;
  STRATA_RETURN_IF_ERROR(jsonf::optString(obj, path, "pci_bus_id", &id));
  if (id.empty()) return OkStatus();
  *out = normalizePciBusId(id);
  if (out->empty())
    return errorAt(member(path, "pci_bus_id"), fmt::format("\"{}\" is not a PCI address (dddd:bb:dd.f)", id));
  return OkStatus();
}

Status readNuma(const Json& v, const std::string& path, int position, NumaDomain* d) {
  STRATA_RETURN_IF_ERROR(jsonf::expectObject(v, path));
  STRATA_RETURN_IF_ERROR(jsonf::checkKeys(v, path, {"id", "cpus", "memory_GiB"}));
  d->id = position;
  STRATA_RETURN_IF_ERROR(jsonf::optInt(v, path, "id", &d->id, 0));
  STRATA_RETURN_IF_ERROR(jsonf::optString(v, path, "cpus", &d->cpus));
  return readMemory(v, path, &d->memoryBytes);
}

Status readGpu(const Json& v, const std::string& path, int index, Gpu* g) {
  STRATA_RETURN_IF_ERROR(jsonf::expectObject(v, path));
  STRATA_RETURN_IF_ERROR(jsonf::checkKeys(
      v, path, {"name", "pci_bus_id", "numa", "memory_GiB", "peak_tflops", "nvlinks", "nvswitch", "nvlink_peers"}));
  g->index = index;
  STRATA_RETURN_IF_ERROR(jsonf::optString(v, path, "name", &g->name));
  STRATA_RETURN_IF_ERROR(readPciBusId(v, path, &g->pciBusId));
  STRATA_RETURN_IF_ERROR(jsonf::optInt(v, path, "numa", &g->numa, -1));
  STRATA_RETURN_IF_ERROR(readMemory(v, path, &g->memoryBytes));
  STRATA_RETURN_IF_ERROR(jsonf::optNumber(v, path, "peak_tflops", &g->peakTflops, 0));
  STRATA_RETURN_IF_ERROR(jsonf::optInt(v, path, "nvlinks", &g->nvlinks, 0));
  STRATA_RETURN_IF_ERROR(jsonf::optBool(v, path, "nvswitch", &g->nvswitch));
  if (auto it = v.find("nvlink_peers"); it != v.end()) {
    const std::string pp = member(path, "nvlink_peers");
    STRATA_RETURN_IF_ERROR(jsonf::expectArray(*it, pp));
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& peer = (*it)[i];
      if (!peer.is_number_integer() || peer.get<int64_t>() < 0)
        return errorAt(element(pp, i), fmt::format("expected a GPU index, got {}", jsonf::describe(peer)));
      g->nvlinkPeers.push_back(static_cast<int>(peer.get<int64_t>()));
    }
  }
  return OkStatus();
}

Status readNic(const Json& v, const std::string& path, const Reader& r, Nic* n) {
  STRATA_RETURN_IF_ERROR(jsonf::expectObject(v, path));
  STRATA_RETURN_IF_ERROR(jsonf::checkKeys(
      v, path, {"name", "netdev", "kind", "port", "up", "rate_Gbit_s", "pci_bus_id", "numa", "rail", "ipv4"}));
  STRATA_RETURN_IF_ERROR(jsonf::require(v, path, "name"));
  STRATA_RETURN_IF_ERROR(jsonf::optString(v, path, "name", &n->name));
  STRATA_RETURN_IF_ERROR(jsonf::optString(v, path, "netdev", &n->netdev));
  STRATA_RETURN_IF_ERROR(jsonf::optString(v, path, "kind", &n->kind));
  if (v.contains("kind") && n->kind != "ib" && n->kind != "roce" && n->kind != "eth")
    return errorAt(member(path, "kind"), fmt::format("\"{}\" is not one of ib, roce, eth", n->kind));
  STRATA_RETURN_IF_ERROR(jsonf::optInt(v, path, "port", &n->port, 1));
  n->up = true;  // a file describes the machine as it should be
  STRATA_RETURN_IF_ERROR(jsonf::optBool(v, path, "up", &n->up));
  STRATA_RETURN_IF_ERROR(jsonf::optNumber(v, path, "rate_Gbit_s", &n->rateGbps, 0));
  STRATA_RETURN_IF_ERROR(readPciBusId(v, path, &n->pciBusId));
  STRATA_RETURN_IF_ERROR(jsonf::optInt(v, path, "numa", &n->numa, -1));
  STRATA_RETURN_IF_ERROR(jsonf::optInt(v, path, "rail", &n->rail, -1));
  if (n->rail >= r.rails) {
    return errorAt(member(path, "rail"),
                   r.rails == 0 ? fmt::format("rail {} does not exist (the file declares no \"rails\")", n->rail)
                                : fmt::format("rail {} does not exist (the file declares {} rails: 0 .. {})", n->rail,
                                              r.rails, r.rails - 1));
  }
  STRATA_RETURN_IF_ERROR(jsonf::optString(v, path, "ipv4", &n->ipv4));
  return OkStatus();
}

template <typename T, typename F>
Status readList(const Json& obj, const std::string& path, const char* key, std::vector<T>* out, F readOne) {
  auto it = obj.find(key);
  if (it == obj.end()) return OkStatus();
  const std::string lp = member(path, key);
  STRATA_RETURN_IF_ERROR(jsonf::expectArray(*it, lp));
  out->clear();
  for (size_t i = 0; i < it->size(); ++i) {
    T item;
    STRATA_RETURN_IF_ERROR(readOne((*it)[i], element(lp, i), static_cast<int>(i), &item));
    out->push_back(std::move(item));
  }
  return OkStatus();
}

// Applies the description keys of `obj` to `node`: hwloc_xml first, then each key present
// replaces what it names.
Status applyDescription(const Json& obj, const std::string& path, const Reader& r, Node* node) {
  if (auto it = obj.find("hwloc_xml"); it != obj.end()) {
    const std::string xp = member(path, "hwloc_xml");
    if (!it->is_string()) return errorAt(xp, fmt::format("expected a file name, got {}", jsonf::describe(*it)));
    std::filesystem::path xml(it->get<std::string>());
    if (xml.is_relative()) xml = std::filesystem::path(r.baseDir) / xml;
    Node fromXml;
    Status st = loadHwlocXml(xml.string(), &fromXml);
    if (!st.ok()) return errorAt(xp, st.message());
    fromXml.hostname = node->hostname.empty() ? fromXml.hostname : node->hostname;
    *node = std::move(fromXml);
  }
  STRATA_RETURN_IF_ERROR(jsonf::optInt(obj, path, "cores", &node->cores, 0));
  STRATA_RETURN_IF_ERROR(jsonf::optInt(obj, path, "cpus", &node->cpus, 0));
  STRATA_RETURN_IF_ERROR(readList(obj, path, "numa", &node->numa, readNuma));
  STRATA_RETURN_IF_ERROR(readList(obj, path, "gpus", &node->gpus, readGpu));
  auto nic = [&](const Json& v, const std::string& p, int, Nic* n) { return readNic(v, p, r, n); };
  STRATA_RETURN_IF_ERROR(readList(obj, path, "nics", &node->nics, nic));
  return OkStatus();
}

// Cross-references inside a finished node: NUMA ids unique and referenced ones present, NVLink
// peers naming other GPUs of the node.
Status checkNode(const Node& n, const std::string& path) {
  std::set<int> ids;
  for (size_t i = 0; i < n.numa.size(); ++i) {
    if (!ids.insert(n.numa[i].id).second)
      return errorAt(element(member(path, "numa"), i), fmt::format("NUMA domain {} is listed twice", n.numa[i].id));
  }
  auto numaOk = [&](int id) { return id < 0 || ids.count(id) > 0; };
  auto known = [&] { return ids.empty() ? std::string("none") : fmt::format("{}", fmt::join(ids, ", ")); };
  for (size_t i = 0; i < n.gpus.size(); ++i) {
    const Gpu& g = n.gpus[i];
    const std::string gp = element(member(path, "gpus"), i);
    if (!numaOk(g.numa))
      return errorAt(member(gp, "numa"),
                     fmt::format("NUMA domain {} does not exist on this node (domains: {})", g.numa, known()));
    for (int peer : g.nvlinkPeers) {
      if (peer >= static_cast<int>(n.gpus.size()) || peer == g.index)
        return errorAt(member(gp, "nvlink_peers"),
                       fmt::format("GPU {} is not another GPU of this node (it has {})", peer, n.gpus.size()));
    }
  }
  for (size_t i = 0; i < n.nics.size(); ++i) {
    if (!numaOk(n.nics[i].numa))
      return errorAt(member(element(member(path, "nics"), i), "numa"),
                     fmt::format("NUMA domain {} does not exist on this node (domains: {})", n.nics[i].numa, known()));
  }
  return OkStatus();
}

Status readLinkClasses(const Json& doc, Cluster* c) {
  auto it = doc.find("link_classes");
  if (it == doc.end()) return OkStatus();
  STRATA_RETURN_IF_ERROR(jsonf::expectObject(*it, "link_classes"));
  for (auto e = it->begin(); e != it->end(); ++e) {
    LinkClass lc;
    if (!parseLinkClass(e.key(), &lc)) {
      std::vector<std::string> names;
      for (int i = 0; i < kLinkClassCount; ++i) names.push_back(linkClassName(static_cast<LinkClass>(i)));
      return errorAt("link_classes",
                     fmt::format("unknown link class \"{}\" (expected one of: {})", e.key(), fmt::join(names, ", ")));
    }
    const std::string p = member("link_classes", e.key());
    STRATA_RETURN_IF_ERROR(jsonf::expectObject(e.value(), p));
    STRATA_RETURN_IF_ERROR(jsonf::checkKeys(e.value(), p, {"latency_us", "bandwidth_GB_s"}));
    LinkCost cost = defaultLinkCost(lc);
    STRATA_RETURN_IF_ERROR(jsonf::optNumber(e.value(), p, "latency_us", &cost.latencyUs, 0));
    STRATA_RETURN_IF_ERROR(jsonf::optNumber(e.value(), p, "bandwidth_GB_s", &cost.bandwidthGBps, 0, true));
    c->cost[static_cast<int>(lc)] = cost;
    c->costFromFile[static_cast<int>(lc)] = true;
  }
  return OkStatus();
}

Status readNodeTypes(const Json& doc, Reader* r) {
  auto it = doc.find("node_types");
  if (it == doc.end()) return OkStatus();
  STRATA_RETURN_IF_ERROR(jsonf::expectObject(*it, "node_types"));
  for (auto t = it->begin(); t != it->end(); ++t) {
    const std::string p = member("node_types", t.key());
    STRATA_RETURN_IF_ERROR(jsonf::expectObject(t.value(), p));
    STRATA_RETURN_IF_ERROR(
        jsonf::checkKeys(t.value(), p, {"description", "hwloc_xml", "cores", "cpus", "numa", "gpus", "nics"}));
    std::string ignored;
    STRATA_RETURN_IF_ERROR(jsonf::optString(t.value(), p, "description", &ignored));
    Node n;
    STRATA_RETURN_IF_ERROR(applyDescription(t.value(), p, *r, &n));
    STRATA_RETURN_IF_ERROR(checkNode(n, p));
    r->types[t.key()] = std::move(n);
  }
  return OkStatus();
}

Status nodeOfType(const Reader& r, const Json& typeName, const std::string& path, Node* out) {
  if (!typeName.is_string())
    return errorAt(path, fmt::format("expected a node type name, got {}", jsonf::describe(typeName)));
  auto t = r.types.find(typeName.get<std::string>());
  if (t == r.types.end()) {
    std::vector<std::string> names;
    for (const auto& [k, v] : r.types) names.push_back(k);
    return errorAt(path, fmt::format("no node type \"{}\" in node_types (types: {})", typeName.get<std::string>(),
                                     names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
  }
  *out = t->second;
  return OkStatus();
}

Status readNodes(const Json& doc, const Reader& r, Cluster* c) {
  STRATA_RETURN_IF_ERROR(jsonf::require(doc, "", "nodes"));
  const Json& nodes = doc["nodes"];
  const std::string source = "file " + r.name;
  if (nodes.is_object()) {  // {"count": N, "type": T, "hostname_prefix": P}
    STRATA_RETURN_IF_ERROR(jsonf::checkKeys(nodes, "nodes", {"count", "type", "hostname_prefix"}));
    STRATA_RETURN_IF_ERROR(jsonf::require(nodes, "nodes", "count"));
    STRATA_RETURN_IF_ERROR(jsonf::require(nodes, "nodes", "type"));
    int count = 0;
    std::string prefix = "node";
    STRATA_RETURN_IF_ERROR(jsonf::optInt(nodes, "nodes", "count", &count, 1, 1 << 20));
    STRATA_RETURN_IF_ERROR(jsonf::optString(nodes, "nodes", "hostname_prefix", &prefix));
    Node base;
    STRATA_RETURN_IF_ERROR(nodeOfType(r, nodes["type"], "nodes.type", &base));
    const uint64_t each = nodeBytes(base) + prefix.size() + 8;
    if (static_cast<uint64_t>(count) * each > kMaxNodeBytes)
      return errorAt("nodes.count", fmt::format("{} nodes of this type would take about {} MiB (at most {} MiB): "
                                                "describe fewer nodes or a smaller type",
                                                count, static_cast<uint64_t>(count) * each >> 20, kMaxNodeBytes >> 20));
    c->nodes.reserve(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
      c->nodes.push_back(base);
      c->nodes.back().hostname = prefix + std::to_string(i);
      c->nodes.back().source = source;
    }
    return OkStatus();
  }
  STRATA_RETURN_IF_ERROR(jsonf::expectArray(nodes, "nodes"));
  if (nodes.empty()) return errorAt("nodes", "the cluster has no nodes");
  std::map<std::string, size_t> seen;
  uint64_t bytes = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string p = element("nodes", i);
    const Json& e = nodes[i];
    STRATA_RETURN_IF_ERROR(jsonf::expectObject(e, p));
    STRATA_RETURN_IF_ERROR(
        jsonf::checkKeys(e, p, {"hostname", "type", "hwloc_xml", "cores", "cpus", "numa", "gpus", "nics"}));
    Node n;
    if (e.contains("type")) STRATA_RETURN_IF_ERROR(nodeOfType(r, e["type"], member(p, "type"), &n));
    STRATA_RETURN_IF_ERROR(jsonf::optString(e, p, "hostname", &n.hostname));
    STRATA_RETURN_IF_ERROR(applyDescription(e, p, r, &n));
    if (n.hostname.empty()) n.hostname = "node" + std::to_string(i);
    if ((bytes += nodeBytes(n)) > kMaxNodeBytes)
      return errorAt(p, fmt::format("the nodes up to here take about {} MiB (at most {} MiB)", bytes >> 20,
                                    kMaxNodeBytes >> 20));
    if (auto [it, fresh] = seen.emplace(n.hostname, i); !fresh)
      return errorAt(member(p, "hostname"),
                     fmt::format("\"{}\" is already the name of nodes[{}]", n.hostname, it->second));
    STRATA_RETURN_IF_ERROR(checkNode(n, p));
    n.source = e.contains("hwloc_xml") ? source + " (hwloc_xml)" : source;
    c->nodes.push_back(std::move(n));
  }
  return OkStatus();
}

Status readPlacement(const Json& doc, Cluster* c) {
  auto it = doc.find("placement");
  if (it == doc.end()) return OkStatus();
  const int nnodes = static_cast<int>(c->nodes.size());
  if (it->is_object()) {
    STRATA_RETURN_IF_ERROR(jsonf::checkKeys(*it, "placement", {"ranks_per_node"}));
    STRATA_RETURN_IF_ERROR(jsonf::require(*it, "placement", "ranks_per_node"));
    int ppn = 0;
    STRATA_RETURN_IF_ERROR(jsonf::optInt(*it, "placement", "ranks_per_node", &ppn, 1, 1 << 20));
    if (static_cast<int64_t>(nnodes) * ppn > kMaxPlacedRanks)
      return errorAt("placement.ranks_per_node", fmt::format("{} nodes x {} ranks per node is more than {} ranks",
                                                             nnodes, ppn, kMaxPlacedRanks));
    for (int k = 0; k < nnodes; ++k) c->rankNode.insert(c->rankNode.end(), ppn, k);
    return OkStatus();
  }
  if (!it->is_array())
    return errorAt("placement", fmt::format("expected {{\"ranks_per_node\": N}} or a list of nodes, got {}",
                                            jsonf::describe(*it)));
  if (it->empty()) return errorAt("placement", "no ranks placed");
  for (size_t r = 0; r < it->size(); ++r) {
    const Json& v = (*it)[r];
    const std::string p = element("placement", r);
    int node = -1;
    if (v.is_string()) {
      for (int k = 0; k < nnodes; ++k) {
        if (c->nodes[k].hostname == v.get<std::string>()) node = k;
      }
      if (node < 0) return errorAt(p, fmt::format("no node named {}", v.dump()));
    } else if (v.is_number_integer()) {
      const int64_t k = v.get<int64_t>();
      if (v.is_number_unsigned() ? v.get<uint64_t>() >= static_cast<uint64_t>(nnodes) : k < 0 || k >= nnodes)
        return errorAt(p, fmt::format("node {} does not exist (the cluster has {} nodes: 0 .. {})", v.dump(), nnodes,
                                      nnodes - 1));
      node = static_cast<int>(k);
    } else {
      return errorAt(p, fmt::format("expected a node index or hostname, got {}", jsonf::describe(v)));
    }
    c->rankNode.push_back(node);
  }
  return OkStatus();
}

Status readCluster(const Json& doc, Reader* r, Cluster* c) {
  STRATA_RETURN_IF_ERROR(jsonf::expectObject(doc, ""));
  STRATA_RETURN_IF_ERROR(jsonf::checkKeys(
      doc, "", {"version", "description", "rails", "link_classes", "node_types", "nodes", "placement"}));
  STRATA_RETURN_IF_ERROR(jsonf::require(doc, "", "version"));
  int version = 0;
  STRATA_RETURN_IF_ERROR(jsonf::optInt(doc, "", "version", &version, kVersion, kVersion));
  std::string ignored;
  STRATA_RETURN_IF_ERROR(jsonf::optString(doc, "", "description", &ignored));
  STRATA_RETURN_IF_ERROR(jsonf::optInt(doc, "", "rails", &r->rails, 0, 1 << 16));
  c->rails = r->rails;
  STRATA_RETURN_IF_ERROR(readLinkClasses(doc, c));
  STRATA_RETURN_IF_ERROR(readNodeTypes(doc, r));
  STRATA_RETURN_IF_ERROR(readNodes(doc, *r, c));
  return readPlacement(doc, c);
}

}  // namespace

Status parseTopologyJson(const std::string& text, const std::string& name, const std::string& baseDir,
                         Cluster* out) {
  Json doc;
  STRATA_RETURN_IF_ERROR(jsonf::parse(text, name, &doc));
  Reader r;
  r.name = name;
  r.baseDir = baseDir;
  Cluster c;
  Status st;
  try {  // the readers check types before every access; this is a net, not a path
    st = readCluster(doc, &r, &c);
  } catch (const std::exception& e) {
    st = internalError("{}", e.what());
  }
  if (!st.ok()) return Status(st.code(), name + ": " + st.message());
  c.applyDefaultCosts();
  c.source = name;
  *out = std::move(c);
  return OkStatus();
}

Status loadTopologyFile(const std::string& path, Cluster* out) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return invalidArgument("topology file {} is a directory", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return invalidArgument("cannot open topology file {}: {}", path, std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return systemError("cannot read topology file {}", path);
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return parseTopologyJson(text.str(), path, dir.empty() ? "." : dir, out);
}

}  // namespace strata::topology
