// comm_threads_test.cc: collectives with ranks as threads of one process (the local transport in
// pointer mode): every collective, dtype and op, every algorithm forced through STRATA_ALGO,
// groups driving several communicators from one thread, split, p2p, and bad arguments.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include "collectives/schedule.h"
#include "support/coll_checks.h"
#include "support/thread_ranks.h"

using namespace strata;
using namespace strata::testing;

namespace {

std::mutex gMu;

void expectReport(const CheckReport& rep, int rank) {
  std::lock_guard<std::mutex> lock(gMu);
  for (const auto& f : rep.failures) ADD_FAILURE() << f;
  EXPECT_GT(rep.passed, 0) << "rank " << rank << " ran no check";
}

class ThreadRanks : public ::testing::TestWithParam<int> {};

TEST_P(ThreadRanks, StandardSweep) {
  const int n = GetParam();
  runThreadRanks(n, [&](strataComm_t comm, int rank) {
    CheckReport rep;
    runStandardSweep(comm, n > 3, &rep);
    expectReport(rep, rank);
  });
}

INSTANTIATE_TEST_SUITE_P(N, ThreadRanks, ::testing::Values(1, 2, 3, 5, 8));

struct AlgoCase {
  int n;
  Algo algo;
};

class ForcedAlgo : public ::testing::TestWithParam<AlgoCase> {};

TEST_P(ForcedAlgo, EveryCollectiveItImplements) {
  const AlgoCase c = GetParam();
  ScopedEnv env("STRATA_ALGO", algoName(c.algo));
  const CollType colls[] = {CollType::AllReduce, CollType::ReduceScatter, CollType::AllGather, CollType::Broadcast,
                            CollType::Reduce,    CollType::AllToAll,      CollType::Gather,    CollType::Scatter};
  runThreadRanks(c.n, [&](strataComm_t comm, int rank) {
    CheckReport rep;
    for (CollType coll : colls) {
      if (!algoSupports(c.algo, coll)) continue;
      for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1031), size_t(70001)})
        for (bool inPlace : {false, true})
          checkCollective(comm, coll, strataFloat32, strataSum, count, c.n - 1, inPlace, &rep);
      checkCollective(comm, coll, strataBfloat16, strataMax, 33, 0, false, &rep);
    }
    expectReport(rep, rank);
  });
}

std::vector<AlgoCase> algoCases() {
  std::vector<AlgoCase> v;
  for (Algo a : {Algo::Ring, Algo::Rhd, Algo::Tree, Algo::Direct, Algo::OneShot, Algo::Pairwise, Algo::Bruck,
                 Algo::Linear})
    for (int n : {2, 3, 5, 8}) v.push_back({n, a});
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, ForcedAlgo, ::testing::ValuesIn(algoCases()), [](const auto& info) {
  return std::string(algoName(info.param.algo)) + "_n" + std::to_string(info.param.n);
});

TEST(ThreadRanksGroup, OneThreadDrivesAllCommunicators) {
  const int n = 3;
  std::vector<strataComm_t> comms(n);
  ASSERT_EQ(strataCommInitAll(comms.data(), n), strataSuccess) << strataGetLastError(nullptr);
  std::vector<std::vector<float>> bufs(n, std::vector<float>(100003));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < bufs[r].size(); ++i) bufs[r][i] = static_cast<float>(r + (i % 7));
  ASSERT_EQ(strataGroupStart(), strataSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(strataAllReduce(bufs[r].data(), bufs[r].data(), bufs[r].size(), strataFloat32, strataSum, comms[r]),
              strataSuccess);
  ASSERT_EQ(strataGroupEnd(), strataSuccess) << strataGetLastError(comms[0]);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < bufs[r].size(); i += 997) ASSERT_EQ(bufs[r][i], 3.0f + 3.0f * (i % 7)) << r << " " << i;
  for (strataComm_t c : comms) strataCommDestroy(c);
}

TEST(ThreadRanksSplit, ColorsAndKeysOrderNewRanks) {
  const int n = 5;
  runThreadRanks(n, [&](strataComm_t comm, int rank) {
    strataComm_t sub = nullptr;
    const int color = rank == 4 ? STRATA_SPLIT_NOCOLOR : rank % 2;
    ASSERT_EQ(strataCommSplit(comm, color, -rank, &sub, nullptr), strataSuccess) << strataGetLastError(comm);
    if (rank == 4) {
      EXPECT_EQ(sub, nullptr);
      return;
    }
    ASSERT_NE(sub, nullptr);
    int sr = -1, sn = -1;
    strataCommUserRank(sub, &sr);
    strataCommCount(sub, &sn);
    EXPECT_EQ(sn, 2);
    // Keys are -rank: the higher old rank comes first.
    EXPECT_EQ(sr, rank >= 2 ? 0 : 1);
    CheckReport rep;
    checkCollective(sub, CollType::AllReduce, strataInt32, strataSum, 1000, 0, false, &rep);
    checkCollective(sub, CollType::AllGather, strataInt32, strataSum, 10, 0, true, &rep);
    expectReport(rep, rank);
    // The parent still works after the split.
    CheckReport rep2;
    strataCommDestroy(sub);
  });
}

