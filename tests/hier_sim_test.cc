// hier_sim_test.cc: proves the hierarchical schedules with the symbolic simulator on layouts of
// 1-8 nodes x 1-8 ranks (node-major, round-robin and uneven placements), every hierarchical
// collective, counts {0, 1, odd, n, 3n-1, 1000}, roots on every node, in and out of place; then
// checks the traffic that makes them worth having: inter-node bytes per rank and one message per
// node pair per rail for all-to-all. Run: ctest -R hier_sim_test.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectives/schedule.h"
#include "collectives/simulator.h"
#include "topology/layout.h"

namespace strata {
namespace {

constexpr CollType kHierColls[] = {CollType::AllReduce, CollType::ReduceScatter, CollType::AllGather,
                                   CollType::Broadcast, CollType::Reduce, CollType::AllToAll};

bool rooted(CollType c) { return c == CollType::Broadcast || c == CollType::Reduce; }

// Node of each rank: blocked (node-major), round-robin, or uneven sizes given per node.
std::vector<int> blockedNodes(int nodes, int ppn) {
  std::vector<int> v;
  for (int k = 0; k < nodes; ++k)
    for (int i = 0; i < ppn; ++i) v.push_back(k);
  return v;
}
std::vector<int> roundRobinNodes(int nodes, int ppn) {
  std::vector<int> v;
  for (int i = 0; i < ppn; ++i)
    for (int k = 0; k < nodes; ++k) v.push_back(k);
  return v;
}
std::vector<int> unevenNodes(const std::vector<int>& sizes) {
  std::vector<int> v;
  for (size_t k = 0; k < sizes.size(); ++k)
    for (int i = 0; i < sizes[k]; ++i) v.push_back(static_cast<int>(k));
  return v;
}

std::string proveAll(CollType coll, const std::vector<int>& nodeOf) {
  const topology::CommLayout layout = topology::CommLayout::fromNodes(nodeOf, 2);
  const int n = static_cast<int>(nodeOf.size());
  std::vector<size_t> counts = {0, 1, 7, size_t(n), 3 * size_t(n) - 1, 1000};
  std::vector<int> roots = {0};
  if (rooted(coll)) roots = {0, n / 2, n - 1};
  for (size_t count : counts)
    for (int root : roots)
      for (bool inPlace : {false, true}) {
        CollArgs a;
        a.coll = coll, a.nranks = n, a.root = root, a.count = count, a.layout = &layout;
        const SimResult r = simulate(Algo::Hier, a, inPlace);
        if (!r.ok)
          return std::string(collName(coll)) + " on " + layout.describe() + " count=" + std::to_string(count) +
                 " root=" + std::to_string(root) + (inPlace ? " in place: " : ": ") + r.error;
      }
  return "";
}

class HierSim : public ::testing::TestWithParam<CollType> {};

TEST_P(HierSim, ProvesNodeMajorLayouts) {
  for (int nodes = 1; nodes <= 8; ++nodes)
    for (int ppn = 1; ppn <= 8; ++ppn) {
      const std::string err = proveAll(GetParam(), blockedNodes(nodes, ppn));
      ASSERT_EQ(err, "");
    }
}

TEST_P(HierSim, ProvesRoundRobinLayouts) {
  for (int nodes = 2; nodes <= 4; ++nodes)
    for (int ppn = 2; ppn <= 4; ++ppn) ASSERT_EQ(proveAll(GetParam(), roundRobinNodes(nodes, ppn)), "");
}

TEST_P(HierSim, ProvesUnevenLayouts) {
  for (const std::vector<int>& sizes : std::vector<std::vector<int>>{{1, 2}, {3, 1, 2}, {4, 4, 1}, {2, 5}, {1, 1, 3, 2}})
    ASSERT_EQ(proveAll(GetParam(), unevenNodes(sizes)), "");
}

TEST_P(HierSim, WithoutLayoutIsOneNode) {
  for (int n = 1; n <= 9; ++n) {
    CollArgs a;
    a.coll = GetParam(), a.nranks = n, a.count = 2 * size_t(n) + 1;
    const SimResult r = simulate(Algo::Hier, a, false);
    ASSERT_TRUE(r.ok) << "n=" << n << ": " << r.error;
  }
}

INSTANTIATE_TEST_SUITE_P(All, HierSim, ::testing::ValuesIn(kHierColls),
                         [](const ::testing::TestParamInfo<CollType>& i) { return std::string(collName(i.param)); });

// Bytes each rank sends to other nodes, and the largest number of messages per node pair.
struct NetTraffic {
  size_t maxRankElems = 0;
  int maxMessagesPerRankPair = 0;
};
NetTraffic interNode(Algo algo, CollType coll, const topology::CommLayout& layout, size_t count) {
  NetTraffic t;
  const int n = layout.nranks();
  for (int r = 0; r < n; ++r) {
    CollArgs a;
    a.coll = coll, a.nranks = n, a.rank = r, a.count = count, a.layout = &layout;
    Schedule s;
    buildSchedule(algo, a, &s);
    size_t elems = 0;
    std::vector<int> msgs(static_cast<size_t>(n), 0);
    for (const Op& op : s.ops)
      if (op.code == OpCode::Send && layout.node(op.peer) != layout.node(r)) {
        elems += op.count;
        ++msgs[static_cast<size_t>(op.peer)];
      }
    t.maxRankElems = std::max(t.maxRankElems, elems);
    for (int m : msgs) t.maxMessagesPerRankPair = std::max(t.maxMessagesPerRankPair, m);
  }
  return t;
}

TEST(HierTraffic, AllReduceSendsTwoNMinusOneOverNOfItsSliceAcrossNodes) {
  const auto layout = topology::CommLayout::fromNodes(blockedNodes(2, 2), 2);
  const size_t C = 1 << 20;
  // Hierarchical: each rank carries 2 (N-1)/N * C/L = C/2 on its own rail.
  EXPECT_EQ(interNode(Algo::Hier, CollType::AllReduce, layout, C).maxRankElems, C / 2);
  // A flat ring in rank order sends 2 (n-1)/n * C = 1.5 C across the node boundary from one rank.
  EXPECT_EQ(interNode(Algo::Ring, CollType::AllReduce, layout, C).maxRankElems, 3 * C / 2);
}

TEST(HierTraffic, AllToAllSendsOneMessagePerNodePairPerRail) {
  const auto layout = topology::CommLayout::fromNodes(blockedNodes(4, 4), 4);
  const NetTraffic t = interNode(Algo::Hier, CollType::AllToAll, layout, 100);
  EXPECT_EQ(t.maxMessagesPerRankPair, 1);
  EXPECT_EQ(t.maxRankElems, 3u * 4 * 100);  // (N-1) nodes x L blocks
  // Only same-local-rank (same-rail) pairs talk across nodes.
  for (int r = 0; r < 16; ++r) {
    CollArgs a;
    a.coll = CollType::AllToAll, a.nranks = 16, a.rank = r, a.count = 100, a.layout = &layout;
    Schedule s;
    buildSchedule(Algo::Hier, a, &s);
    for (const Op& op : s.ops)
      if ((op.code == OpCode::Send || op.code == OpCode::Recv) && layout.node(op.peer) != layout.node(r)) {
        EXPECT_EQ(layout.localRank(op.peer), layout.localRank(r)) << "rank " << r << " " << opToString(op);
      }
  }
}

// Rings on layouts that are not node-major follow the nodes: the ring crosses each node boundary
// once, so per step only N of the n sends leave their node (rank order would cross at every step).
TEST(RingOrder, RoundRobinLayoutsCrossEachNodeBoundaryOnce) {
  for (int nodes = 2; nodes <= 4; ++nodes)
    for (int ppn = 2; ppn <= 4; ++ppn) {
      const auto layout = topology::CommLayout::fromNodes(roundRobinNodes(nodes, ppn), 2);
      const int n = nodes * ppn;
      for (CollType coll : {CollType::AllReduce, CollType::Broadcast, CollType::Reduce})
        for (int root : {0, n - 1})
          for (bool inPlace : {false, true}) {
            CollArgs a;
            a.coll = coll, a.nranks = n, a.root = root, a.count = 1000, a.layout = &layout;
            const SimResult r = simulate(Algo::Ring, a, inPlace);
            ASSERT_TRUE(r.ok) << collName(coll) << " on " << layout.describe() << ": " << r.error;
          }
      int crossing = 0;
      for (int r = 0; r < n; ++r) {
        CollArgs a;
        a.coll = CollType::AllReduce, a.nranks = n, a.rank = r, a.count = 1000, a.layout = &layout;
        Schedule s;
        buildSchedule(Algo::Ring, a, &s);
        const Op& first = s.ops[s.steps[0].firstOp];
        ASSERT_EQ(first.code, OpCode::Send);
        crossing += layout.node(first.peer) != layout.node(r);
      }
      EXPECT_EQ(crossing, nodes) << layout.describe();
    }
}

}  // namespace
}  // namespace strata
