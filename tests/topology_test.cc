// topology_test.cc: the topology model (link classes, default costs), topology files (the shipped
// examples, round trips, every kind of bad file with the message it must give), detection (this
// machine, synthetic hwloc topologies, hwloc XML, a fake sysfs tree of NICs) and strata-topo.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <hwloc.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/subprocess.h"
#include "topology/detect.h"
#include "topology/topo_draw.h"
#include "topology/topo_file.h"
#include "topology/topo_print.h"

using namespace strata;
using namespace strata::topology;
namespace fs = std::filesystem;

#ifndef TOPO_FILES_DIR
#error "TOPO_FILES_DIR (topology/files) comes from tests/CMakeLists.txt"
#endif

namespace {

std::string examplePath(const std::string& name) { return std::string(TOPO_FILES_DIR) + "/" + name; }

constexpr uint64_t kGiB = 1ull << 30;

// A fresh directory under the test temp dir, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "strata-topo-XXXXXX";
    path_ = mkdtemp(tmpl.data()) ? tmpl : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void writeText(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Parses `text` as a topology file named bad.json, expecting failure; returns the message.
std::string parseError(const std::string& text) {
  Cluster c;
  Status st = parseTopologyJson(text, "bad.json", ".", &c);
  EXPECT_FALSE(st.ok()) << text;
  return st.message();
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "message: " << (haystack)

// Everything but the sources.
void expectSameCluster(const Cluster& a, const Cluster& b) {
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  EXPECT_EQ(a.rails, b.rails);
  EXPECT_EQ(a.rankNode, b.rankNode);
  for (int i = 0; i < kLinkClassCount; ++i) {
    EXPECT_EQ(a.costFromFile[i], b.costFromFile[i]) << linkClassName(static_cast<LinkClass>(i));
    EXPECT_DOUBLE_EQ(a.cost[i].latencyUs, b.cost[i].latencyUs);
    EXPECT_DOUBLE_EQ(a.cost[i].bandwidthGBps, b.cost[i].bandwidthGBps);
  }
  for (size_t k = 0; k < a.nodes.size(); ++k) {
    const Node &x = a.nodes[k], &y = b.nodes[k];
    EXPECT_EQ(x.hostname, y.hostname);
    EXPECT_EQ(x.cores, y.cores);
    EXPECT_EQ(x.cpus, y.cpus);
    ASSERT_EQ(x.numa.size(), y.numa.size());
    for (size_t i = 0; i < x.numa.size(); ++i) {
      EXPECT_EQ(x.numa[i].id, y.numa[i].id);
      EXPECT_EQ(x.numa[i].cpus, y.numa[i].cpus);
      EXPECT_EQ(x.numa[i].memoryBytes, y.numa[i].memoryBytes);
    }
    ASSERT_EQ(x.gpus.size(), y.gpus.size());
    for (size_t i = 0; i < x.gpus.size(); ++i) {
      const Gpu &g = x.gpus[i], &h = y.gpus[i];
      EXPECT_EQ(g.index, h.index);
      EXPECT_EQ(g.name, h.name);
      EXPECT_EQ(g.pciBusId, h.pciBusId);
      EXPECT_EQ(g.numa, h.numa);
      EXPECT_EQ(g.memoryBytes, h.memoryBytes);
      EXPECT_DOUBLE_EQ(g.peakTflops, h.peakTflops);
      EXPECT_EQ(g.nvlinks, h.nvlinks);
      EXPECT_EQ(g.nvswitch, h.nvswitch);
      EXPECT_EQ(g.nvlinkPeers, h.nvlinkPeers);
    }
    ASSERT_EQ(x.nics.size(), y.nics.size());
    for (size_t i = 0; i < x.nics.size(); ++i) {
      const Nic &n = x.nics[i], &m = y.nics[i];
      EXPECT_EQ(n.name, m.name);
      EXPECT_EQ(n.netdev, m.netdev);
      EXPECT_EQ(n.kind, m.kind);
      EXPECT_EQ(n.port, m.port);
      EXPECT_EQ(n.up, m.up);
      EXPECT_DOUBLE_EQ(n.rateGbps, m.rateGbps);
      EXPECT_EQ(n.pciBusId, m.pciBusId);
      EXPECT_EQ(n.numa, m.numa);
      EXPECT_EQ(n.rail, m.rail);
      EXPECT_EQ(n.ipv4, m.ipv4);
    }
  }
}

Cluster roundTrip(const Cluster& c) {
  Cluster back;
  Status st = parseTopologyJson(clusterToJson(c), "round-trip.json", ".", &back);
  EXPECT_TRUE(st.ok()) << st.message() << "\n" << clusterToJson(c);
  return back;
}

// A minimal valid file around one node description (for bad-file tests).
std::string withNode(const std::string& node, const std::string& extra = "") {
  return R"({"version": 1, "rails": 2, )" + extra + R"("nodes": [)" + node + "]}";
}

}  // namespace

// ---- model ----

TEST(TopologyModel, LinkClassNamesRoundTrip) {
  for (int i = 0; i < kLinkClassCount; ++i) {
    const LinkClass c = static_cast<LinkClass>(i);
    LinkClass back;
    ASSERT_TRUE(parseLinkClass(linkClassName(c), &back)) << linkClassName(c);
    EXPECT_EQ(back, c);
  }
  EXPECT_STREQ(linkClassName(LinkClass::CrossRail), "cross-rail");
  EXPECT_STREQ(linkClassName(LinkClass::SharedMemory), "shm");
  LinkClass x;
  EXPECT_FALSE(parseLinkClass("nvlnk", &x));
}

TEST(TopologyModel, DefaultCostsAreTheStatedOnes) {
  EXPECT_DOUBLE_EQ(defaultLinkCost(LinkClass::SameProcess).bandwidthGBps, 20);
  EXPECT_DOUBLE_EQ(defaultLinkCost(LinkClass::SharedMemory).latencyUs, 1);
  EXPECT_DOUBLE_EQ(defaultLinkCost(LinkClass::NvLink).bandwidthGBps, 300);
  EXPECT_DOUBLE_EQ(defaultLinkCost(LinkClass::Rail).bandwidthGBps, 12.5);
  EXPECT_DOUBLE_EQ(defaultLinkCost(LinkClass::CrossRail).latencyUs, 7);
  for (int i = 0; i < kLinkClassCount; ++i) {
    EXPECT_GT(defaultLinkCost(static_cast<LinkClass>(i)).bandwidthGBps, 0);
    EXPECT_GT(defaultLinkCost(static_cast<LinkClass>(i)).latencyUs, 0);
  }
  Cluster c;
  c.cost[static_cast<int>(LinkClass::Rail)] = {9, 99};
  c.costFromFile[static_cast<int>(LinkClass::Rail)] = true;
  c.applyDefaultCosts();
  EXPECT_DOUBLE_EQ(c.cost[static_cast<int>(LinkClass::Rail)].bandwidthGBps, 99);
  EXPECT_DOUBLE_EQ(c.cost[static_cast<int>(LinkClass::Pcie)].latencyUs, 2);
}

// ---- the shipped files ----

TEST(TopologyFile, DgxH100Node) {
  Cluster c;
  Status st = loadTopologyFile(examplePath("dgx_h100_node.json"), &c);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(c.nodes.size(), 1u);
  EXPECT_EQ(c.rails, 8);
  const Node& n = c.nodes[0];
  EXPECT_EQ(n.cores, 112);
  EXPECT_EQ(n.cpus, 224);
  ASSERT_EQ(n.numa.size(), 2u);
  EXPECT_EQ(n.numa[1].cpus, "56-111,168-223");
  EXPECT_EQ(n.numa[0].memoryBytes, 1024 * kGiB);
  ASSERT_EQ(n.gpus.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    const Gpu& g = n.gpus[i];
    EXPECT_EQ(g.index, i);
    EXPECT_EQ(g.name, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(g.memoryBytes, 80 * kGiB);
    EXPECT_TRUE(g.nvswitch);
    EXPECT_EQ(g.nvlinks, 18);
    EXPECT_DOUBLE_EQ(g.peakTflops, 989);
    EXPECT_EQ(g.numa, i < 4 ? 0 : 1);
  }
  EXPECT_EQ(n.gpus[0].pciBusId, "0000:18:00.0");
  ASSERT_EQ(n.nics.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(n.nics[i].kind, "ib");
    EXPECT_DOUBLE_EQ(n.nics[i].rateGbps, 400);
    EXPECT_EQ(n.nics[i].rail, i);
    EXPECT_TRUE(n.nics[i].up);
  }
  EXPECT_EQ(c.rankNode, std::vector<int>(8, 0));
  const int nv = static_cast<int>(LinkClass::NvLink), shm = static_cast<int>(LinkClass::SharedMemory);
  EXPECT_TRUE(c.costFromFile[nv]);
  EXPECT_DOUBLE_EQ(c.cost[nv].bandwidthGBps, 360);
  EXPECT_FALSE(c.costFromFile[shm]);
  EXPECT_DOUBLE_EQ(c.cost[shm].bandwidthGBps, defaultLinkCost(LinkClass::SharedMemory).bandwidthGBps);
  EXPECT_EQ(c.source, examplePath("dgx_h100_node.json"));
}

TEST(TopologyFile, FourNodeRailCluster) {
  Cluster c;
  Status st = loadTopologyFile(examplePath("cluster_4node_rails.json"), &c);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(c.nodes.size(), 4u);
  EXPECT_EQ(c.rails, 8);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(c.nodes[k].hostname, "node" + std::to_string(k));
    EXPECT_EQ(c.nodes[k].gpus.size(), 8u);
    ASSERT_EQ(c.nodes[k].nics.size(), 8u);
    for (int i = 0; i < 8; ++i) EXPECT_EQ(c.nodes[k].nics[i].rail, i);
  }
  ASSERT_EQ(c.rankNode.size(), 32u);
  for (int r = 0; r < 32; ++r) EXPECT_EQ(c.rankNode[r], r / 8);
  const int rail = static_cast<int>(LinkClass::Rail), cross = static_cast<int>(LinkClass::CrossRail);
  EXPECT_DOUBLE_EQ(c.cost[rail].bandwidthGBps, 50);
  EXPECT_GT(c.cost[cross].latencyUs, c.cost[rail].latencyUs);
}

TEST(TopologyFile, VirtualTwoByTwo) {
  Cluster c;
  Status st = loadTopologyFile(examplePath("virtual_2x2.json"), &c);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(c.nodes.size(), 2u);
  EXPECT_EQ(c.nodes[0].hostname, "vnode0");
  EXPECT_EQ(c.nodes[1].hostname, "vnode1");
  EXPECT_EQ(c.rails, 2);
  EXPECT_EQ(c.rankNode, (std::vector<int>{0, 0, 1, 1}));
  for (const Node& n : c.nodes) {
    ASSERT_EQ(n.nics.size(), 2u);
    EXPECT_EQ(n.nics[0].rail, 0);
    EXPECT_EQ(n.nics[1].rail, 1);
    EXPECT_DOUBLE_EQ(n.nics[0].rateGbps, 1);
    EXPECT_TRUE(n.gpus.empty());
  }
  for (LinkClass lc : {LinkClass::Rail, LinkClass::CrossRail}) {
    EXPECT_DOUBLE_EQ(c.cost[static_cast<int>(lc)].bandwidthGBps, 0.125);
    EXPECT_DOUBLE_EQ(c.cost[static_cast<int>(lc)].latencyUs, 50);
  }
}

TEST(TopologyFile, ShippedFilesRoundTrip) {
  for (const char* name : {"dgx_h100_node.json", "cluster_4node_rails.json", "virtual_2x2.json"}) {
    SCOPED_TRACE(name);
    Cluster c;
    ASSERT_TRUE(loadTopologyFile(examplePath(name), &c).ok());
    Cluster back = roundTrip(c);
    expectSameCluster(c, back);
    EXPECT_EQ(clusterToJson(c), clusterToJson(back));
  }
}

TEST(TopologyFile, UnusualValuesRoundTrip) {
  Cluster c;
  c.rails = 3;
  c.cost[static_cast<int>(LinkClass::Pcie)] = {1.25, 23.5};
  c.costFromFile[static_cast<int>(LinkClass::Pcie)] = true;
  c.applyDefaultCosts();
  Node n;
  n.hostname = "odd \"host\"";
  n.cores = 3;
  n.cpus = 5;
  n.numa = {{2, "0-1,4", 3 * kGiB + 12345}, {5, "", 0}};
  Gpu g0;
  g0.index = 0;
  g0.name = "GPU A";
  g0.numa = 5;
  g0.memoryBytes = 40 * kGiB + 7;
  g0.nvlinks = 4;
  g0.nvlinkPeers = {1};
  g0.peakTflops = 312.5;
  Gpu g1;
  g1.index = 1;
  g1.nvlinkPeers = {0};
  n.gpus = {g0, g1};
  Nic a;
  a.name = "mlx5_9";
  a.netdev = "ens1f1";
  a.kind = "roce";
  a.port = 2;
  a.up = false;
  a.rateGbps = 2.5;
  a.pciBusId = "0000:af:00.1";
  a.numa = 2;
  a.rail = 2;
  a.ipv4 = "10.1.2.3";
  Nic b;
  b.name = "eth9";
  b.up = true;
  n.nics = {a, b};
  c.nodes = {n, n};
  c.nodes[1].hostname = "second";
  c.rankNode = {1, 0, 1};  // not node-major: written as a list
  Cluster back = roundTrip(c);
  expectSameCluster(c, back);
  EXPECT_EQ(clusterToJson(c), clusterToJson(back));
  EXPECT_CONTAINS(clusterToJson(c), "\"placement\": [");

  c.rankNode = {0, 0, 1, 1};  // node-major and uniform: ranks_per_node
  EXPECT_CONTAINS(clusterToJson(c), "\"ranks_per_node\": 2");
  expectSameCluster(c, roundTrip(c));
}

TEST(TopologyFile, PlacementByHostnameAndNodeForms) {
  Cluster c;
  Status st = parseTopologyJson(
      R"({"version": 1, "nodes": [{"hostname": "a"}, {"hostname": "b", "cores": 4}], "placement": ["b", 0, "a"]})",
      "t.json", ".", &c);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(c.rankNode, (std::vector<int>{1, 0, 0}));
  EXPECT_EQ(c.nodes[1].cores, 4);
  // A type, with the entry's own keys replacing the type's.
  st = parseTopologyJson(R"({"version": 1, "node_types": {"t": {"cores": 8, "cpus": 16}},
                             "nodes": [{"type": "t", "cores": 2}, {"type": "t"}]})",
                         "t.json", ".", &c);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(c.nodes[0].cores, 2);
  EXPECT_EQ(c.nodes[0].cpus, 16);
  EXPECT_EQ(c.nodes[1].cores, 8);
  EXPECT_EQ(c.nodes[1].hostname, "node1");
  EXPECT_TRUE(c.rankNode.empty());
}