TEST(ThreadRanksArgs, BadArgumentsAreRejectedAndTheCommStaysUsable) {
  runThreadRanks(2, [&](strataComm_t comm, int rank) {
    float buf[4] = {1, 2, 3, 4};
    EXPECT_EQ(strataAllReduce(buf, buf, 4, static_cast<strataDataType_t>(99), strataSum, comm), strataInvalidArgument);
    EXPECT_NE(std::string(strataGetLastError(comm)).find("datatype"), std::string::npos);
    EXPECT_EQ(strataAllReduce(buf, buf, 4, strataFloat32, static_cast<strataRedOp_t>(42), comm), strataInvalidArgument);
    EXPECT_EQ(strataBroadcast(buf, buf, 4, strataFloat32, 2, comm), strataInvalidArgument);
    EXPECT_NE(std::string(strataGetLastError(comm)).find("root 2"), std::string::npos);
    EXPECT_EQ(strataSend(buf, 4, strataFloat32, -1, comm), strataInvalidArgument);
    EXPECT_EQ(strataRecv(buf, 4, strataFloat32, 7, comm), strataInvalidArgument);
    EXPECT_EQ(strataAllReduce(nullptr, buf, 4, strataFloat32, strataSum, comm), strataInvalidArgument);
    EXPECT_EQ(strataAllReduce(nullptr, nullptr, 0, strataFloat32, strataSum, comm), strataSuccess);
    EXPECT_EQ(strataAllReduce(buf, buf, 4, strataFloat32, strataSum, nullptr), strataInvalidArgument);
    EXPECT_EQ(strataGroupEnd(), strataInvalidUsage);
    // Still usable.
    CheckReport rep;
    checkCollective(comm, CollType::AllReduce, strataFloat32, strataSum, 1000, 0, false, &rep);
    expectReport(rep, rank);
  });
}

TEST(ThreadRanksArgs, DestroyedCommunicatorIsRejected) {
  std::vector<strataComm_t> comms(1);
  ASSERT_EQ(strataCommInitAll(comms.data(), 1), strataSuccess);
  ASSERT_EQ(strataCommDestroy(comms[0]), strataSuccess);
  float x = 1;
  EXPECT_EQ(strataAllReduce(&x, &x, 1, strataFloat32, strataSum, comms[0]), strataInvalidArgument);
  EXPECT_NE(std::string(strataGetLastError(nullptr)).find("not live"), std::string::npos);
}

TEST(ThreadRanksArgs, CheckArgsModeNamesTheRankThatDiffers) {
  ScopedEnv check("STRATA_CHECK_ARGS", "1");
  runThreadRanks(3, [&](strataComm_t comm, int rank) {
    std::vector<float> buf(100, 1.0f);
    const size_t count = rank == 2 ? 99 : 100;
    EXPECT_EQ(strataAllReduce(buf.data(), buf.data(), count, strataFloat32, strataSum, comm), strataInvalidUsage);
    std::string msg = strataGetLastError(comm);
    EXPECT_NE(msg.find("rank 2 called allreduce(count 99"), std::string::npos) << msg;
    // Matching calls pass the check and run.
    CheckReport rep;
    checkCollective(comm, CollType::AllReduce, strataFloat32, strataSum, 1000, 0, false, &rep);
    expectReport(rep, rank);
  });
}

TEST(ThreadRanksP2P, MismatchedSizesFailOnBothSidesInsteadOfHanging) {
  ScopedEnv t("STRATA_TIMEOUT", "20");
  std::atomic<int> errors{0};
  runThreadRanks(2, [&](strataComm_t comm, int rank) {
    std::vector<char> buf(1000);
    strataResult_t rc = rank == 0 ? strataSend(buf.data(), 1000, strataUint8, 1, comm)
                                  : strataRecv(buf.data(), 999, strataUint8, 0, comm);
    if (rc != strataSuccess) errors++;
    if (rank == 1) {
      EXPECT_NE(std::string(strataGetLastError(comm)).find("size mismatch"), std::string::npos);
    }
  });
  EXPECT_EQ(errors.load(), 2);
}

}  // namespace
