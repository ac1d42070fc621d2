// parallel_groups.h: the (tp, cp, ep, dp, pp) training mesh behind strataParallelGroups*: sizes and
// rank order, the dimensions of every group kind, the members of each group, and the placement
// report (which link classes, nodes and rails each kind of group spans on a layout). Everything here
// is a pure function of the sizes, the order and the layout, so every rank computes the same
// groups and the same report without exchanging anything. The C API (c_api_groups.cc) splits the
// world communicator by groupColor(); tests call the functions directly on synthetic layouts.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "strata/strata.h"
#include "topology/layout.h"
#include "transport/status.h"

namespace strata {

constexpr int kParallelDims = STRATA_PARALLEL_DIMS;  ///< tp, cp, ep, dp, pp (indices 0..4)
constexpr int kGroupKinds = strataNumGroups;
constexpr const char* kDefaultRankOrder = "tp-cp-ep-dp-pp";

/// "tp", "cp", "ep", "dp", "pp".
const char* parallelDimName(int dim);
/// "tp", ..., "dp_cp", "tp_cp", "mp", "edp", "world"; "unknown" out of range.
const char* groupKindName(int kind);
/// The dimensions a group of `kind` spans, as a bit mask (bit d: dimension d).
unsigned groupDims(int kind);

/// A validated mesh: the size of each dimension and the rank order.
struct ParallelSpec {
  std::array<int, kParallelDims> size{1, 1, 1, 1, 1};
  std::array<int, kParallelDims> order{0, 1, 2, 3, 4};  ///< order[0] varies fastest

  int world() const;
  std::array<int, kParallelDims> coords(int rank) const;
  int rankOf(const std::array<int, kParallelDims>& c) const;
  std::string orderString() const;  ///< "tp-cp-ep-dp-pp"
  std::string describe() const;     ///< "tp2 cp1 ep1 dp2 pp2"
};

/// Parses "tp-cp-ep-dp-pp" (any permutation; NULL or "" is the default). Errors name what is
/// wrong: "order 'tp-cp-dp-pp' lacks ep", "names dp twice", "has an unknown dimension 'xp'".
Status parseRankOrder(const char* order, std::array<int, kParallelDims>* out);
/// Checks sizes (each >= 1, product == worldSize) and the order.
Status makeParallelSpec(const strataParallelSizes_t& sizes, int worldSize, ParallelSpec* out);

/// Ranks with the same colour form one group of `kind` (the mixed-radix number of the coordinates
/// outside the kind's dimensions, in rank order); within it they are ordered by world rank.
int groupColor(const ParallelSpec& spec, int kind, int rank);
/// Every group of `kind`: members in world-rank order, groups in order of their first member.
std::vector<std::vector<int>> groupMembers(const ParallelSpec& spec, int kind);

/// Where the groups of one kind sit on a layout.
struct GroupPlacement {
  int size = 1, groups = 1;
  std::vector<topology::LinkClass> classes;  ///< every class joining two members, slowest first
  int minNodes = 1, maxNodes = 1;            ///< nodes one group spans (fewest, most)
  std::vector<int> rails;                    ///< rails its cross-node messages take (all groups)
  int maxRailsPerGroup = 0;
};
/// Slowest first: cross-rail, rail, shm, pcie, nvlink, same-process.
int linkSlowness(topology::LinkClass c);
GroupPlacement groupPlacement(const topology::CommLayout& layout, const ParallelSpec& spec, int kind);
/// True when every group of `kind` lies on one node.
bool groupsInsideNodes(const topology::CommLayout& layout, const ParallelSpec& spec, int kind);

/// An order that keeps tp, then cp, inside nodes (see strataProposeRankOrder).
struct OrderProposal {
  bool found = false;   ///< some order keeps tp inside nodes
  bool keepsCp = false; ///< ... and cp too
  std::string order;    ///< the proposal (the nearest such order to spec's own)
  std::string note;     ///< one line: what it achieves, or why nothing does
};
OrderProposal proposeRankOrder(const topology::CommLayout& layout, const ParallelSpec& spec);

/// Empty when the placement is acceptable; else what is wrong and the order to use instead:
/// tp groups cross nodes, or cp groups cross nodes while some order keeps tp and cp inside.
std::string placementProblem(const topology::CommLayout& layout, const ParallelSpec& spec);

/// The placement report: a header line, then one line per group kind (numbers padded to the
/// world size's width):
///   "placement of tp8 cp1 ep1 dp2 pp2 (order tp-cp-ep-dp-pp) on 4 nodes x 8 ranks:"
///   "  tp      8 ranks x  4 groups: nvlink, 1 node"
///   "  pp      2 ranks x 16 groups: rail, 2 nodes, rails 0-7 (1 per group)"
///   "  mp     16 ranks x  2 groups: cross-rail + rail + nvlink, 2 nodes, rails 0-7 (up to 8 per group)"
/// (the link classes among a group's pairs, slowest first, "self" for one rank; the nodes one
/// group spans, "1-2 nodes" when groups differ; the rails its cross-node messages take), and a
/// closing "  warning: ..." line with placementProblem() when there is one.
std::string placementReport(const topology::CommLayout& layout, const ParallelSpec& spec);

}  // namespace strata
