// job_topology.cc: cluster file loading, node identity, link costs and layouts (job_topology.h).
#include "collectives/job_topology.h"

#include <algorithm>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <mutex>

#include "topology/host_identity.h"
#include "topology/topo_file.h"
#include "transport/config.h"
#include "transport/log.h"
#include "transport/socket.h"

namespace strata {

Status jobCluster(const topology::Cluster** out) {
  static std::mutex mu;
  static std::string loadedPath;
  static Status loadStatus;
  static topology::Cluster* cluster = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  const std::string& path = config().topoFile;
  *out = nullptr;
  if (path.empty()) return OkStatus();
  if (path != loadedPath || (!cluster && loadStatus.ok())) {
    topology::Cluster c;
    loadStatus = topology::loadTopologyFile(path, &c);
    loadedPath = path;
    if (loadStatus.ok()) {
      delete cluster;
      cluster = new topology::Cluster(std::move(c));  // process lifetime: layouts may outlive comms
      log::info("topology from {}: {} node(s), {} rail(s){}", path, cluster->nodes.size(), cluster->rails,
                cluster->rankNode.empty() ? "" : ", ranks placed on virtual nodes");
    }
  }
  if (!loadStatus.ok()) return Status(loadStatus.code(), "STRATA_TOPO_FILE: " + loadStatus.message());
  *out = cluster;
  return OkStatus();
}

Status fillNodeIdentity(int rank, int nranks, RankInfo* info) {
  info->nodeHash = info->hostHash;
  static_assert(sizeof(info->nodeName) == sizeof(info->hostname), "node name holds a hostname");
  std::memcpy(info->nodeName, info->hostname, sizeof(info->nodeName));
  const topology::Cluster* cluster = nullptr;
  STRATA_RETURN_IF_ERROR(jobCluster(&cluster));
  if (cluster && !cluster->rankNode.empty() && rank >= 0) {
    // Every rank checks the communicator's size, so all fail at once (not only those left out).
    if (nranks > static_cast<int>(cluster->rankNode.size()))
      return invalidArgument("STRATA_TOPO_FILE: {}: its placement covers {} ranks, but the communicator has {}",
                             cluster->source, cluster->rankNode.size(), nranks);
    const int k = cluster->rankNode[static_cast<size_t>(rank)];
    const uint64_t parts[2] = {info->hostHash, static_cast<uint64_t>(k) + 1};
    info->nodeHash = topology::hashBytes(parts, sizeof(parts));
    std::memset(info->nodeName, 0, sizeof(info->nodeName));
    std::strncpy(info->nodeName, cluster->nodes[static_cast<size_t>(k)].hostname.c_str(), sizeof(info->nodeName) - 1);
  }
  const std::vector<net::Interface> ifs = net::usableInterfaces();
  info->nifs = 0;
  for (const net::Interface& f : ifs) {
    if (info->nifs == RankInfo::kMaxIfs) break;
    if (f.name.compare(0, 2, "lo") == 0 && ifs.size() > 1) continue;
    info->ifAddr[info->nifs] = f.addr;
    info->ifMask[info->nifs] = f.mask;
    std::ifstream speed("/sys/class/net/" + f.name + "/speed");
    long mbps = 0;
    if (speed >> mbps && mbps > 0) info->ifMbps[info->nifs] = static_cast<uint32_t>(mbps);
    std::ifstream numa("/sys/class/net/" + f.name + "/device/numa_node");
    int node = -1;
    info->ifNuma[info->nifs] = numa >> node ? node : -1;
    ++info->nifs;
  }
  info->numa = cpuNumaDomain(info->cpuMask);
  return OkStatus();
}

int cpuNumaDomain(const uint64_t cpuMask[4]) {
  int found = -1;
  for (int node = 0; node < 1024; ++node) {
    std::ifstream f("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist");
    std::string list;
    if (!(f >> list)) {
      if (node > 0) break;
      return -1;
    }
    // Does this domain hold any of the rank's CPUs?
    bool holds = false;
    std::istringstream ranges(list);
    for (std::string part; std::getline(ranges, part, ',') && !holds;) {
      int lo = 0, hi = 0;
      if (std::sscanf(part.c_str(), "%d-%d", &lo, &hi) != 2) hi = lo = std::atoi(part.c_str());
      for (int c = lo; c <= hi && c < 256 && !holds; ++c) holds = (cpuMask[c / 64] >> (c % 64)) & 1;
    }
    if (!holds) continue;
    if (found >= 0) return -1;  // CPUs in several domains
    found = node;
  }
  return found;
}

CostModel::Costs jobLinkCosts(const std::vector<RankInfo>& infos) {
  using topology::LinkClass;
  CostModel::Costs costs;
  for (int c = 0; c < topology::kLinkClassCount; ++c)
    costs[static_cast<size_t>(c)] = topology::defaultLinkCost(static_cast<LinkClass>(c));
  const topology::Cluster* cluster = nullptr;
  if (jobCluster(&cluster).ok() && cluster) costs = cluster->cost;
  const bool railFromFile = cluster && cluster->costFromFile[static_cast<size_t>(LinkClass::Rail)];
  double railGBps = 0;
  if (config().vclusterRailBitsPerSec > 0) {
    railGBps = config().vclusterRailBitsPerSec / 8e9;
  } else if (!railFromFile) {
    // The slowest link rate any rank reports for its interfaces (sysfs), when every rank knows one.
    uint32_t minMbps = 0;
    bool allKnown = !infos.empty();
    for (const RankInfo& i : infos) {
      uint32_t best = 0;
      for (uint32_t k = 0; k < i.nifs && k < RankInfo::kMaxIfs; ++k) best = std::max(best, i.ifMbps[k]);
      if (best == 0) allKnown = false;
      else minMbps = minMbps == 0 ? best : std::min(minMbps, best);
    }
    if (allKnown && minMbps > 0) railGBps = minMbps / 8e3;
  }
  if (railGBps > 0)
    for (LinkClass c : {LinkClass::Rail, LinkClass::CrossRail}) costs[static_cast<size_t>(c)].bandwidthGBps = railGBps;
  return costs;
}

topology::CommLayout layoutFromInfos(const std::vector<RankInfo>& infos) {
  std::vector<topology::RankPlace> places(infos.size());
  for (size_t r = 0; r < infos.size(); ++r) {
    places[r].nodeKey = infos[r].nodeHash ? infos[r].nodeHash : infos[r].hostHash;
    places[r].processKey = infos[r].processHash;
    places[r].gpu = infos[r].gpu;
    // A peer's names need not be terminated: read no further than the arrays.
    const char* name = infos[r].nodeName[0] ? infos[r].nodeName : infos[r].hostname;
    places[r].nodeName.assign(name, strnlen(name, sizeof(infos[r].nodeName)));
  }
  const topology::CommLayout plain(places);
  for (size_t r = 0; r < infos.size(); ++r) {
    const RankInfo& i = infos[r];
    if (i.homeRail >= 0) {
      places[r].rail = i.homeRail;
      continue;
    }
    if (i.nifs == 0) continue;
    // The interfaces on the rank's NUMA domain, if it has one and any is there; else all.
    std::vector<int> near;
    for (uint32_t k = 0; k < i.nifs && k < RankInfo::kMaxIfs; ++k)
      if (i.numa >= 0 && i.ifNuma[k] == i.numa) near.push_back(static_cast<int>(k));
    const bool local = !near.empty();
    if (!local)
      for (uint32_t k = 0; k < i.nifs && k < RankInfo::kMaxIfs; ++k) near.push_back(static_cast<int>(k));
    // Spread the ranks that share those interfaces over them: count the node's ranks before this
    // one that choose among the same set (same NUMA domain, or all when no locality is known).
    int before = 0;
    for (int q : plain.members(plain.node(static_cast<int>(r)))) {
      if (q == static_cast<int>(r)) break;
      before += local ? infos[static_cast<size_t>(q)].numa == i.numa : 1;
    }
    places[r].rail = near[static_cast<size_t>(before) % near.size()];
  }
  return topology::CommLayout(places);
}

}  // namespace strata
