// layout.cc: building a communicator's layout from its ranks' places (see layout.h).
#include "topology/layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

namespace strata::topology {

CommLayout::CommLayout(const std::vector<RankPlace>& places) {
  std::unordered_map<uint64_t, int> nodeIndex;
  for (const RankPlace& p : places) {
    auto it = nodeIndex.find(p.nodeKey);
    int k;
    if (it == nodeIndex.end()) {
      k = static_cast<int>(members_.size());
      nodeIndex.emplace(p.nodeKey, k);
      members_.emplace_back();
      nodeName_.push_back(p.nodeName);
    } else {
      k = it->second;
    }
    local_.push_back(static_cast<int>(members_[k].size()));
    members_[k].push_back(static_cast<int>(node_.size()));
    node_.push_back(k);
    rail_.push_back(p.rail);
    process_.push_back(p.processKey);
    gpu_.push_back(p.gpu);
    nvlink_.push_back(p.nvlink ? 1 : 0);
  }
  finish();
}

CommLayout CommLayout::fromNodes(const std::vector<int>& nodeOfRank, int rails) {
  std::vector<RankPlace> places(nodeOfRank.size());
  std::unordered_map<int, int> seen;
  for (size_t r = 0; r < nodeOfRank.size(); ++r) {
    const int local = seen[nodeOfRank[r]]++;
    places[r].nodeKey = static_cast<uint64_t>(nodeOfRank[r]) + 1;
    places[r].processKey = (static_cast<uint64_t>(nodeOfRank[r]) << 32) + static_cast<uint64_t>(r) + 1;
    places[r].rail = rails > 0 ? local % rails : -1;
    places[r].nodeName = fmt::format("node{}", nodeOfRank[r]);
  }
  return CommLayout(places);
}

void CommLayout::finish() {
  uniform_ = true;
  for (const auto& m : members_) uniform_ = uniform_ && m.size() == members_[0].size();
  blocked_ = uniform_;
  for (int r = 0; r < nranks() && blocked_; ++r)
    blocked_ = node_[r] * localSize(0) + local_[r] == r;
}

LinkClass CommLayout::link(int a, int b) const {
  if (node_[a] != node_[b]) {
    const bool known = rail_[a] >= 0 && rail_[b] >= 0;
    return known && rail_[a] != rail_[b] ? LinkClass::CrossRail : LinkClass::Rail;
  }
  if (gpu_[a] >= 0 && gpu_[b] >= 0 && gpu_[a] != gpu_[b])
    return nvlink_[a] && nvlink_[b] ? LinkClass::NvLink : LinkClass::Pcie;
  if (process_[a] == process_[b]) return LinkClass::SameProcess;
  return LinkClass::SharedMemory;
}

int CommLayout::messageRail(int a, int b) const {
  if (rail_[a] >= 0 && rail_[a] == rail_[b]) return rail_[a];
  return std::max(rail_[std::min(a, b)], 0);
}

std::string CommLayout::describe() const {
  if (uniform_) return fmt::format("{} node{} x {} rank{}", nnodes(), nnodes() == 1 ? "" : "s", ppn(), ppn() == 1 ? "" : "s");
  std::string sizes;
  for (const auto& m : members_) sizes += (sizes.empty() ? "" : ", ") + std::to_string(m.size());
  return fmt::format("{} nodes ({} ranks)", nnodes(), sizes);
}

}  // namespace strata::topology
