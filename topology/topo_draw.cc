// topo_draw.cc: the Graphviz (DOT) picture of a cluster (see topo_draw.h). Only what the model
// knows is drawn: a GPU or NIC without a known NUMA domain has no PCIe edge, a NIC without a
// rail no network edge.
#include "topology/topo_draw.h"

#include <fmt/format.h>

#include "topology/topo_print.h"

namespace strata::topology {

namespace {

// A DOT string literal; "\n" in `s` becomes a centred line break.
std::string quote(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    if (c == '\n') {
      q += "\\n";
      continue;
    }
    q += c;
  }
  return q + "\"";
}

std::string edge(const std::string& a, const std::string& b, LinkClass lc) {
  return fmt::format("  {} -- {} [label={}];\n", a, b, quote(linkClassName(lc)));
}

std::string gib(uint64_t bytes) { return fmt::format("{:.4g} GiB", static_cast<double>(bytes) / (1ull << 30)); }

std::string drawNode(const Cluster& c, size_t k) {
  const Node& n = c.nodes[k];
  const std::string id = fmt::format("n{}", k);
  std::string label = n.hostname;
  if (n.cores || n.cpus) label += fmt::format("\n{} cores, {} threads", n.cores, n.cpus);
  const std::vector<int> ranks = ranksOnNode(c, static_cast<int>(k));
  if (!ranks.empty()) label += "\nranks " + formatRanges(ranks);
  std::string s = fmt::format(" subgraph cluster_{} {{\n  label={}; style=rounded;\n", id, quote(label));
  auto numaId = [&](int numa) { return fmt::format("{}_numa{}", id, numa); };
  auto hasNuma = [&](int numa) {
    for (const NumaDomain& d : n.numa) {
      if (d.id == numa) return true;
    }
    return false;
  };
  for (const NumaDomain& d : n.numa) {
    std::string l = fmt::format("NUMA {}", d.id);
    if (!d.cpus.empty()) l += "\ncpus " + d.cpus;
    if (d.memoryBytes) l += "\n" + gib(d.memoryBytes);
    s += fmt::format("  {} [shape=box, label={}];\n", numaId(d.id), quote(l));
  }
  bool nvswitch = false;
  for (const Gpu& g : n.gpus) nvswitch = nvswitch || g.nvswitch;
  const std::string sw = id + "_nvswitch";
  if (nvswitch) s += fmt::format("  {} [shape=hexagon, label=\"NVSwitch\"];\n", sw);
  for (const Gpu& g : n.gpus) {
    const std::string gid = fmt::format("{}_gpu{}", id, g.index);
    std::string l = fmt::format("GPU {}", g.index);
    if (!g.name.empty()) l += "\n" + g.name;
    if (g.memoryBytes) l += "\n" + gib(g.memoryBytes);
    s += fmt::format("  {} [shape=box, style=filled, fillcolor=\"#c7e9c0\", label={}];\n", gid, quote(l));
    if (g.nvswitch) s += edge(gid, sw, LinkClass::NvLink);
    for (int peer : g.nvlinkPeers) {
      if (peer > g.index) s += edge(gid, fmt::format("{}_gpu{}", id, peer), LinkClass::NvLink);
    }
    if (hasNuma(g.numa)) s += edge(numaId(g.numa), gid, LinkClass::Pcie);
  }
  for (size_t i = 0; i < n.nics.size(); ++i) {
    const Nic& x = n.nics[i];
    std::string l = x.name;
    if (x.kind == "ib" || x.kind == "roce") l += fmt::format(" port {}", x.port);
    std::string what = x.kind;
    if (x.rateGbps > 0) what += fmt::format(" {:g} Gbit/s", x.rateGbps);
    l += "\n" + what + (x.up ? "" : " (down)");
    s += fmt::format("  {}_nic{} [shape=ellipse, style=filled, fillcolor=\"#c6dbef\", label={}];\n", id, i, quote(l));
    if (hasNuma(x.numa)) s += edge(numaId(x.numa), fmt::format("{}_nic{}", id, i), LinkClass::Pcie);
  }
  return s + " }\n";
}

}  // namespace

std::string clusterToDot(const Cluster& c) {
  std::string s = "graph strata {\n";
  // Left to right: NUMA domains, then GPUs and NICs, then NVSwitches and rails, then the spine.
  s += fmt::format(" graph [fontname=\"Helvetica\", rankdir=LR, label={}, labelloc=t];\n",
                   quote("strata topology: " + (c.source.empty() ? std::string("cluster") : c.source)));
  s += " node [fontname=\"Helvetica\", fontsize=10];\n edge [fontname=\"Helvetica\", fontsize=8];\n";
  for (size_t k = 0; k < c.nodes.size(); ++k) s += drawNode(c, k);
  // Rails: one switch each, shared by the NICs on it; with several rails, a spine joins them.
  for (int r = 0; r < c.rails; ++r)
    s += fmt::format(" rail{} [shape=box3d, style=filled, fillcolor=\"#fdd0a2\", label=\"rail {}\"];\n", r, r);
  for (size_t k = 0; k < c.nodes.size(); ++k) {
    const std::vector<Nic>& nics = c.nodes[k].nics;
    for (size_t i = 0; i < nics.size(); ++i) {
      if (nics[i].rail >= 0 && nics[i].rail < c.rails)
        s += edge(fmt::format("n{}_nic{}", k, i), fmt::format("rail{}", nics[i].rail), LinkClass::Rail);
    }
  }
  if (c.rails > 1) {
    s += " spine [shape=box3d, style=filled, fillcolor=\"#fdae6b\", label=\"spine\"];\n";
    for (int r = 0; r < c.rails; ++r) s += edge(fmt::format("rail{}", r), "spine", LinkClass::CrossRail);
  }
  std::string legend = "link classes (latency, GB/s per direction)\\l";
  for (int i = 0; i < kLinkClassCount; ++i) {
    legend += fmt::format("{}: {:g} us, {:g} GB/s\\l", linkClassName(static_cast<LinkClass>(i)), c.cost[i].latencyUs,
                          c.cost[i].bandwidthGBps);
  }
  s += fmt::format(" legend [shape=note, fontsize=9, label=\"{}\"];\n", legend);  // \l: left-justified lines
  return s + "}\n";
}

}  // namespace strata::topology
