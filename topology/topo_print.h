// topo_print.h: a cluster described for people (strata-topo's default output): nodes with their
// CPUs, NUMA domains, GPUs and NVLinks, NICs with rate, state and rail, the link classes with
// their costs, and the placement of ranks.
#pragma once

#include <string>
#include <vector>

#include "topology/model.h"

namespace strata::topology {

std::string describeCluster(const Cluster& c);

/// "0-7,9,12-13" for sorted distinct integers ("" when empty).
std::string formatRanges(const std::vector<int>& sorted);

/// Ranks placed on node k, in order (empty without a placement).
std::vector<int> ranksOnNode(const Cluster& c, int k);

}  // namespace strata::topology
