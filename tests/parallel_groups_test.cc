// parallel_groups_test: the parallel-groups API (strataParallelGroups*, strata::ParallelGroups).
//
// 1. The mesh arithmetic on its own: coordinates for every order, group memberships against a
//    brute-force definition and against hand-written lists (tp2 pp2 dp2; tp2 cp2 dp2; ep2 dp2 tp2;
//    order variants), messages for bad sizes and orders.
// 2. The placement report as golden text on layouts built from the shipped cluster file
//    (topology/files/cluster_4node_rails.json: 4 DGX nodes x 8 ranks, NVLink, 8 rails) and from
//    synthetic layouts; the order proposal and the placement problems it fixes.
// 3. Ranks as threads (8): every group communicator has the expected size, rank and members
//    (an all-reduce of 2^worldRank sums exactly the members' bits), coordinates, the report is
//    the same on every rank; bad arguments fail on every rank with the message on the world;
//    ranks on virtual nodes (topology/files/virtual_2x4.json): the report shows tp inside nodes,
//    a tp-across-nodes order warns, and with STRATA_STRICT_PLACEMENT=1 fails naming the group and
//    the order to use; the C++ class (borrowed communicators, report, coords, proposeOrder, errors).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "collectives/comm.h"
#include "collectives/parallel_groups.h"
#include "strata/strata.hpp"
#include "support/thread_ranks.h"
#include "topology/topo_file.h"

using namespace strata;
using namespace strata::testing;

