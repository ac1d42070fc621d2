// layout.h: where the ranks of one communicator sit: the node of each rank, its local rank on that
// node, its home rail, and the class of the link between any two ranks. Every rank builds the same
// layout from the infos exchanged at bootstrap, so decisions taken from it (algorithm choice,
// schedules) agree on every rank. Hierarchical schedules read it through CollArgs::layout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topology/model.h"

namespace strata::topology {

/// What the layout needs to know about one rank (taken from its bootstrap RankInfo).
struct RankPlace {
  uint64_t nodeKey = 0;     ///< equal for ranks of one node (host identity or virtual node)
  uint64_t processKey = 0;  ///< equal for ranks that are threads of one process
  int rail = -1;            ///< home rail (the NIC it sends through), -1: unknown
  int gpu = -1;             ///< GPU index on its node, -1: none
  bool nvlink = false;      ///< its GPU reaches the node's other GPUs over NVLink / NVSwitch
  std::string nodeName;     ///< hostname or virtual node name (reports only)
};

class CommLayout {
 public:
  CommLayout() = default;
  /// Nodes are numbered in order of their first rank; local ranks in rank order within a node.
  explicit CommLayout(const std::vector<RankPlace>& places);
  /// A synthetic layout for tests and the simulator: node of each rank given directly.
  static CommLayout fromNodes(const std::vector<int>& nodeOfRank, int rails = 0);

  int nranks() const { return static_cast<int>(node_.size()); }
  int nnodes() const { return static_cast<int>(members_.size()); }
  int node(int rank) const { return node_[rank]; }
  int localRank(int rank) const { return local_[rank]; }
  /// Ranks of node k, in rank order.
  const std::vector<int>& members(int k) const { return members_[k]; }
  /// The rank with local rank `local` on node k.
  int rankAt(int k, int local) const { return members_[k][local]; }
  /// Ranks on node k.
  int localSize(int k) const { return static_cast<int>(members_[k].size()); }
  /// Same number of ranks on every node.
  bool uniform() const { return uniform_; }
  /// Ranks per node when uniform, else 0.
  int ppn() const { return uniform_ && !members_.empty() ? localSize(0) : 0; }
  /// Home rail of a rank (-1 unknown).
  int rail(int rank) const { return rail_[rank]; }
  const std::string& nodeName(int k) const { return nodeName_[k]; }
  /// The link between two ranks (a != b).
  LinkClass link(int a, int b) const;
  /// The rail a message between ranks of different nodes takes: their common home rail, else the
  /// lower rank's (the tcp transport connects on it); 0 when rails are unknown.
  int messageRail(int a, int b) const;
  /// Node-major with ascending local ranks: node k holds ranks k*ppn .. k*ppn+ppn-1.
  bool blocked() const { return blocked_; }
  /// "2 nodes x 4 ranks" / "3 nodes (2, 4, 2 ranks)".
  std::string describe() const;

 private:
  void finish();
  std::vector<int> node_, local_, rail_;
  std::vector<uint64_t> process_;
  std::vector<int> gpu_;
  std::vector<char> nvlink_;
  std::vector<std::vector<int>> members_;
  std::vector<std::string> nodeName_;
  bool uniform_ = true, blocked_ = true;
};

}  // namespace strata::topology
