// auto_bind_test.cc: the binding plan for ranks started without CPU binding (collectives/auto_bind.h)
// on synthetic rank tables: who is bound where, and every case that is left alone.
#include <gtest/gtest.h>

#include "collectives/auto_bind.h"

namespace strata {
namespace {

// CPUs 0..n-1 as a RankInfo mask.
void setCpus(RankInfo* i, std::initializer_list<int> cpus) {
  for (int w = 0; w < 4; ++w) i->cpuMask[w] = 0;
  for (int c : cpus) i->cpuMask[c / 64] |= uint64_t(1) << (c % 64);
}

// `n` ranks, each a process of its own on host `host[r]`, all allowed CPUs 0..3.
std::vector<RankInfo> ranks(const std::vector<uint64_t>& host) {
  std::vector<RankInfo> v(host.size());
  for (size_t r = 0; r < host.size(); ++r) {
    v[r].rank = static_cast<int>(r);
    v[r].hostHash = host[r];
    v[r].processHash = 1000 + r;
    setCpus(&v[r], {0, 1, 2, 3});
  }
  return v;
}

// Binding order as if CPUs 0,2 were the first thread of two cores and 1,3 their siblings.
std::vector<int> siblingsLast(const uint64_t mask[4]) {
  std::vector<int> out;
  for (int c : {0, 2, 1, 3})
    if ((mask[0] >> c) & 1) out.push_back(c);
  return out;
}

TEST(AutoBind, UnboundProcessesGetACpuEachInCoreOrder) {
  auto infos = ranks({7, 7, 7});
  EXPECT_EQ(planAutoBind(infos, 0, siblingsLast).cpu, 0);
  EXPECT_EQ(planAutoBind(infos, 1, siblingsLast).cpu, 2);
  EXPECT_EQ(planAutoBind(infos, 2, siblingsLast).cpu, 1);
  EXPECT_TRUE(planAutoBind(infos, 0, siblingsLast).warning.empty());
}

TEST(AutoBind, LocalIndexCountsOnlyTheRanksOfTheSameMachine) {
  auto infos = ranks({1, 2, 1, 2});  // ranks 0,2 on host 1; ranks 1,3 on host 2
  EXPECT_EQ(planAutoBind(infos, 0, siblingsLast).cpu, 0);
  EXPECT_EQ(planAutoBind(infos, 2, siblingsLast).cpu, 2);
  EXPECT_EQ(planAutoBind(infos, 1, siblingsLast).cpu, 0);
  EXPECT_EQ(planAutoBind(infos, 3, siblingsLast).cpu, 2);
}

TEST(AutoBind, MoreRanksThanCpusAreLeftUnbound) {
  auto infos = ranks({7, 7, 7, 7, 7});
  const AutoBindPlan p = planAutoBind(infos, 4, siblingsLast);
  EXPECT_EQ(p.cpu, -1);
  EXPECT_NE(p.reason.find("more ranks than CPUs"), std::string::npos) << p.reason;
}

TEST(AutoBind, ThreadRanksOfOneProcessAreLeftToTheApplication) {
  auto infos = ranks({7, 7});
  infos[1].processHash = infos[0].processHash;
  const AutoBindPlan p = planAutoBind(infos, 0, siblingsLast);
  EXPECT_EQ(p.cpu, -1);
  EXPECT_NE(p.reason.find("threads of one process"), std::string::npos) << p.reason;
}

TEST(AutoBind, RanksTheLauncherBoundStayWhereTheyAre) {
  auto infos = ranks({7, 7});
  setCpus(&infos[0], {0, 1});
  setCpus(&infos[1], {2, 3});
  EXPECT_EQ(planAutoBind(infos, 0, siblingsLast).cpu, -1);
  EXPECT_EQ(planAutoBind(infos, 1, siblingsLast).cpu, -1);
  setCpus(&infos[0], {1});
  setCpus(&infos[1], {1});  // a bad launch: both on CPU 1
  const AutoBindPlan p = planAutoBind(infos, 0, siblingsLast);
  EXPECT_EQ(p.cpu, -1);
  EXPECT_NE(p.warning.find("ranks 0 and 1 are both bound to CPU 1"), std::string::npos) << p.warning;
}

TEST(AutoBind, ARankAloneOnItsMachineIsLeftAlone) {
  auto infos = ranks({1, 2});
  EXPECT_EQ(planAutoBind(infos, 0, siblingsLast).cpu, -1);
  EXPECT_EQ(planAutoBind(infos, 1, siblingsLast).cpu, -1);
}

}  // namespace
}  // namespace strata