namespace {

std::string topoFile(const std::string& name) {
  std::string here = __FILE__;  // .../tests/parallel_groups_test.cc
  return here.substr(0, here.rfind("/tests/")) + "/topology/files/" + name;
}

ParallelSpec spec(int tp, int cp, int ep, int dp, int pp, const char* order = nullptr) {
  strataParallelSizes_t s{tp, cp, ep, dp, pp, order};
  ParallelSpec out;
  Status st = makeParallelSpec(s, tp * cp * ep * dp * pp, &out);
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

using Groups = std::vector<std::vector<int>>;

/// The definition, written independently: ranks in one group share every coordinate outside the
/// kind's dimensions (coordinates from the mixed radix, first order entry fastest).
Groups bruteForce(const ParallelSpec& s, int kind) {
  const int n = s.world();
  auto coordsOf = [&](int r) {
    std::array<int, 5> c{};
    for (int i = 0; i < 5; ++i) {
      c[s.order[i]] = r % s.size[s.order[i]];
      r /= s.size[s.order[i]];
    }
    return c;
  };
  const unsigned dims = groupDims(kind);
  Groups out;
  std::vector<bool> done(n);
  for (int a = 0; a < n; ++a) {
    if (done[a]) continue;
    std::vector<int> g;
    for (int b = 0; b < n; ++b) {
      bool same = true;
      for (int d = 0; d < 5; ++d)
        if (!(dims & (1u << d)) && coordsOf(a)[d] != coordsOf(b)[d]) same = false;
      if (same) g.push_back(b), done[b] = true;
    }
    out.push_back(g);
  }
  return out;
}

// ---- 1. mesh arithmetic ----------------------------------------------------------------------

TEST(ParallelSpec, CoordinatesFollowTheOrder) {
  ParallelSpec s = spec(2, 1, 1, 2, 2);
  EXPECT_EQ(s.orderString(), "tp-cp-ep-dp-pp");
  EXPECT_EQ(s.describe(), "tp2 cp1 ep1 dp2 pp2");
  EXPECT_EQ(s.coords(0), (std::array<int, 5>{0, 0, 0, 0, 0}));
  EXPECT_EQ(s.coords(1), (std::array<int, 5>{1, 0, 0, 0, 0}));
  EXPECT_EQ(s.coords(2), (std::array<int, 5>{0, 0, 0, 1, 0}));
  EXPECT_EQ(s.coords(7), (std::array<int, 5>{1, 0, 0, 1, 1}));
  ParallelSpec p = spec(2, 1, 1, 2, 2, "pp-dp-tp-cp-ep");
  EXPECT_EQ(p.coords(1), (std::array<int, 5>{0, 0, 0, 0, 1}));
  EXPECT_EQ(p.coords(4), (std::array<int, 5>{1, 0, 0, 0, 0}));
  for (int r = 0; r < 8; ++r) EXPECT_EQ(p.rankOf(p.coords(r)), r);
}

TEST(ParallelSpec, MembershipTp2Pp2Dp2) {
  ParallelSpec s = spec(2, 1, 1, 2, 2);
  EXPECT_EQ(groupMembers(s, strataGroupTp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(groupMembers(s, strataGroupDp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(groupMembers(s, strataGroupPp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(groupMembers(s, strataGroupCp), (Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  EXPECT_EQ(groupMembers(s, strataGroupDpCp), groupMembers(s, strataGroupDp));  // ep = cp = 1
  EXPECT_EQ(groupMembers(s, strataGroupEdp), groupMembers(s, strataGroupDp));
  EXPECT_EQ(groupMembers(s, strataGroupTpCp), groupMembers(s, strataGroupTp));
  EXPECT_EQ(groupMembers(s, strataGroupMp), (Groups{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(groupMembers(s, strataGroupWorld), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
}

TEST(ParallelSpec, MembershipTp2Cp2Dp2) {
  ParallelSpec s = spec(2, 2, 1, 2, 1);
  EXPECT_EQ(groupMembers(s, strataGroupTp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(groupMembers(s, strataGroupCp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(groupMembers(s, strataGroupDp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(groupMembers(s, strataGroupDpCp), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(groupMembers(s, strataGroupTpCp), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(groupMembers(s, strataGroupMp), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(groupMembers(s, strataGroupEdp), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
}

TEST(ParallelSpec, MembershipEp2Dp2Tp2) {
  ParallelSpec s = spec(2, 1, 2, 2, 1);
  EXPECT_EQ(groupMembers(s, strataGroupTp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(groupMembers(s, strataGroupEp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(groupMembers(s, strataGroupDp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  // Dense gradients: every rank with the same tp coordinate (ep ranks hold different data).
  EXPECT_EQ(groupMembers(s, strataGroupDpCp), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  // Expert gradients: the ranks holding the same experts (same tp and ep).
  EXPECT_EQ(groupMembers(s, strataGroupEdp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(groupMembers(s, strataGroupMp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
}

TEST(ParallelSpec, MembershipOrderVariant) {
  ParallelSpec s = spec(2, 1, 1, 2, 2, "pp-dp-tp-cp-ep");
  EXPECT_EQ(groupMembers(s, strataGroupPp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(groupMembers(s, strataGroupDp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(groupMembers(s, strataGroupTp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(groupMembers(s, strataGroupMp), (Groups{{0, 1, 4, 5}, {2, 3, 6, 7}}));
}

TEST(ParallelSpec, EveryKindMatchesTheDefinition) {
  const char* orders[] = {"tp-cp-ep-dp-pp", "pp-dp-tp-cp-ep", "dp-tp-pp-ep-cp", "ep-cp-tp-pp-dp"};
  const int shapes[][5] = {{2, 1, 1, 2, 2}, {2, 2, 1, 2, 1}, {2, 1, 2, 2, 1}, {2, 3, 2, 1, 2}, {1, 2, 2, 3, 2}, {4, 1, 1, 1, 1}};
  for (const auto& sh : shapes)
    for (const char* o : orders) {
      ParallelSpec s = spec(sh[0], sh[1], sh[2], sh[3], sh[4], o);
      for (int k = 0; k < strataNumGroups; ++k) {
        Groups g = groupMembers(s, k);
        EXPECT_EQ(g, bruteForce(s, k)) << s.describe() << " " << o << " " << groupKindName(k);
        int expect = 1;
        for (int d = 0; d < 5; ++d)
          if (groupDims(k) & (1u << d)) expect *= s.size[d];
        for (const auto& members : g) EXPECT_EQ(int(members.size()), expect);
      }
    }
}

TEST(ParallelSpec, BadSizesAndOrders) {
  auto message = [](strataParallelSizes_t s, int world) {
    ParallelSpec out;
    Status st = makeParallelSpec(s, world, &out);
    EXPECT_EQ(st.code(), strataInvalidArgument);
    return st.message();
  };
  EXPECT_EQ(message({2, 1, 1, 3, 2, nullptr}, 8), "tp*cp*ep*dp*pp = 2*1*1*3*2 = 12 but the world has 8 ranks");
  EXPECT_EQ(message({0, 1, 1, 8, 1, nullptr}, 8), "tp = 0: every size must be at least 1");
  EXPECT_EQ(message({2, 1, -1, 4, 1, nullptr}, 8), "ep = -1: every size must be at least 1");
  EXPECT_EQ(message({2, 1, 1, 2, 2, "tp-cp-dp-pp"}, 8), "order 'tp-cp-dp-pp' lacks ep");
  EXPECT_EQ(message({2, 1, 1, 2, 2, "tp-cp-ep-tp-pp"}, 8), "order 'tp-cp-ep-tp-pp' names tp twice");
  EXPECT_EQ(message({2, 1, 1, 2, 2, "tp-cp-ep-xp-pp"}, 8),
            "order 'tp-cp-ep-xp-pp' has an unknown dimension 'xp' (the names are tp, cp, ep, dp, pp joined by '-')");
  EXPECT_EQ(message({2, 1, 1, 2, 2, "tp"}, 8), "order 'tp' lacks cp, ep, dp, pp");
  ParallelSpec out;
  EXPECT_TRUE(makeParallelSpec({2, 1, 1, 2, 2, ""}, 8, &out).ok());
  EXPECT_EQ(out.orderString(), "tp-cp-ep-dp-pp");
}

// ---- 2. placement report and order proposal ----------------------------------------------------

/// The layout a job gets from a topology file with a placement: local rank i on GPU i and on the
/// rail of NIC i (ranks as processes, so same-node pairs are NVLink where the GPUs have it).
topology::CommLayout layoutFromFile(const std::string& name) {
  topology::Cluster c;
  Status st = topology::loadTopologyFile(topoFile(name), &c);
  EXPECT_TRUE(st.ok()) << st.message();
  std::vector<topology::RankPlace> places;
  std::vector<int> seen(c.nodes.size());
  for (size_t r = 0; r < c.rankNode.size(); ++r) {
    const int k = c.rankNode[r];
    const int local = seen[size_t(k)]++;
    const topology::Node& node = c.nodes[size_t(k)];
    topology::RankPlace p;
    p.nodeKey = uint64_t(k) + 1;
    p.processKey = r + 1;
    p.nodeName = node.hostname;
    if (!node.gpus.empty()) {
      const topology::Gpu& g = node.gpus[size_t(local) % node.gpus.size()];
      p.gpu = g.index >= 0 ? local % int(node.gpus.size()) : -1;
      p.nvlink = g.nvswitch || g.nvlinks > 0;
    }
    if (!node.nics.empty()) p.rail = node.nics[size_t(local) % node.nics.size()].rail;
    places.push_back(p);
  }
  return topology::CommLayout(places);
}

TEST(PlacementReport, Cluster4NodeRailsTp8Pp2Dp2) {
  topology::CommLayout L = layoutFromFile("cluster_4node_rails.json");
  ASSERT_EQ(L.nranks(), 32);
  EXPECT_EQ(placementReport(L, spec(8, 1, 1, 2, 2)),
            "placement of tp8 cp1 ep1 dp2 pp2 (order tp-cp-ep-dp-pp) on 4 nodes x 8 ranks:\n"
            "  tp      8 ranks x  4 groups: nvlink, 1 node\n"
            "  cp      1 rank  x 32 groups: self, 1 node\n"
            "  ep      1 rank  x 32 groups: self, 1 node\n"
            "  dp      2 ranks x 16 groups: rail, 2 nodes, rails 0-7 (1 per group)\n"
            "  pp      2 ranks x 16 groups: rail, 2 nodes, rails 0-7 (1 per group)\n"
            "  dp_cp   2 ranks x 16 groups: rail, 2 nodes, rails 0-7 (1 per group)\n"
            "  tp_cp   8 ranks x  4 groups: nvlink, 1 node\n"
            "  mp     16 ranks x  2 groups: cross-rail + rail + nvlink, 2 nodes, rails 0-7 (up to 8 per group)\n"
            "  edp     2 ranks x 16 groups: rail, 2 nodes, rails 0-7 (1 per group)\n"
            "  world  32 ranks x  1 group:  cross-rail + rail + nvlink, 4 nodes, rails 0-7 (up to 8 per group)\n");
}

TEST(PlacementReport, Cluster4NodeRailsMoeAndBadOrder) {
  topology::CommLayout L = layoutFromFile("cluster_4node_rails.json");
  // tp2 cp2 ep2 dp2 pp2: tp x cp x ep inside a node, dp and pp across.
  EXPECT_EQ(placementReport(L, spec(2, 2, 2, 2, 2)),
            "placement of tp2 cp2 ep2 dp2 pp2 (order tp-cp-ep-dp-pp) on 4 nodes x 8 ranks:\n"
            "  tp      2 ranks x 16 groups: nvlink, 1 node\n"
            "  cp      2 ranks x 16 groups: nvlink, 1 node\n"
            "  ep      2 ranks x 16 groups: nvlink, 1 node\n"
            "  dp      2 ranks x 16 groups: rail, 2 nodes, rails 0-7 (1 per group)\n"
            "  pp      2 ranks x 16 groups: rail, 2 nodes, rails 0-7 (1 per group)\n"
            "  dp_cp   8 ranks x  4 groups: cross-rail + rail + nvlink, 2 nodes, rails 0-7 (up to 4 per group)\n"
            "  tp_cp   4 ranks x  8 groups: nvlink, 1 node\n"
            "  mp      8 ranks x  4 groups: cross-rail + rail + nvlink, 2 nodes, rails 0-7 (up to 4 per group)\n"
            "  edp     4 ranks x  8 groups: cross-rail + rail + nvlink, 2 nodes, rails 0-7 (up to 2 per group)\n"
            "  world  32 ranks x  1 group:  cross-rail + rail + nvlink, 4 nodes, rails 0-7 (up to 8 per group)\n");
  // Data parallelism fastest: tp peers 4 ranks apart straddle nodes.
  const std::string bad = placementReport(L, spec(8, 1, 1, 4, 1, "dp-tp-cp-ep-pp"));
  EXPECT_NE(bad.find("  tp      8 ranks x  4 groups: cross-rail + rail + nvlink, 4 nodes, rails 0-7 (up to 2 per group)\n"),
            std::string::npos)
      << bad;
  EXPECT_NE(bad.find("  warning: tp groups cross nodes with order dp-tp-cp-ep-pp on 4 nodes x 8 ranks (a tp group spans 4 "
                     "nodes); use order tp-dp-cp-ep-pp instead: it keeps tp inside nodes of 8 ranks\n"),
            std::string::npos)
      << bad;
}

TEST(PlacementReport, SyntheticLayouts) {
  // Two nodes of four processes, rails unknown: shared memory inside, rail 0 across.
  topology::CommLayout L = topology::CommLayout::fromNodes({0, 0, 0, 0, 1, 1, 1, 1});
  EXPECT_EQ(placementReport(L, spec(2, 1, 1, 2, 2)),
            "placement of tp2 cp1 ep1 dp2 pp2 (order tp-cp-ep-dp-pp) on 2 nodes x 4 ranks:\n"
            "  tp     2 ranks x 4 groups: shm, 1 node\n"
            "  cp     1 rank  x 8 groups: self, 1 node\n"
            "  ep     1 rank  x 8 groups: self, 1 node\n"
            "  dp     2 ranks x 4 groups: shm, 1 node\n"
            "  pp     2 ranks x 4 groups: rail, 2 nodes, rail 0\n"
            "  dp_cp  2 ranks x 4 groups: shm, 1 node\n"
            "  tp_cp  2 ranks x 4 groups: shm, 1 node\n"
            "  mp     4 ranks x 2 groups: rail + shm, 2 nodes, rail 0\n"
            "  edp    2 ranks x 4 groups: shm, 1 node\n"
            "  world  8 ranks x 1 group:  rail + shm, 2 nodes, rail 0\n");
  // Uneven nodes (3 + 5 ranks, 2 rails by local rank): the tp2 group {2, 3} straddles them (local
  // ranks 2 and 0, both on rail 0), and no order keeps every tp pair on one node.
  topology::CommLayout U = topology::CommLayout::fromNodes({0, 0, 0, 1, 1, 1, 1, 1}, 2);
  const std::string u = placementReport(U, spec(2, 1, 1, 4, 1));
  EXPECT_NE(u.find("  tp     2 ranks x 4 groups: rail + shm, 1-2 nodes, rail 0\n"), std::string::npos) << u;
  EXPECT_NE(u.find("warning: tp groups cross nodes"), std::string::npos) << u;
  EXPECT_NE(u.find("no order keeps tp groups (2 ranks) inside nodes of 3 ranks or more"), std::string::npos) << u;
}

TEST(OrderProposal, KeepsTpThenCpInsideNodes) {
  topology::CommLayout L = topology::CommLayout::fromNodes({0, 0, 0, 0, 1, 1, 1, 1});
  // Already good: the requested order itself.
  OrderProposal p = proposeRankOrder(L, spec(2, 1, 1, 2, 2));
  EXPECT_TRUE(p.found && p.keepsCp);
  EXPECT_EQ(p.order, "tp-cp-ep-dp-pp");
  EXPECT_EQ(p.note, "tp-cp-ep-dp-pp keeps tp inside nodes of 4 ranks");
  // pp fastest puts tp 4 ranks apart: the nearest fix swaps dp and tp.
  p = proposeRankOrder(L, spec(2, 1, 1, 2, 2, "pp-dp-tp-cp-ep"));
  EXPECT_EQ(p.order, "pp-tp-dp-cp-ep");
  EXPECT_TRUE(groupsInsideNodes(L, spec(2, 1, 1, 2, 2, p.order.c_str()), strataGroupTp));
  EXPECT_EQ(placementProblem(L, spec(2, 1, 1, 2, 2, "pp-dp-tp-cp-ep")),
            "tp groups cross nodes with order pp-dp-tp-cp-ep on 2 nodes x 4 ranks (a tp group spans 2 nodes); use "
            "order pp-tp-dp-cp-ep instead: it keeps tp inside nodes of 4 ranks");
  // tp2 cp2 dp2 with dp fastest: tp (stride 2) stays inside a node of 4, cp (stride 4) does not,
  // though tp x cp fits a node: moving dp behind them fixes it.
  EXPECT_EQ(placementProblem(L, spec(2, 2, 1, 2, 1, "dp-tp-cp-ep-pp")),
            "cp groups cross nodes with order dp-tp-cp-ep-pp on 2 nodes x 4 ranks (a cp group spans 2 nodes); "
            "use order tp-cp-dp-ep-pp instead: it keeps tp and cp inside nodes of 4 ranks");
  p = proposeRankOrder(L, spec(2, 2, 1, 2, 1, "dp-tp-cp-ep-pp"));
  EXPECT_EQ(p.note, "tp-cp-dp-ep-pp keeps tp and cp inside nodes of 4 ranks");
  // tp4 cp2: cp cannot stay inside a node of 4 as well; no problem reported for it.
  p = proposeRankOrder(L, spec(4, 2, 1, 1, 1));
  EXPECT_TRUE(p.found);
  EXPECT_FALSE(p.keepsCp);
  EXPECT_EQ(p.note, "tp-cp-ep-dp-pp keeps tp inside nodes of 4 ranks; no order keeps cp groups (2 ranks) inside as well");
  EXPECT_EQ(placementProblem(L, spec(4, 2, 1, 1, 1)), "");
  // tp larger than a node: nothing keeps it inside.
  p = proposeRankOrder(L, spec(8, 1, 1, 1, 1));
  EXPECT_FALSE(p.found);
  EXPECT_EQ(p.note, "no order keeps tp groups (8 ranks) inside nodes of 4 ranks (2 nodes x 4 ranks)");
  EXPECT_EQ(placementProblem(L, spec(8, 1, 1, 1, 1)),
            "tp groups cross nodes with order tp-cp-ep-dp-pp on 2 nodes x 4 ranks (a tp group spans 2 nodes); no "
            "order keeps tp groups (8 ranks) inside nodes of 4 ranks (2 nodes x 4 ranks)");
  // Round-robin placement (rank r on node r % 2): tp must stride by 2.
  topology::CommLayout R = topology::CommLayout::fromNodes({0, 1, 0, 1, 0, 1, 0, 1});
  p = proposeRankOrder(R, spec(2, 1, 1, 2, 2));
  EXPECT_TRUE(groupsInsideNodes(R, spec(2, 1, 1, 2, 2, p.order.c_str()), strataGroupTp)) << p.order;
  EXPECT_EQ(p.order, "dp-tp-cp-ep-pp");
}

// ---- 3. ranks as threads ------------------------------------------------------------------

std::mutex gMu;

/// Creates the groups on n thread ranks and checks every kind: size, rank, members (by an
/// all-reduce of 2^worldRank), coordinates; returns rank 0's report.
std::string checkGroupsOnThreads(int n, strataParallelSizes_t sizes) {
  ParallelSpec s;
  EXPECT_TRUE(makeParallelSpec(sizes, n, &s).ok());
  std::vector<std::string> reports(static_cast<size_t>(n));
  runThreadRanks(n, [&](strataComm_t world, int rank) {
    strataParallelGroups_t g = nullptr;
    ASSERT_EQ(strataParallelGroupsCreate(world, &sizes, &g), strataSuccess) << strataGetLastError(world);
    int coords[STRATA_PARALLEL_DIMS];
    ASSERT_EQ(strataParallelGroupsCoord(g, coords), strataSuccess);
    for (int d = 0; d < 5; ++d) EXPECT_EQ(coords[d], s.coords(rank)[d]) << "rank " << rank << " dim " << d;
    for (int k = 0; k < strataNumGroups; ++k) {
      strataComm_t c = nullptr;
      ASSERT_EQ(strataParallelGroupsComm(g, strataGroupKind_t(k), &c), strataSuccess);
      std::vector<int> members;
      for (const auto& grp : groupMembers(s, k))
        if (std::find(grp.begin(), grp.end(), rank) != grp.end()) members = grp;
      int size = 0, r = -1;
      ASSERT_EQ(strataCommCount(c, &size), strataSuccess);
      ASSERT_EQ(strataCommUserRank(c, &r), strataSuccess);
      EXPECT_EQ(size, int(members.size())) << groupKindName(k) << " rank " << rank;
      EXPECT_EQ(r, int(std::find(members.begin(), members.end(), rank) - members.begin()))
          << groupKindName(k) << " rank " << rank;
      int64_t mine = int64_t(1) << rank, sum = 0, expect = 0;
      for (int m : members) expect += int64_t(1) << m;
      ASSERT_EQ(strataAllReduce(&mine, &sum, 1, strataInt64, strataSum, c), strataSuccess) << strataGetLastError(c);
      EXPECT_EQ(sum, expect) << groupKindName(k) << " rank " << rank;
    }
    size_t need = 0;
    ASSERT_EQ(strataParallelGroupsReport(g, nullptr, 0, &need), strataSuccess);
    std::string text(need, '\0');
    ASSERT_EQ(strataParallelGroupsReport(g, text.data(), need, nullptr), strataSuccess);
    text.resize(need - 1);
    {
      std::lock_guard<std::mutex> lock(gMu);
      reports[size_t(rank)] = text;
    }
    EXPECT_EQ(strataParallelGroupsDestroy(g), strataSuccess);
    EXPECT_EQ(strataParallelGroupsDestroy(g), strataInvalidArgument);  // no longer live
  });
  for (int r = 1; r < n; ++r) EXPECT_EQ(reports[size_t(r)], reports[0]) << "rank " << r;
  return reports[0];
}

TEST(ParallelGroupsThreads, Tp2Pp2Dp2) {
  const std::string rep = checkGroupsOnThreads(8, {2, 1, 1, 2, 2, nullptr});
  EXPECT_EQ(rep.substr(0, rep.find('\n')), "placement of tp2 cp1 ep1 dp2 pp2 (order tp-cp-ep-dp-pp) on 1 node x 8 ranks:");
  EXPECT_NE(rep.find("  tp     2 ranks x 4 groups: same-process, 1 node\n"), std::string::npos) << rep;
}
TEST(ParallelGroupsThreads, Tp2Cp2Dp2) { checkGroupsOnThreads(8, {2, 2, 1, 2, 1, nullptr}); }
TEST(ParallelGroupsThreads, Ep2Dp2Tp2) { checkGroupsOnThreads(8, {2, 1, 2, 2, 1, nullptr}); }
TEST(ParallelGroupsThreads, OrderVariant) { checkGroupsOnThreads(8, {2, 1, 1, 2, 2, "pp-dp-tp-cp-ep"}); }
TEST(ParallelGroupsThreads, MoeAllFive) { checkGroupsOnThreads(8, {1, 2, 2, 1, 2, "ep-pp-cp-tp-dp"}); }
TEST(ParallelGroupsThreads, OneRank) {
  const std::string rep = checkGroupsOnThreads(1, {1, 1, 1, 1, 1, nullptr});
  EXPECT_NE(rep.find("  world  1 rank  x 1 group:  self, 1 node\n"), std::string::npos) << rep;
}

TEST(ParallelGroupsThreads, BadArgumentsFailOnEveryRankAndLeaveTheWorldUsable) {
  runThreadRanks(4, [&](strataComm_t world, int rank) {
    strataParallelGroups_t g = reinterpret_cast<strataParallelGroups_t>(0x1);
    strataParallelSizes_t s{2, 1, 1, 3, 2, nullptr};
    EXPECT_EQ(strataParallelGroupsCreate(world, &s, &g), strataInvalidArgument);
    EXPECT_EQ(g, nullptr);
    EXPECT_STREQ(strataGetLastError(world), "ParallelGroupsCreate: tp*cp*ep*dp*pp = 2*1*1*3*2 = 12 but the world has 4 ranks");
    s = {2, 1, 1, 2, 1, "tp-cp-dp-pp"};
    EXPECT_EQ(strataParallelGroupsCreate(world, &s, &g), strataInvalidArgument);
    EXPECT_STREQ(strataGetLastError(world), "ParallelGroupsCreate: order 'tp-cp-dp-pp' lacks ep");
    EXPECT_EQ(strataParallelGroupsCreate(world, nullptr, &g), strataInvalidArgument);
    EXPECT_STREQ(strataGetLastError(world), "ParallelGroupsCreate: sizes is NULL");
    EXPECT_EQ(strataParallelGroupsCreate(world, &s, nullptr), strataInvalidArgument);
    EXPECT_EQ(strataParallelGroupsCreate(nullptr, &s, &g), strataInvalidArgument);
    EXPECT_STREQ(strataGetLastError(nullptr), "communicator is NULL");
    // The world still works, and good sizes succeed afterwards.
    int64_t one = 1, sum = 0;
    ASSERT_EQ(strataAllReduce(&one, &sum, 1, strataInt64, strataSum, world), strataSuccess);
    EXPECT_EQ(sum, 4);
    s = {2, 1, 1, 2, 1, nullptr};
    ASSERT_EQ(strataParallelGroupsCreate(world, &s, &g), strataSuccess) << strataGetLastError(world);
    strataComm_t c = nullptr;
    EXPECT_EQ(strataParallelGroupsComm(g, strataNumGroups, &c), strataInvalidArgument);
    EXPECT_STREQ(strataGetLastError(world), "ParallelGroupsComm: invalid group kind 10 (0 .. 9)");
    char small[8];
    size_t need = 0;
    EXPECT_EQ(strataParallelGroupsReport(g, small, sizeof(small), &need), strataInvalidArgument);
    EXPECT_STREQ(small, "placeme");
    EXPECT_GT(need, sizeof(small));
    EXPECT_EQ(strataParallelGroupsDestroy(g), strataSuccess);
    EXPECT_EQ(strataParallelGroupsComm(g, strataGroupTp, &c), strataInvalidArgument);  // destroyed
    EXPECT_EQ(strataParallelGroupsDestroy(nullptr), strataInvalidArgument);
    (void)rank;
  });
}

TEST(ParallelGroupsThreads, ProposeRankOrderCApi) {
  runThreadRanks(2, [&](strataComm_t world, int) {
    strataParallelSizes_t s{2, 1, 1, 1, 1, "pp-dp-ep-cp-tp"};
    char order[STRATA_RANK_ORDER_BYTES], note[256];
    ASSERT_EQ(strataProposeRankOrder(world, &s, order, sizeof(order), note, sizeof(note)), strataSuccess);
    EXPECT_STREQ(order, "pp-dp-ep-cp-tp");  // one node: the order itself is fine
    EXPECT_STREQ(note, "pp-dp-ep-cp-tp keeps tp inside nodes of 2 ranks");
    EXPECT_EQ(strataProposeRankOrder(world, &s, order, 4, nullptr, 0), strataInvalidArgument);
    s.tp = 3;
    EXPECT_EQ(strataProposeRankOrder(world, &s, order, sizeof(order), nullptr, 0), strataInvalidArgument);
    EXPECT_STREQ(strataGetLastError(world), "ProposeRankOrder: tp*cp*ep*dp*pp = 3*1*1*1*1 = 3 but the world has 2 ranks");
  });
}

/// Ranks 0-3 and 4-7 on two virtual nodes (tcp between them).
class VirtualNodes : public ::testing::Test {
 protected:
  ScopedEnv topo_{"STRATA_TOPO_FILE", topoFile("virtual_2x4.json")};
};

TEST_F(VirtualNodes, ReportShowsTpInsideNodes) {
  const std::string rep = checkGroupsOnThreads(8, {2, 1, 1, 2, 2, nullptr});
  // Inside a node the ranks are threads of one process; between the nodes the network (which
  // rails depends on this machine's interfaces, so only the class and the nodes are checked).
  for (const char* line : {"placement of tp2 cp1 ep1 dp2 pp2 (order tp-cp-ep-dp-pp) on 2 nodes x 4 ranks:\n",
                           "\n  tp     2 ranks x 4 groups: same-process, 1 node\n",
                           "\n  dp     2 ranks x 4 groups: same-process, 1 node\n",
                           "\n  pp     2 ranks x 4 groups: rail, 2 nodes, rail",
                           "\n  dp_cp  2 ranks x 4 groups: same-process, 1 node\n",
                           "\n  mp     4 ranks x 2 groups: ", "+ same-process, 2 nodes, rail",
                           "\n  world  8 ranks x 1 group:  "})
    EXPECT_NE(rep.find(line), std::string::npos) << line << " not in\n" << rep;
  EXPECT_EQ(rep.find("warning"), std::string::npos) << rep;
}

TEST_F(VirtualNodes, TpAcrossNodesWarnsAndWorks) {
  const std::string rep = checkGroupsOnThreads(8, {2, 1, 1, 2, 2, "pp-dp-tp-cp-ep"});
  EXPECT_NE(rep.find("  tp     2 ranks x 4 groups: rail, 2 nodes, rail"), std::string::npos) << rep;
  EXPECT_NE(rep.find("  warning: tp groups cross nodes with order pp-dp-tp-cp-ep on 2 nodes x 4 ranks (a tp group "
                     "spans 2 nodes); use order pp-tp-dp-cp-ep instead: it keeps tp inside nodes of 4 ranks\n"),
            std::string::npos)
      << rep;
}

TEST_F(VirtualNodes, StrictPlacementFailsNamingTheGroupAndTheOrder) {
  ScopedEnv strict("STRATA_STRICT_PLACEMENT", "1");
  runThreadRanks(8, [&](strataComm_t world, int) {
    strataParallelSizes_t s{2, 1, 1, 2, 2, "pp-dp-tp-cp-ep"};
    strataParallelGroups_t g = nullptr;
    EXPECT_EQ(strataParallelGroupsCreate(world, &s, &g), strataInvalidArgument);
    EXPECT_EQ(g, nullptr);
    EXPECT_STREQ(strataGetLastError(world),
                 "ParallelGroupsCreate: tp groups cross nodes with order pp-dp-tp-cp-ep on 2 nodes x 4 ranks (a tp "
                 "group spans 2 nodes); use order pp-tp-dp-cp-ep instead: it keeps tp inside nodes of 4 ranks "
                 "(STRATA_STRICT_PLACEMENT=1)");
    // The proposed order is accepted.
    char order[STRATA_RANK_ORDER_BYTES];
    ASSERT_EQ(strataProposeRankOrder(world, &s, order, sizeof(order), nullptr, 0), strataSuccess);
    s.order = order;
    ASSERT_EQ(strataParallelGroupsCreate(world, &s, &g), strataSuccess) << strataGetLastError(world);
    EXPECT_EQ(strataParallelGroupsDestroy(g), strataSuccess);
  });
}

TEST(ParallelGroupsCpp, BorrowedCommunicatorsReportCoordsAndErrors) {
  std::vector<strata::Communicator> worlds = strata::Communicator::threads(4);
  std::vector<std::thread> ts;
  for (int r = 0; r < 4; ++r)
    ts.emplace_back([&, r] {
      strata::Communicator& world = worlds[size_t(r)];
      strata::ParallelSizes sizes;
      sizes.tp = 2, sizes.dp = 2;
      strata::ParallelGroups made(world, sizes);
      strata::ParallelGroups g = std::move(made);  // borrowed communicators survive the move
      strata::Communicator& tp = g.comm(strataGroupTp);
      EXPECT_FALSE(tp.owned());
      EXPECT_EQ(tp.size(), 2);
      EXPECT_EQ(tp.rank(), r % 2);
      int64_t x = int64_t(1) << r;
      tp.allReduce(&x, &x, 1);
      EXPECT_EQ(x, r < 2 ? 3 : 12);
      int64_t y = int64_t(1) << r;
      g.comm(strataGroupDp).allReduce(&y, &y, 1);
      EXPECT_EQ(y, r % 2 == 0 ? 5 : 10);
      EXPECT_EQ(g.coords(), (std::array<int, 5>{r % 2, 0, 0, r / 2, 0}));
      EXPECT_EQ(g.report().substr(0, 21), "placement of tp2 cp1 ");
      {
        strata::Communicator view = strata::Communicator::borrow(tp.get());
      }  // destroying a borrowed handle leaves the communicator alone
      EXPECT_EQ(tp.size(), 2);
      std::string note;
      EXPECT_EQ(strata::ParallelGroups::proposeOrder(world, sizes, &note), "tp-cp-ep-dp-pp");
      EXPECT_EQ(note, "tp-cp-ep-dp-pp keeps tp inside nodes of 4 ranks");
      strata::ParallelSizes bad = sizes;
      bad.order = "tp-tp";
      try {
        strata::ParallelGroups(world, bad);
        ADD_FAILURE() << "no error for a bad order";
      } catch (const strata::Error& e) {
        EXPECT_EQ(e.code(), strataInvalidArgument);
        EXPECT_EQ(std::string(e.what()), "invalid argument: ParallelGroupsCreate: order 'tp-tp' names tp twice");
      }
      EXPECT_THROW(g.comm(strataGroupKind_t(42)), strata::Error);
      world.barrier();  // every rank is done with the groups before any destroys its own
    });
  for (auto& t : ts) t.join();
}

}  // namespace