// ---- bad files ----

TEST(TopologyFileErrors, SyntaxErrorNamesLineAndColumn) {
  const std::string msg = parseError("{\n  \"version\": 1,\n  \"nodes\": [ {\"hostname\": \"a\",} ]\n}\n");
  EXPECT_CONTAINS(msg, "bad.json:3:");
  EXPECT_CONTAINS(msg, "syntax error");
  EXPECT_EQ(msg.find("[json.exception"), std::string::npos) << msg;
  EXPECT_CONTAINS(parseError(""), "bad.json:1:");
  EXPECT_CONTAINS(parseError("{\"version\": 1,\n\n \"nodes\": [}"), "bad.json:3:");
}

TEST(TopologyFileErrors, WrongTypeNamesTheJsonPath) {
  std::string msg = parseError(withNode(R"({"hostname": "a"}, {"hostname": "b"}, {"gpus": [{"memory_GiB": "80G"}]})"));
  EXPECT_CONTAINS(msg, "bad.json: nodes[2].gpus[0].memory_GiB: expected a number, got \"80G\" (a string)");
  msg = parseError(withNode(R"({"cores": 1.5})"));
  EXPECT_CONTAINS(msg, "nodes[0].cores: expected an integer");
  msg = parseError(withNode(R"({"nics": [{"name": "x", "up": "yes"}]})"));
  EXPECT_CONTAINS(msg, "nodes[0].nics[0].up: expected true or false");
  msg = parseError(R"({"version": 1, "nodes": {"hostname": "a"}})");
  EXPECT_CONTAINS(msg, "nodes: unknown key \"hostname\"");
  msg = parseError(R"({"version": 1, "nodes": "all"})");
  EXPECT_CONTAINS(msg, "nodes: expected an array, got \"all\" (a string)");
  msg = parseError(R"([1, 2])");
  EXPECT_CONTAINS(msg, "top level: expected an object");
}

