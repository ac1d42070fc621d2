// job_topology_test.cc: the layout a communicator builds from its ranks' infos: nodes by node
// identity, home rails by NUMA locality of interfaces and CPUs, link rates into the cost model's
// rail bandwidth, and the NUMA domain of a CPU mask. Run: ctest -R JobTopology.
#include <gtest/gtest.h>

#include <fstream>
#include <vector>

#include "collectives/job_topology.h"
#include "transport/config.h"

namespace strata {
namespace {

RankInfo rankOn(uint64_t node, uint64_t process, int numa, std::vector<int> ifNuma, uint32_t mbps = 0) {
  RankInfo i;
  i.hostHash = i.nodeHash = node;
  i.processHash = process;
  i.numa = numa;
  i.nifs = static_cast<uint32_t>(ifNuma.size());
  for (size_t k = 0; k < ifNuma.size(); ++k) i.ifNuma[k] = ifNuma[k], i.ifMbps[k] = mbps;
  return i;
}

TEST(JobTopology, RailsFollowLocalRanksWithoutLocality) {
  std::vector<RankInfo> infos;
  for (int r = 0; r < 6; ++r) infos.push_back(rankOn(1 + r / 3, 100 + r, -1, {-1, -1}));
  const topology::CommLayout l = layoutFromInfos(infos);
  EXPECT_EQ(l.nnodes(), 2);
  EXPECT_EQ(l.describe(), "2 nodes x 3 ranks");
  const int want[] = {0, 1, 0, 0, 1, 0};
  for (int r = 0; r < 6; ++r) EXPECT_EQ(l.rail(r), want[r]) << "rank " << r;
  EXPECT_EQ(l.link(0, 3), topology::LinkClass::Rail);
  EXPECT_EQ(l.link(1, 3), topology::LinkClass::CrossRail);
  EXPECT_EQ(l.link(0, 1), topology::LinkClass::SharedMemory);
  EXPECT_EQ(l.messageRail(1, 3), 1);  // the lower rank's rail
}

TEST(JobTopology, RanksTakeTheInterfacesOnTheirNumaDomain) {
  // One node, 4 NICs: 0 and 1 on NUMA 0, 2 and 3 on NUMA 1; ranks bound alternately.
  std::vector<RankInfo> infos;
  for (int r = 0; r < 6; ++r) infos.push_back(rankOn(7, 100 + r, r % 2, {0, 0, 1, 1}));
  const topology::CommLayout l = layoutFromInfos(infos);
  const int want[] = {0, 2, 1, 3, 0, 2};
  for (int r = 0; r < 6; ++r) EXPECT_EQ(l.rail(r), want[r]) << "rank " << r;
  // A rank whose domain has no NIC, or whose CPUs span domains, takes any.
  infos = {rankOn(7, 1, 2, {0, 1}), rankOn(7, 2, -1, {0, 1})};
  const topology::CommLayout m = layoutFromInfos(infos);
  EXPECT_EQ(m.rail(0), 0);
  EXPECT_EQ(m.rail(1), 1);
}

TEST(JobTopology, ThreadsOfOneProcessAndVirtualNodes) {
  std::vector<RankInfo> infos = {rankOn(1, 9, -1, {}), rankOn(1, 9, -1, {}), rankOn(2, 9, -1, {})};
  infos[2].hostHash = 1;  // the same machine, another virtual node
  const topology::CommLayout l = layoutFromInfos(infos);
  EXPECT_EQ(l.link(0, 1), topology::LinkClass::SameProcess);
  EXPECT_EQ(l.nnodes(), 2);
  EXPECT_TRUE(topology::isNetwork(l.link(0, 2)));
  EXPECT_EQ(l.rail(0), -1);
}

TEST(JobTopology, RailBandwidthIsTheSlowestDetectedRate) {
  ASSERT_TRUE(reloadConfig().ok());
  std::vector<RankInfo> infos = {rankOn(1, 1, -1, {-1}, 100000), rankOn(2, 2, -1, {-1}, 25000)};
  CostModel::Costs c = jobLinkCosts(infos);
  EXPECT_DOUBLE_EQ(c[static_cast<size_t>(topology::LinkClass::Rail)].bandwidthGBps, 25000 / 8e3);
  infos[1].ifMbps[0] = 0;  // one rank does not know: the default stays
  c = jobLinkCosts(infos);
  EXPECT_DOUBLE_EQ(c[static_cast<size_t>(topology::LinkClass::Rail)].bandwidthGBps,
                   topology::defaultLinkCost(topology::LinkClass::Rail).bandwidthGBps);
}

TEST(JobTopology, CpuMaskNumaDomain) {
  uint64_t none[4] = {0, 0, 0, 0};
  EXPECT_EQ(cpuNumaDomain(none), -1);
  uint64_t cpu0[4] = {1, 0, 0, 0};
  const bool sysfsNuma = std::ifstream("/sys/devices/system/node/node0/cpulist").good();
  const bool oneDomain = sysfsNuma && !std::ifstream("/sys/devices/system/node/node1/cpulist").good();
  if (!sysfsNuma) {
    EXPECT_EQ(cpuNumaDomain(cpu0), -1);
  }
  if (oneDomain) {
    EXPECT_EQ(cpuNumaDomain(cpu0), 0);
    uint64_t all[4] = {~0ull, ~0ull, ~0ull, ~0ull};
    EXPECT_EQ(cpuNumaDomain(all), 0);
  }
}

}  // namespace
}  // namespace strata
