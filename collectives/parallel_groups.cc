// parallel_groups.cc: mesh coordinates, group membership, the placement report and the rank-order
// proposal (see parallel_groups.h).
#include "collectives/parallel_groups.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <set>

namespace strata {

namespace {

constexpr const char* kDimNames[kParallelDims] = {"tp", "cp", "ep", "dp", "pp"};
constexpr const char* kKindNames[kGroupKinds] = {"tp", "cp", "ep", "dp", "pp", "dp_cp", "tp_cp", "mp", "edp", "world"};
constexpr unsigned bit(int d) { return 1u << d; }
constexpr int TP = 0, CP = 1, EP = 2, DP = 3, PP = 4;

std::string plural(long n, const char* word) { return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s"); }

/// "0", "0-7", "0,2,5-6".
std::string railList(const std::vector<int>& rails) {
  std::string s;
  for (size_t i = 0; i < rails.size();) {
    size_t j = i;
    while (j + 1 < rails.size() && rails[j + 1] == rails[j] + 1) ++j;
    s += (s.empty() ? "" : ",") + (j > i ? fmt::format("{}-{}", rails[i], rails[j]) : std::to_string(rails[i]));
    i = j + 1;
  }
  return s;
}

/// True when every group of `kind` lies on the node of its first member.
bool insideNodes(const topology::CommLayout& layout, const ParallelSpec& spec, int kind) {
  std::vector<int> nodeOf(static_cast<size_t>(spec.world()), -1);
  for (int r = 0; r < spec.world(); ++r) {
    int& n = nodeOf[static_cast<size_t>(groupColor(spec, kind, r))];
    if (n < 0) n = layout.node(r);
    else if (n != layout.node(r)) return false;
  }
  return true;
}

/// Pairs of dimensions that a and b put in different relative order; with `sized`, only pairs of
/// dimensions larger than 1 (the others do not change which rank gets which coordinates).
int orderDistance(const std::array<int, kParallelDims>& a, const std::array<int, kParallelDims>& b,
                  const ParallelSpec& spec, bool sized) {
  std::array<int, kParallelDims> posA{}, posB{};
  for (int i = 0; i < kParallelDims; ++i) posA[a[i]] = i, posB[b[i]] = i;
  int d = 0;
  for (int x = 0; x < kParallelDims; ++x)
    for (int y = x + 1; y < kParallelDims; ++y)
      if (!sized || (spec.size[x] > 1 && spec.size[y] > 1)) d += (posA[x] < posA[y]) != (posB[x] < posB[y]);
  return d;
}

std::string nodesText(const topology::CommLayout& layout) {
  if (layout.uniform()) return fmt::format("nodes of {}", plural(layout.ppn(), "rank"));
  int smallest = layout.localSize(0);
  for (int k = 1; k < layout.nnodes(); ++k) smallest = std::min(smallest, layout.localSize(k));
  return fmt::format("nodes of {} ranks or more", smallest);
}

}  // namespace

const char* parallelDimName(int dim) { return dim >= 0 && dim < kParallelDims ? kDimNames[dim] : "unknown"; }

const char* groupKindName(int kind) { return kind >= 0 && kind < kGroupKinds ? kKindNames[kind] : "unknown"; }

unsigned groupDims(int kind) {
  switch (kind) {
    case strataGroupTp: return bit(TP);
    case strataGroupCp: return bit(CP);
    case strataGroupEp: return bit(EP);
    case strataGroupDp: return bit(DP);
    case strataGroupPp: return bit(PP);
    case strataGroupDpCp: return bit(EP) | bit(DP) | bit(CP);
    case strataGroupTpCp: return bit(TP) | bit(CP);
    case strataGroupMp: return bit(TP) | bit(CP) | bit(PP);
    case strataGroupEdp: return bit(DP) | bit(CP);
    case strataGroupWorld: return bit(TP) | bit(CP) | bit(EP) | bit(DP) | bit(PP);
    default: return 0;
  }
}

int ParallelSpec::world() const { return size[0] * size[1] * size[2] * size[3] * size[4]; }

std::array<int, kParallelDims> ParallelSpec::coords(int rank) const {
  std::array<int, kParallelDims> c{};
  for (int i = 0; i < kParallelDims; ++i) {
    c[order[i]] = rank % size[order[i]];
    rank /= size[order[i]];
  }
  return c;
}

int ParallelSpec::rankOf(const std::array<int, kParallelDims>& c) const {
  int r = 0;
  for (int i = kParallelDims - 1; i >= 0; --i) r = r * size[order[i]] + c[order[i]];
  return r;
}

std::string ParallelSpec::orderString() const {
  std::string s;
  for (int i = 0; i < kParallelDims; ++i) s += std::string(i ? "-" : "") + kDimNames[order[i]];
  return s;
}

std::string ParallelSpec::describe() const {
  return fmt::format("tp{} cp{} ep{} dp{} pp{}", size[TP], size[CP], size[EP], size[DP], size[PP]);
}

Status parseRankOrder(const char* order, std::array<int, kParallelDims>* out) {
  const std::string text = order && *order ? order : kDefaultRankOrder;
  std::array<int, kParallelDims> seen{};
  std::vector<int> dims;
  size_t start = 0;
  while (true) {
    const size_t dash = text.find('-', start);
    const std::string name = text.substr(start, dash == std::string::npos ? std::string::npos : dash - start);
    int d = -1;
    for (int i = 0; i < kParallelDims; ++i)
      if (name == kDimNames[i]) d = i;
    if (d < 0)
      return invalidArgument("order '{}' has an unknown dimension '{}' (the names are tp, cp, ep, dp, pp joined by '-')",
                             text, name);
    if (seen[d]++) return invalidArgument("order '{}' names {} twice", text, name);
    dims.push_back(d);
    if (dash == std::string::npos) break;
    start = dash + 1;
  }
  std::string missing;
  for (int d = 0; d < kParallelDims; ++d)
    if (!seen[d]) missing += (missing.empty() ? "" : ", ") + std::string(kDimNames[d]);
  if (!missing.empty()) return invalidArgument("order '{}' lacks {}", text, missing);
  std::copy(dims.begin(), dims.end(), out->begin());
  return OkStatus();
}

Status makeParallelSpec(const strataParallelSizes_t& sizes, int worldSize, ParallelSpec* out) {
  ParallelSpec s;
  const int given[kParallelDims] = {sizes.tp, sizes.cp, sizes.ep, sizes.dp, sizes.pp};
  long product = 1;
  for (int d = 0; d < kParallelDims; ++d) {
    if (given[d] < 1) return invalidArgument("{} = {}: every size must be at least 1", kDimNames[d], given[d]);
    s.size[d] = given[d];
    product *= given[d];
    if (product > worldSize) break;  // no overflow; reported below
  }
  if (product != worldSize) {
    long full = 1;
    for (int d = 0; d < kParallelDims; ++d) full = std::min(full * given[d], 1L << 40);
    return invalidArgument("tp*cp*ep*dp*pp = {}*{}*{}*{}*{} = {} but the world has {} ranks", given[0], given[1],
                           given[2], given[3], given[4], full, worldSize);
  }
  STRATA_RETURN_IF_ERROR(parseRankOrder(sizes.order, &s.order));
  *out = s;
  return OkStatus();
}

int groupColor(const ParallelSpec& spec, int kind, int rank) {
  const unsigned dims = groupDims(kind);
  const std::array<int, kParallelDims> c = spec.coords(rank);
  int color = 0;
  for (int i = kParallelDims - 1; i >= 0; --i) {
    const int d = spec.order[i];
    if (!(dims & bit(d))) color = color * spec.size[d] + c[d];
  }
  return color;
}

std::vector<std::vector<int>> groupMembers(const ParallelSpec& spec, int kind) {
  std::vector<int> index(static_cast<size_t>(spec.world()), -1);
  std::vector<std::vector<int>> groups;
  for (int r = 0; r < spec.world(); ++r) {
    int& g = index[static_cast<size_t>(groupColor(spec, kind, r))];
    if (g < 0) {
      g = static_cast<int>(groups.size());
      groups.emplace_back();
    }
    groups[static_cast<size_t>(g)].push_back(r);
  }
  return groups;
}

int linkSlowness(topology::LinkClass c) {
  using topology::LinkClass;
  switch (c) {
    case LinkClass::SameProcess: return 0;
    case LinkClass::NvLink: return 1;
    case LinkClass::Pcie: return 2;
    case LinkClass::SharedMemory: return 3;
    case LinkClass::Rail: return 4;
    case LinkClass::CrossRail: return 5;
  }
  return 6;
}

GroupPlacement groupPlacement(const topology::CommLayout& layout, const ParallelSpec& spec, int kind) {
  GroupPlacement p;
  const auto groups = groupMembers(spec, kind);
  p.groups = static_cast<int>(groups.size());
  p.size = groups.empty() ? 0 : static_cast<int>(groups[0].size());
  std::array<bool, topology::kLinkClassCount> present{};
  std::set<int> rails;
  p.minNodes = layout.nnodes();
  p.maxNodes = 0;
  for (const std::vector<int>& g : groups) {
    std::set<int> nodes, groupRails;
    for (size_t i = 0; i < g.size(); ++i) {
      nodes.insert(layout.node(g[i]));
      for (size_t j = i + 1; j < g.size(); ++j) {
        const topology::LinkClass c = layout.link(g[i], g[j]);
        present[static_cast<size_t>(c)] = true;
        if (topology::isNetwork(c)) groupRails.insert(layout.messageRail(g[i], g[j]));
      }
    }
    p.minNodes = std::min(p.minNodes, static_cast<int>(nodes.size()));
    p.maxNodes = std::max(p.maxNodes, static_cast<int>(nodes.size()));
    p.maxRailsPerGroup = std::max(p.maxRailsPerGroup, static_cast<int>(groupRails.size()));
    rails.insert(groupRails.begin(), groupRails.end());
  }
  for (int c = 0; c < topology::kLinkClassCount; ++c)
    if (present[static_cast<size_t>(c)]) p.classes.push_back(static_cast<topology::LinkClass>(c));
  std::sort(p.classes.begin(), p.classes.end(),
            [](topology::LinkClass a, topology::LinkClass b) { return linkSlowness(a) > linkSlowness(b); });
  p.rails.assign(rails.begin(), rails.end());
  return p;
}

bool groupsInsideNodes(const topology::CommLayout& layout, const ParallelSpec& spec, int kind) {
  return insideNodes(layout, spec, kind);
}

OrderProposal proposeRankOrder(const topology::CommLayout& layout, const ParallelSpec& spec) {
  // Every permutation, scored by what stays inside nodes (tp, then cp, then tp x cp, then ep),
  // then by closeness to the requested order (pairs of real dimensions swapped, then of any),
  // then by tp and cp varying as fast as possible.
  std::array<int, kParallelDims> perm{0, 1, 2, 3, 4};
  std::array<int, 8> bestScore{};
  std::array<int, kParallelDims> best = spec.order;
  bool first = true;
  do {
    ParallelSpec s = spec;
    s.order = perm;
    const int tpPos = static_cast<int>(std::find(perm.begin(), perm.end(), TP) - perm.begin());
    const int cpPos = static_cast<int>(std::find(perm.begin(), perm.end(), CP) - perm.begin());
    const std::array<int, 8> score = {insideNodes(layout, s, strataGroupTp),  insideNodes(layout, s, strataGroupCp),
                                      insideNodes(layout, s, strataGroupTpCp), insideNodes(layout, s, strataGroupEp),
                                      -orderDistance(perm, spec.order, spec, true),
                                      -orderDistance(perm, spec.order, spec, false), -tpPos, -cpPos};
    if (first || score > bestScore) bestScore = score, best = perm, first = false;
  } while (std::next_permutation(perm.begin(), perm.end()));
  ParallelSpec s = spec;
  s.order = best;
  OrderProposal p;
  p.order = s.orderString();
  p.found = bestScore[0] != 0;
  p.keepsCp = p.found && bestScore[1] != 0;
  const std::string where = nodesText(layout);
  if (!p.found) {
    p.note = fmt::format("no order keeps tp groups ({} ranks) inside {} ({})", spec.size[TP], where, layout.describe());
  } else if (p.keepsCp) {
    p.note = fmt::format("{} keeps tp{} inside {}", p.order, spec.size[CP] > 1 ? " and cp" : "", where);
  } else {
    p.note = fmt::format("{} keeps tp inside {}; no order keeps cp groups ({} ranks) inside as well", p.order, where,
                         spec.size[CP]);
  }
  return p;
}

std::string placementProblem(const topology::CommLayout& layout, const ParallelSpec& spec) {
  const bool tpIn = insideNodes(layout, spec, strataGroupTp);
  const bool cpIn = insideNodes(layout, spec, strataGroupCp);
  if (tpIn && cpIn) return {};
  const OrderProposal p = proposeRankOrder(layout, spec);
  if (tpIn && !p.keepsCp) return {};  // cp must cross nodes whatever the order
  const char* which = !tpIn && !cpIn ? "tp and cp groups cross" : !tpIn ? "tp groups cross" : "cp groups cross";
  const GroupPlacement g = groupPlacement(layout, spec, tpIn ? strataGroupCp : strataGroupTp);
  std::string s = fmt::format("{} nodes with order {} on {} ({} group spans {} nodes)", which, spec.orderString(),
                              layout.describe(), tpIn ? "a cp" : "a tp", g.maxNodes);
  if (!p.found) return s + "; " + p.note;
  return s + fmt::format("; use order {} instead: it keeps tp{} inside {}", p.order, p.keepsCp && spec.size[CP] > 1 ? " and cp" : "",
                         nodesText(layout));
}

std::string placementReport(const topology::CommLayout& layout, const ParallelSpec& spec) {
  std::string s = fmt::format("placement of {} (order {}) on {}:\n", spec.describe(), spec.orderString(),
                              layout.describe());
  const int w = static_cast<int>(std::to_string(spec.world()).size());
  for (int k = 0; k < kGroupKinds; ++k) {
    const GroupPlacement p = groupPlacement(layout, spec, k);
    std::string links;
    for (topology::LinkClass c : p.classes) links += (links.empty() ? "" : " + ") + std::string(topology::linkClassName(c));
    if (links.empty()) links = "self";
    std::string nodes = p.minNodes == p.maxNodes ? plural(p.maxNodes, "node") : fmt::format("{}-{} nodes", p.minNodes, p.maxNodes);
    std::string line = fmt::format("  {:<6} {:>{}} {} x {:>{}} {:<7} {}, {}", groupKindName(k), p.size, w,
                                   p.size == 1 ? "rank " : "ranks", p.groups, w, p.groups == 1 ? "group:" : "groups:",
                                   links, nodes);
    if (p.rails.size() == 1) line += fmt::format(", rail {}", p.rails[0]);
    else if (p.rails.size() > 1)
      line += fmt::format(", rails {} ({} per group)", railList(p.rails),
                          p.maxRailsPerGroup == 1 ? std::string("1") : fmt::format("up to {}", p.maxRailsPerGroup));
    s += line + "\n";
  }
  const std::string problem = placementProblem(layout, spec);
  if (!problem.empty()) s += "  warning: " + problem + "\n";
  return s;
}

}  // namespace strata