TEST(TopologyFileErrors, UnknownAndDuplicateKeys) {
  std::string msg = parseError(withNode(R"({"gpus": [{"memroy_GiB": 80}]})"));
  EXPECT_CONTAINS(msg, "nodes[0].gpus[0]: unknown key \"memroy_GiB\"");
  EXPECT_CONTAINS(msg, "memory_GiB");  // the list of allowed keys
  EXPECT_CONTAINS(parseError(R"({"version": 1, "nodes": [{}], "rail": 2})"), "top level: unknown key \"rail\"");
  EXPECT_CONTAINS(parseError(withNode("{}", R"("link_classes": {"rail": {"bandwidth_Gbps": 5}}, )")),
                  "link_classes.rail: unknown key \"bandwidth_Gbps\"");
  EXPECT_CONTAINS(parseError(withNode("{}", R"("link_classes": {"nvlnk": {"latency_us": 1}}, )")),
                  "unknown link class \"nvlnk\"");
  msg = parseError(withNode(R"({"hostname": "a"}, {"nics": [{"name": "x", "rail": 0, "rail": 1}]})"));
  EXPECT_CONTAINS(msg, "nodes[1].nics[0]: duplicate key \"rail\"");
}

TEST(TopologyFileErrors, BadPlacement) {
  const std::string two = R"({"version": 1, "nodes": [{"hostname": "a"}, {"hostname": "b"}], )";
  EXPECT_CONTAINS(parseError(two + R"("placement": [0, 1, 2]})"),
                  "placement[2]: node 2 does not exist (the cluster has 2 nodes: 0 .. 1)");
  EXPECT_CONTAINS(parseError(two + R"("placement": [0, -1]})"), "placement[1]: node -1 does not exist");
  EXPECT_CONTAINS(parseError(two + R"("placement": ["a", "c"]})"), "placement[1]: no node named \"c\"");
  EXPECT_CONTAINS(parseError(two + R"("placement": {"ranks_per_node": 0}})"),
                  "placement.ranks_per_node: 0 is out of range");
  EXPECT_CONTAINS(parseError(two + R"("placement": {"ranks": 2}})"), "placement: unknown key \"ranks\"");
  EXPECT_CONTAINS(parseError(two + R"("placement": []})"), "placement: no ranks placed");
  EXPECT_CONTAINS(parseError(two + R"("placement": 4})"), "placement: expected {\"ranks_per_node\": N}");
}

