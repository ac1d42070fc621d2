// hier.h: internal to the hierarchical builders: the node view of a schedule's ranks (from
// CollArgs::layout, or one node when there is none) and the inner algorithms they compose.
#pragma once

#include <vector>

#include "collectives/algorithms/algorithms.h"

namespace strata::algo {

struct NodeView {
  int nnodes = 1;
  int node = 0;        ///< this rank's node
  int local = 0;       ///< this rank's local rank
  bool uniform = true; ///< same number of ranks on every node
  bool blocked = true; ///< node k holds ranks k*ppn .. k*ppn+ppn-1
  std::vector<std::vector<int>> members;  ///< ranks of each node, local-rank order

  explicit NodeView(const CollArgs& a);
  int ppn() const { return static_cast<int>(members[0].size()); }
  int rankAt(int k, int local) const { return members[k][local]; }
  /// The ranks with local rank `local`, one per node in node order: one rail's group.
  std::vector<int> railGroup(int local) const;
};

/// Inner algorithms of the phases (every rank chooses the same from the count alone).
constexpr size_t kHierSmallElems = 16384;
inline Algo rootedInner(size_t count) { return count <= kHierSmallElems ? Algo::Tree : Algo::Ring; }
inline Algo allReduceInner(size_t count) { return count <= kHierSmallElems ? Algo::Rhd : Algo::Ring; }

}  // namespace strata::algo
