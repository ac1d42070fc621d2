// topo_draw.h: a cluster as a Graphviz picture (strata-topo --dot): each node a cluster box
// holding its NUMA domains, GPUs (with an NVSwitch when they use one) and NICs; rails and the
// spine drawn as shared switches between the boxes; every edge labelled with its link class.
#pragma once

#include <string>

#include "topology/model.h"

namespace strata::topology {

/// The picture in the DOT language (an undirected `graph`), for `dot -Tpng`.
std::string clusterToDot(const Cluster& c);

}  // namespace strata::topology