TEST(TopologyFileErrors, BadValues) {
  EXPECT_CONTAINS(parseError(withNode("{}", R"("link_classes": {"rail": {"bandwidth_GB_s": -12.5}}, )")),
                  "bad.json: link_classes.rail.bandwidth_GB_s: -12.5 is out of range (expected > 0)");
  EXPECT_CONTAINS(parseError(withNode("{}", R"("link_classes": {"rail": {"bandwidth_GB_s": 0}}, )")),
                  "link_classes.rail.bandwidth_GB_s: 0 is out of range");
  EXPECT_CONTAINS(parseError(withNode("{}", R"("link_classes": {"shm": {"latency_us": -1}}, )")),
                  "link_classes.shm.latency_us: -1 is out of range (expected >= 0)");
  EXPECT_CONTAINS(parseError(withNode(R"({"nics": [{"name": "x", "rail": 2}]})")),
                  "nodes[0].nics[0].rail: rail 2 does not exist (the file declares 2 rails: 0 .. 1)");
  EXPECT_CONTAINS(parseError(R"({"version": 1, "nodes": [{"nics": [{"name": "x", "rail": 0}]}]})"),
                  "rail 0 does not exist (the file declares no \"rails\")");
  EXPECT_CONTAINS(parseError(withNode(R"({"nics": [{"rail": 1}]})")), "nodes[0].nics[0]: missing \"name\"");
  EXPECT_CONTAINS(parseError(withNode(R"({"nics": [{"name": "x", "kind": "wifi"}]})")),
                  "nodes[0].nics[0].kind: \"wifi\" is not one of ib, roce, eth");
  EXPECT_CONTAINS(parseError(withNode(R"({"gpus": [{"numa": 1}], "numa": [{"id": 0}]})")),
                  "nodes[0].gpus[0].numa: NUMA domain 1 does not exist on this node (domains: 0)");
  EXPECT_CONTAINS(parseError(withNode(R"({"gpus": [{"nvlink_peers": [0]}]})")),
                  "nodes[0].gpus[0].nvlink_peers: GPU 0 is not another GPU of this node");
  EXPECT_CONTAINS(parseError(withNode(R"({"gpus": [{"pci_bus_id": "18:00"}]})")),
                  "nodes[0].gpus[0].pci_bus_id: \"18:00\" is not a PCI address");
  EXPECT_CONTAINS(parseError(withNode(R"({"hostname": "a"}, {"hostname": "a"})")),
                  "nodes[1].hostname: \"a\" is already the name of nodes[0]");
  EXPECT_CONTAINS(parseError(withNode(R"({"type": "dgx"})")), "nodes[0].type: no node type \"dgx\" in node_types");
  EXPECT_CONTAINS(parseError(R"({"version": 2, "nodes": [{}]})"), "version: 2 is out of range (expected 1 .. 1)");
  EXPECT_CONTAINS(parseError(R"({"nodes": [{}]})"), "top level: missing \"version\"");
  EXPECT_CONTAINS(parseError(R"({"version": 1, "nodes": []})"), "nodes: the cluster has no nodes");
  EXPECT_CONTAINS(parseError(R"({"version": 1, "nodes": {"count": 0, "type": "t"}, "node_types": {"t": {}}})"),
                  "nodes.count: 0 is out of range");
  EXPECT_CONTAINS(parseError(withNode(R"({"hwloc_xml": "/nonexistent/node.xml"})")),
                  "nodes[0].hwloc_xml: /nonexistent/node.xml");
}

