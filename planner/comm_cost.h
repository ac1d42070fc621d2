// comm_cost.h: the time of one collective (or point-to-point exchange) of one parallel group,
// taken from strata's own tuner and cost model on the group's placement.
//
// A group is described by its shape: how many nodes it spans and which local ranks (GPUs) it
// holds on each node (node-major placement, as the launcher places ranks). The shape fixes the
// link classes and rails between members, so every group of that shape costs the same. For a
// shape, each candidate algorithm is timed by CostModel::predict (the simulator's timed mode, the
// tuner's own method) at two sizes, giving time = a + b * bytes; groups larger than 128 ranks are
// timed on two smaller groups of the same per-node pattern and extrapolated along the algorithm's
// scaling (rounds linear or logarithmic in nodes, bandwidth term c0 - c1/N). The algorithm is the
// one the runtime would choose (chooseAlgo: thresholds on one node, fastest predicted across
// nodes, hierarchical above 256 ranks). Fits are cached per (shape, collective, algorithm), so a
// 16K-GPU search simulates each shape once.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "collectives/parallel_groups.h"
#include "collectives/schedule.h"
#include "planner/hardware.h"

namespace strata::planner {

struct GroupShape {
  int size = 1;             ///< ranks in the group
  int nodes = 1;            ///< nodes it spans
  std::vector<int> locals;  ///< local ranks (GPU indices) of its members on each node
  bool uniform = true;      ///< every node holds the same local ranks
  std::string key() const;  ///< "4x{0,2,4,6}"
};

/// The shape of the group of `dims` (bit d: dimension d of the ParallelSpec) holding rank 0, with
/// ranks placed node-major, `gpusPerNode` per node.
GroupShape groupShape(const ParallelSpec& spec, unsigned dims, int gpusPerNode);

struct CommTime {
  double seconds = 0;
  Algo algo = Algo::Auto;  ///< Auto for point-to-point
};

class CommCoster {
 public:
  /// `localSlowdown` > 1: the copies and reductions inside a node (shared memory, same process)
  /// run that many times slower, their latency that much longer, as when CPU ranks share cores
  /// with busy peers (the network's wire time is not slowed).
  explicit CommCoster(const HardwareSpec& hw, double localSlowdown = 1);
  /// `bytes`: the collective's full buffer per rank (tuner convention: count * n for
  /// reduce-scatter, all-gather and all-to-all).
  CommTime collective(const GroupShape& g, CollType coll, double bytes);
  /// The same call with the algorithm given (another coster's choice: what the runtime picks is
  /// decided without this coster's slowdown); ring's time where `algo` has no schedule.
  double seconds(const GroupShape& g, CollType coll, Algo algo, double bytes);
  /// One call of `algo` run through the simulator on the group's full placement at exactly
  /// `bytes` (no fit, no extrapolation): what --simulate uses. Cached; -1 if `algo` has no schedule.
  double exact(const GroupShape& g, CollType coll, Algo algo, double bytes);
  /// One message of `bytes` between neighbouring members (the slowest such link).
  double p2p(const GroupShape& g, double bytes);
  /// Fits simulated so far (for reports and tests).
  int simulations() const { return sims_; }
  const CostModel::Costs& costs() const { return costs_; }

 private:
  struct Fit {
    double a = 0, b = 0;  // seconds = a + b * bytes
  };
  Fit fitAt(const GroupShape& g, int nodes, CollType coll, Algo algo);
  double timeOf(const GroupShape& g, CollType coll, Algo algo, double bytes);
  /// The link costs a group of this shape sees (network bandwidth shared with its siblings: railSharing).
  CostModel::Costs costsFor(const GroupShape& g) const;

  HardwareSpec hw_;
  CostModel::Costs costs_;
  std::map<std::tuple<std::string, int, int, int>, Fit> fits_;
  std::map<std::tuple<std::string, int, long>, Algo> choice_;
  std::map<std::tuple<std::string, int, int, double>, double> exact_;
  int sims_ = 0;
};

/// How many groups of this shape's dimension share each of a node's rails with it: its sibling
/// groups (the same dimension's other groups, holding the node's other local ranks) communicate at
/// the same time (every dp group reduces the same buckets, every tp group runs the same layer), and
/// ranks on one rail share its NIC. 1 on a rail-optimised node (a rail per GPU) or inside a node;
/// 4 for a group with one rank per node where 4 ranks share a node's single NIC. The group's
/// network bandwidth is divided by it.
int railSharing(const GroupShape& g, const HardwareSpec& hw);

/// The representative layout of a shape on `nodes` nodes (rails by local rank, NVLink when the
/// cluster has it).
topology::CommLayout shapeLayout(const GroupShape& g, int nodes, const HardwareSpec& hw);

}  // namespace strata::planner
