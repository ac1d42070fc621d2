// oversubscription_test.cc: when a communicator counts its ranks as outnumbering the CPUs of their
// machine (collectives/comm.h ranksOutnumberCpus): the union of the local ranks' CPU masks counts,
// not one rank's own mask, so ranks a launcher bound to one CPU each are not oversubscribed.
#include <gtest/gtest.h>

#include <vector>

#include "collectives/comm.h"

namespace {

strata::RankInfo rankOn(uint64_t host, std::vector<int> cpus) {
  strata::RankInfo i;
  i.hostHash = host;
  for (int c : cpus) i.cpuMask[(c / 64) % 4] |= uint64_t(1) << (c % 64);
  return i;
}

TEST(Oversubscription, BoundRanksOnDistinctCpusAreNot) {
  std::vector<strata::RankInfo> infos{rankOn(1, {0}), rankOn(1, {1})};
  EXPECT_FALSE(strata::ranksOutnumberCpus(infos, 0));
  EXPECT_FALSE(strata::ranksOutnumberCpus(infos, 1));
}

TEST(Oversubscription, MoreRanksThanTheirCpusAre) {
  std::vector<strata::RankInfo> shared{rankOn(1, {0, 1}), rankOn(1, {0, 1}), rankOn(1, {0, 1})};
  EXPECT_TRUE(strata::ranksOutnumberCpus(shared, 0));
  std::vector<strata::RankInfo> stacked{rankOn(1, {3}), rankOn(1, {3})};  // two ranks bound to one CPU
  EXPECT_TRUE(strata::ranksOutnumberCpus(stacked, 1));
  std::vector<strata::RankInfo> fit{rankOn(1, {0, 1}), rankOn(1, {0, 1})};
  EXPECT_FALSE(strata::ranksOutnumberCpus(fit, 0));
}

TEST(Oversubscription, OnlyRanksOfTheSameMachineCount) {
  // Two machines with one CPU each and one rank each: nobody is oversubscribed; a third rank on
  // machine 1 oversubscribes machine 1 only.
  std::vector<strata::RankInfo> infos{rankOn(1, {0}), rankOn(2, {0})};
  EXPECT_FALSE(strata::ranksOutnumberCpus(infos, 0));
  infos.push_back(rankOn(1, {0}));
  EXPECT_TRUE(strata::ranksOutnumberCpus(infos, 0));
  EXPECT_FALSE(strata::ranksOutnumberCpus(infos, 1));
}

TEST(Oversubscription, CpusAbove256FoldIntoTheMask) {
  // CPU 256 shares bit 0 with CPU 0: a documented approximation on very large machines.
  std::vector<strata::RankInfo> infos{rankOn(1, {256}), rankOn(1, {1})};
  EXPECT_FALSE(strata::ranksOutnumberCpus(infos, 0));
}

}  // namespace