TEST(TopologyFileErrors, MissingFileAndUnchangedOutput) {
  Cluster c;
  c.rails = 77;
  Status st = loadTopologyFile("/nonexistent/cluster.json", &c);
  ASSERT_FALSE(st.ok());
  EXPECT_CONTAINS(st.message(), "/nonexistent/cluster.json");
  EXPECT_CONTAINS(st.message(), "No such file");
  st = parseTopologyJson(R"({"version": 1, "rails": 3, "nodes": [{"cores": -1}]})", "x.json", ".", &c);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(c.rails, 77);
  EXPECT_TRUE(c.nodes.empty());
}

// ---- detection ----

TEST(TopologyDetect, ThisMachine) {
  Node n;
  Status st = detectLocalNode(&n);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_GE(n.cores, 1);
  EXPECT_GE(n.cpus, n.cores);
  ASSERT_GE(n.numa.size(), 1u);
  EXPECT_FALSE(n.numa[0].cpus.empty());
  EXPECT_FALSE(n.hostname.empty());
  EXPECT_EQ(n.source.rfind("detected (hwloc ", 0), 0u) << n.source;
  for (const Nic& x : n.nics) {
    EXPECT_NE(x.name, "lo");
    EXPECT_FALSE(x.kind.empty());
  }
  for (const Gpu& g : n.gpus) EXPECT_FALSE(g.pciBusId.empty());
  // Without NVML (no driver), zero GPUs and no error.
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!nvml) {
    EXPECT_TRUE(n.gpus.empty());
  } else {
    dlclose(nvml);
  }
  std::vector<Gpu> gpus;
  EXPECT_TRUE(detectNvmlGpus(&gpus).ok());
  EXPECT_EQ(gpus.size(), n.gpus.size());
  // A detected node round-trips through a topology file.
  Cluster c;
  c.nodes = {n};
  c.applyDefaultCosts();
  expectSameCluster(c, roundTrip(c));
}

