// topo_print.cc: the human-readable description of a cluster (see topo_print.h). Unknown values
// are left out rather than shown as zeros; nodes with the same hardware as an earlier one are
// summarised in one line.
#include "topology/topo_print.h"

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (in format.h before fmt 11)

#include <map>

namespace strata::topology {

namespace {

std::string gib(uint64_t bytes) { return fmt::format("{:.4g} GiB", static_cast<double>(bytes) / (1ull << 30)); }

void join(std::string* out, const std::string& part) {
  if (part.empty()) return;
  if (!out->empty()) *out += ", ";
  *out += part;
}

std::string gpuLine(const Gpu& g) {
  std::string s;
  join(&s, g.name.empty() ? "unnamed" : g.name);
  if (g.memoryBytes) join(&s, gib(g.memoryBytes));
  if (g.peakTflops > 0) join(&s, fmt::format("{:g} TFLOPS", g.peakTflops));
  if (!g.pciBusId.empty()) join(&s, "pci " + g.pciBusId);
  if (g.numa >= 0) join(&s, fmt::format("numa {}", g.numa));
  if (g.nvswitch) {
    join(&s, fmt::format("NVLink: {} links to NVSwitch", g.nvlinks));
  } else if (!g.nvlinkPeers.empty()) {
    join(&s, fmt::format("NVLink: {} links to GPU {}", g.nvlinks, fmt::join(g.nvlinkPeers, ", ")));
  } else if (g.nvlinks) {
    join(&s, fmt::format("NVLink: {} links", g.nvlinks));
  } else {
    join(&s, "no NVLink");
  }
  return fmt::format("    gpu {}: {}\n", g.index, s);
}

std::string nicLine(const Nic& n) {
  std::string s;
  join(&s, n.kind.empty() ? "kind unknown" : n.kind);
  join(&s, n.rateGbps > 0 ? fmt::format("{:g} Gbit/s", n.rateGbps) : "rate unknown");
  join(&s, n.up ? "up" : "down");
  join(&s, n.rail >= 0 ? fmt::format("rail {}", n.rail) : "no rail");
  if (!n.netdev.empty() && n.netdev != n.name) join(&s, "netdev " + n.netdev);
  if (!n.ipv4.empty()) join(&s, n.ipv4);
  if (!n.pciBusId.empty()) join(&s, "pci " + n.pciBusId);
  if (n.numa >= 0) join(&s, fmt::format("numa {}", n.numa));
  const std::string port = n.kind == "ib" || n.kind == "roce" ? fmt::format(" port {}", n.port) : "";
  return fmt::format("    nic {}{}: {}\n", n.name, port, s);
}

// Everything about a node but its name and source: equal bodies mean the same hardware.
std::string nodeBody(const Node& n) {
  std::string s;
  std::string cpu;
  if (n.cores) join(&cpu, fmt::format("{} cores", n.cores));
  if (n.cpus) join(&cpu, fmt::format("{} hardware threads", n.cpus));
  s += fmt::format("    cpus: {}\n", cpu.empty() ? "unknown" : cpu);
  for (const NumaDomain& d : n.numa) {
    std::string parts;
    if (!d.cpus.empty()) join(&parts, "cpus " + d.cpus);
    if (d.memoryBytes) join(&parts, gib(d.memoryBytes));
    s += fmt::format("    numa {}: {}\n", d.id, parts.empty() ? "-" : parts);
  }
  if (n.gpus.empty()) s += "    gpus: none\n";
  for (const Gpu& g : n.gpus) s += gpuLine(g);
  if (n.nics.empty()) s += "    nics: none\n";
  for (const Nic& x : n.nics) s += nicLine(x);
  return s;
}

}  // namespace

std::string formatRanges(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += j == i ? fmt::format("{}", v[i]) : fmt::format("{}-{}", v[i], v[j]);
    i = j + 1;
  }
  return s;
}

std::vector<int> ranksOnNode(const Cluster& c, int k) {
  std::vector<int> ranks;
  for (size_t r = 0; r < c.rankNode.size(); ++r) {
    if (c.rankNode[r] == k) ranks.push_back(static_cast<int>(r));
  }
  return ranks;
}

std::string describeCluster(const Cluster& c) {
  std::string s = fmt::format("cluster: {} node{}", c.nodes.size(), c.nodes.size() == 1 ? "" : "s");
  s += c.rails ? fmt::format(", {} rail{}", c.rails, c.rails == 1 ? "" : "s") : ", rails unknown";
  if (!c.rankNode.empty()) s += fmt::format(", {} ranks placed", c.rankNode.size());
  if (!c.source.empty()) s += " (" + c.source + ")";
  s += "\n";
  std::map<std::string, size_t> firstWithBody;
  for (size_t k = 0; k < c.nodes.size(); ++k) {
    const Node& n = c.nodes[k];
    const std::vector<int> ranks = ranksOnNode(c, static_cast<int>(k));
    std::string head = fmt::format("  node {}: {}", k, n.hostname.empty() ? "(no name)" : n.hostname);
    if (!ranks.empty()) head += fmt::format(", ranks {}", formatRanges(ranks));
    const std::string body = nodeBody(n);
    auto [it, first] = firstWithBody.emplace(body, k);
    if (!first) {
      s += fmt::format("{}: same hardware as node {}\n", head, it->second);
      continue;
    }
    if (!n.source.empty()) head += " [" + n.source + "]";
    s += head + "\n" + body;
  }
  s += "  link classes (latency, bandwidth per direction):\n";
  for (int i = 0; i < kLinkClassCount; ++i) {
    const LinkCost& lc = c.cost[i];
    s += fmt::format("    {:<13} {:>7g} us {:>9g} GB/s  {}\n", linkClassName(static_cast<LinkClass>(i)), lc.latencyUs,
                     lc.bandwidthGBps, c.costFromFile[i] ? "(file)" : "(default)");
  }
  return s;
}

}  // namespace strata::topology