TEST(TopologyDetect, SyntheticTopologies) {
  Node n;
  Status st = loadHwlocSynthetic("pack:2 numa:1 core:4 pu:2", &n);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(n.cores, 8);
  EXPECT_EQ(n.cpus, 16);
  ASSERT_EQ(n.numa.size(), 2u);
  EXPECT_EQ(n.numa[0].id, 0);
  EXPECT_EQ(n.numa[0].cpus, "0-7");
  EXPECT_EQ(n.numa[1].cpus, "8-15");
  EXPECT_TRUE(n.gpus.empty());
  EXPECT_TRUE(n.nics.empty());

  ASSERT_TRUE(loadHwlocSynthetic("pack:1 numa:4 core:3 pu:1", &n).ok());
  EXPECT_EQ(n.cores, 12);
  EXPECT_EQ(n.cpus, 12);
  EXPECT_EQ(n.numa.size(), 4u);

  st = loadHwlocSynthetic("pack:2 widget:3", &n);
  EXPECT_FALSE(st.ok());
  EXPECT_CONTAINS(st.message(), "widget");
}

TEST(TopologyDetect, FromAnHwlocTopology) {
  hwloc_topology_t topo;
  ASSERT_EQ(hwloc_topology_init(&topo), 0);
  ASSERT_EQ(hwloc_topology_set_synthetic(topo, "pack:3 numa:1 core:2 pu:4"), 0);
  ASSERT_EQ(hwloc_topology_load(topo), 0);
  Node n;
  EXPECT_TRUE(nodeFromHwloc(topo, true, &n).ok());
  EXPECT_EQ(n.cores, 6);
  EXPECT_EQ(n.cpus, 24);
  EXPECT_EQ(n.numa.size(), 3u);
  EXPECT_EQ(pciNumaDomain(topo, "0000:18:00.0"), -1);  // no such device
  hwloc_topology_destroy(topo);
}

TEST(TopologyDetect, HwlocXml) {
  TempDir dir;
  const std::string xml = dir.file("node.xml");
  hwloc_topology_t topo;
  ASSERT_EQ(hwloc_topology_init(&topo), 0);
  ASSERT_EQ(hwloc_topology_set_synthetic(topo, "pack:2 numa:2 core:3 pu:2"), 0);
  ASSERT_EQ(hwloc_topology_load(topo), 0);
  ASSERT_EQ(hwloc_topology_export_xml(topo, xml.c_str(), 0), 0);
  hwloc_topology_destroy(topo);

  Node n;
  Status st = loadHwlocXml(xml, &n);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(n.cores, 12);
  EXPECT_EQ(n.cpus, 24);
  EXPECT_EQ(n.numa.size(), 4u);
  EXPECT_EQ(n.source, "hwloc-xml " + xml);

  // A topology file naming it (relative to the file), its NICs given in the file.
  writeText(dir.file("cluster.json"), R"({"version": 1, "rails": 1,
      "nodes": [{"hostname": "x", "hwloc_xml": "node.xml", "nics": [{"name": "eth0", "kind": "eth", "rail": 0}]}]})");
  Cluster c;
  st = loadTopologyFile(dir.file("cluster.json"), &c);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(c.nodes.size(), 1u);
  EXPECT_EQ(c.nodes[0].hostname, "x");
  EXPECT_EQ(c.nodes[0].cores, 12);
  EXPECT_EQ(c.nodes[0].numa.size(), 4u);
  ASSERT_EQ(c.nodes[0].nics.size(), 1u);
  EXPECT_EQ(c.nodes[0].nics[0].rail, 0);

  writeText(dir.file("garbage.xml"), "<not hwloc>");
  st = loadHwlocXml(dir.file("garbage.xml"), &n);
  EXPECT_FALSE(st.ok());
  EXPECT_CONTAINS(st.message(), "garbage.xml");
  EXPECT_FALSE(loadHwlocXml(dir.file("missing.xml"), &n).ok());
}

TEST(TopologyDetect, NicsFromAFakeSysfs) {
  TempDir dir;
  const std::string root = dir.path();
  // An InfiniBand HCA with its IPoIB netdev, a RoCE port, a PCI (virtio) NIC, a virtual interface
  // and loopback.
  const std::string hca = root + "/devices/pci0000:00/0000:17:00.0";
  writeText(hca + "/net/ib0/dummy", "");
  writeText(root + "/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
  writeText(root + "/class/infiniband/mlx5_0/ports/1/rate", "400 Gb/sec (4X NDR)\n");
  writeText(root + "/class/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand\n");
  fs::create_directory_symlink(hca, root + "/class/infiniband/mlx5_0/device");
  const std::string roce = root + "/devices/pci0000:80/0000:AF:00.1";
  writeText(roce + "/net/ens1f1/dummy", "");
  writeText(root + "/class/infiniband/mlx5_1/ports/1/state", "1: DOWN\n");
  writeText(root + "/class/infiniband/mlx5_1/ports/1/rate", "2.5 Gb/sec (1X SDR)\n");
  writeText(root + "/class/infiniband/mlx5_1/ports/1/link_layer", "Ethernet\n");
  writeText(root + "/class/infiniband/mlx5_1/ports/1/gid_attrs/ndevs/0", "ens1f1\n");
  fs::create_directory_symlink(roce, root + "/class/infiniband/mlx5_1/device");
  for (const char* n : {"ib0", "ens1f1"}) writeText(root + "/class/net/" + n + "/operstate", "up\n");
  const std::string virtio = root + "/devices/pci0000:00/0000:00:03.0/virtio2";
  writeText(virtio + "/vendor", "0x1af4\n");
  writeText(root + "/class/net/eth0/operstate", "up\n");
  writeText(root + "/class/net/eth0/speed", "25000\n");
  fs::create_directory_symlink(virtio, root + "/class/net/eth0/device");
  writeText(root + "/class/net/veth1/operstate", "down\n");
  writeText(root + "/class/net/lo/type", "772\n");
  writeText(root + "/class/net/lo0/type", "772\n");

  const std::vector<Nic> nics = scanSysfsNics(root, {{"eth0", "10.0.0.5"}, {"ib0", "192.168.1.2"}});
  ASSERT_EQ(nics.size(), 4u);
  EXPECT_EQ(nics[0].name, "mlx5_0");
  EXPECT_EQ(nics[0].kind, "ib");
  EXPECT_EQ(nics[0].port, 1);
  EXPECT_TRUE(nics[0].up);
  EXPECT_DOUBLE_EQ(nics[0].rateGbps, 400);
  EXPECT_EQ(nics[0].pciBusId, "0000:17:00.0");
  EXPECT_EQ(nics[0].netdev, "ib0");
  EXPECT_EQ(nics[0].ipv4, "192.168.1.2");
  EXPECT_EQ(nics[0].rail, -1);  // nothing invented
  EXPECT_EQ(nics[1].name, "mlx5_1");
  EXPECT_EQ(nics[1].kind, "roce");
  EXPECT_FALSE(nics[1].up);
  EXPECT_DOUBLE_EQ(nics[1].rateGbps, 2.5);
  EXPECT_EQ(nics[1].pciBusId, "0000:af:00.1");
  EXPECT_EQ(nics[1].netdev, "ens1f1");
  EXPECT_EQ(nics[2].name, "eth0");
  EXPECT_EQ(nics[2].kind, "eth");
  EXPECT_TRUE(nics[2].up);
  EXPECT_DOUBLE_EQ(nics[2].rateGbps, 25);
  EXPECT_EQ(nics[2].pciBusId, "0000:00:03.0");
  EXPECT_EQ(nics[2].ipv4, "10.0.0.5");
  EXPECT_EQ(nics[3].name, "veth1");
  EXPECT_FALSE(nics[3].up);
  EXPECT_DOUBLE_EQ(nics[3].rateGbps, 0);  // no speed file: unknown
  EXPECT_EQ(nics[3].pciBusId, "");

  EXPECT_TRUE(scanSysfsNics(root + "/nothing-here", {}).empty());
}

TEST(TopologyDetect, PciBusIds) {
  EXPECT_EQ(normalizePciBusId("00000000:18:00.0"), "0000:18:00.0");
  EXPECT_EQ(normalizePciBusId("0000:AB:1f.7"), "0000:ab:1f.7");
  EXPECT_EQ(normalizePciBusId("0001:18:00.0"), "0001:18:00.0");
  EXPECT_EQ(normalizePciBusId("pci0000:00"), "");
  EXPECT_EQ(normalizePciBusId("virtio2"), "");
  EXPECT_EQ(normalizePciBusId("18:00.0"), "");
  EXPECT_EQ(normalizePciBusId("0000:18:00.x"), "");
}

// ---- text and pictures ----

TEST(TopologyViews, DescriptionAndDot) {
  Cluster c;
  ASSERT_TRUE(loadTopologyFile(examplePath("cluster_4node_rails.json"), &c).ok());
  const std::string text = describeCluster(c);
  EXPECT_CONTAINS(text, "cluster: 4 nodes, 8 rails, 32 ranks placed");
  EXPECT_CONTAINS(text, "node 0: node0, ranks 0-7");
  EXPECT_CONTAINS(text, "node 3: node3, ranks 24-31: same hardware as node 0");
  EXPECT_CONTAINS(text, "NVLink: 18 links to NVSwitch");
  EXPECT_CONTAINS(text, "nic mlx5_7 port 1: ib, 400 Gbit/s, up, rail 7");
  EXPECT_CONTAINS(text, "(file)");
  const std::string dot = clusterToDot(c);
  EXPECT_EQ(dot.rfind("graph strata {", 0), 0u);
  EXPECT_CONTAINS(dot, "subgraph cluster_n3");
  EXPECT_CONTAINS(dot, "n3_nic7 -- rail7 [label=\"rail\"]");
  EXPECT_CONTAINS(dot, "rail0 -- spine [label=\"cross-rail\"]");
  EXPECT_CONTAINS(dot, "n0_gpu0 -- n0_nvswitch [label=\"nvlink\"]");
  EXPECT_CONTAINS(dot, "n0_numa1 -- n0_gpu4 [label=\"pcie\"]");
  EXPECT_EQ(formatRanges({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
}

// ---- strata-topo ----

#ifdef STRATA_TOPO_BIN
namespace {
strata::testing::RunResult topo(const std::string& args, const std::string& env = "") {
  return strata::testing::runCommand("env -u STRATA_TOPO_FILE " + env + " " STRATA_TOPO_BIN " " + args);
}
}  // namespace

TEST(StrataTopo, DescribesThisMachine) {
  auto r = topo("");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_CONTAINS(r.out, "cluster: 1 node");
  EXPECT_CONTAINS(r.out, "detected (hwloc");
  EXPECT_CONTAINS(r.out, "link classes");
}

TEST(StrataTopo, JsonToFileParsesBack) {
  TempDir dir;
  auto r = topo("--file " + examplePath("cluster_4node_rails.json") + " --json " + dir.file("out.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_CONTAINS(r.out, "wrote " + dir.file("out.json"));
  Cluster fromTool, original;
  Status st = loadTopologyFile(dir.file("out.json"), &fromTool);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE(loadTopologyFile(examplePath("cluster_4node_rails.json"), &original).ok());
  expectSameCluster(original, fromTool);

  // Detected, to stdout: nothing but the JSON.
  r = topo("--json");
  ASSERT_EQ(r.code, 0) << r.out;
  Cluster detected;
  st = parseTopologyJson(r.out, "stdout", ".", &detected);
  ASSERT_TRUE(st.ok()) << st.message() << "\n" << r.out;
  EXPECT_EQ(detected.nodes.size(), 1u);
  EXPECT_GE(detected.nodes[0].cores, 1);
}

TEST(StrataTopo, DotAndPng) {
  TempDir dir;
  auto r = topo("--file " + examplePath("dgx_h100_node.json") + " --dot " + dir.file("t.dot"));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string dot = readText(dir.file("t.dot"));
  EXPECT_CONTAINS(dot, "graph strata");
  EXPECT_CONTAINS(dot, "NVSwitch");
  const bool haveDot = strata::testing::runCommand("command -v dot").code == 0;
  r = topo("--file " + examplePath("virtual_2x2.json") + " --png " + dir.file("t.png"));
  if (haveDot) {
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(readText(dir.file("t.png")).substr(1, 3), "PNG");
  } else {
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_CONTAINS(r.out, "Graphviz's `dot`, which is not installed");
  }
}

TEST(StrataTopo, EnvironmentFileAndErrors) {
  auto r = topo("", "STRATA_TOPO_FILE=" + examplePath("virtual_2x2.json"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_CONTAINS(r.out, "node 1: vnode1, ranks 2-3");
  TempDir dir;
  writeText(dir.file("bad.json"), "{\"version\": 1,\n \"nodes\": [{\"cores\": \"many\"}]}\n");
  r = topo("--file " + dir.file("bad.json"));
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.out, "strata-topo: " + dir.file("bad.json") + ": nodes[0].cores: expected an integer");
  r = topo("--file a.json --hwloc-xml b.xml");
  EXPECT_EQ(r.code, 2) << r.out;
  r = topo("--bogus");
  EXPECT_EQ(r.code, 2) << r.out;
}
#ifdef STRATA_RUN_BIN
TEST(StrataTopo, JobShowsEveryRankOnItsVirtualNode) {
  auto r = strata::testing::runCommand("env STRATA_TOPO_FILE=" + examplePath("virtual_2x2.json") +
                                       " " STRATA_RUN_BIN " -n 4 -- " STRATA_TOPO_BIN " --job");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_CONTAINS(r.out, "job: 4 ranks on 2 nodes x 2 ranks");
  EXPECT_CONTAINS(r.out, "links from rank 0: 1:shm 2:rail 3:rail");
  for (const char* row : {"    0  vnode0                   0", "    1  vnode0                   1",
                          "    2  vnode1                   0", "    3  vnode1                   1"})
    EXPECT_CONTAINS(r.out, row);
}
#endif
#endif
