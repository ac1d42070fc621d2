// shrink_test.cc: going on after a failure. strataCommShrink makes the communicator of the
// surviving ranks without the excluded ones taking part (after a rank was SIGKILLed, with local
// and tcp transports, as processes), on a healthy parent (threads; the parent stays usable),
// after strataCommRevoke stopped a collective in flight; survivors that pass different lists or a
// survivor that never comes get an error, not a hang; bad arguments are named.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "strata/strata.h"
#include "support/thread_ranks.h"

using namespace strata::testing;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

/// Sums (rank + 1) over `comm` a few times; true when every result is n(n+1)/2.
bool allReduceWorks(strataComm_t comm, std::string* why) {
  int n = 0, r = 0;
  strataCommCount(comm, &n);
  strataCommUserRank(comm, &r);
  for (int it = 0; it < 5; ++it) {
    std::vector<float> buf(1000 + 4097 * it, static_cast<float>(r + 1));
    if (strataAllReduce(buf.data(), buf.data(), buf.size(), strataFloat32, strataSum, comm) != strataSuccess) {
      *why = strataGetLastError(comm);
      return false;
    }
    for (float v : buf)
      if (v != n * (n + 1) / 2.0f) {
        *why = "wrong sum " + std::to_string(v);
        return false;
      }
  }
  return true;
}

constexpr int kShrunkOk = 0, kNoError = 10, kInitFailed = 11, kShrinkFailed = 12, kWrongShape = 13, kBroken = 14;

class KilledRankThenShrink : public ::testing::TestWithParam<const char*> {};

// Four processes; rank 2 dies by SIGKILL after two all-reduces. The survivors see the error,
// shrink without rank 2 (STRATA_SHRINK_ABORT) and go on as ranks 0, 1, 2 of three.
TEST_P(KilledRankThenShrink, SurvivorsGoOnAsAThreeRankCommunicator) {
  ScopedEnv transport("STRATA_TRANSPORT", GetParam());
  ScopedEnv timeout("STRATA_TIMEOUT", "20");
  const int n = 4, victim = 2;
  strataUniqueId id;
  ASSERT_EQ(strataGetUniqueId(&id), strataSuccess);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      alarm(60);
      strataComm_t comm = nullptr;
      if (strataCommInitRank(&comm, n, id, r) != strataSuccess) _exit(kInitFailed);
      std::vector<float> buf(1 << 18, 1.0f);
      for (int i = 0; i < 2; ++i) strataAllReduce(buf.data(), buf.data(), buf.size(), strataFloat32, strataSum, comm);
      if (r == victim) raise(SIGKILL);
      bool failed = false;
      for (int i = 0; i < 100000 && !failed; ++i)
        failed = strataAllReduce(buf.data(), buf.data(), buf.size(), strataFloat32, strataSum, comm) != strataSuccess;
      if (!failed) _exit(kNoError);
      const int excluded[] = {victim};
      strataComm_t shrunk = nullptr;
      const double t0 = now();
      if (strataCommShrink(comm, excluded, 1, &shrunk, nullptr, STRATA_SHRINK_ABORT) != strataSuccess) {
        fprintf(stderr, "rank %d: shrink failed: %s\n", r, strataGetLastError(comm));
        _exit(kShrinkFailed);
      }
      int sn = 0, sr = 0;
      strataCommCount(shrunk, &sn);
      strataCommUserRank(shrunk, &sr);
      if (sn != 3 || sr != (r < victim ? r : r - 1)) _exit(kWrongShape);
      std::string why;
      if (!allReduceWorks(shrunk, &why)) {
        fprintf(stderr, "rank %d: the shrunk communicator does not work: %s\n", r, why.c_str());
        _exit(kBroken);
      }
      fprintf(stderr, "rank %d: shrank in %.3f s\n", r, now() - t0);
      strataCommDestroy(shrunk);
      strataCommDestroy(comm);
      _exit(kShrunkOk);
    }
    pids.push_back(pid);
  }
  for (int r = 0; r < n; ++r) {
    int st = 0;
    ASSERT_EQ(waitpid(pids[r], &st, 0), pids[r]);
    const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    EXPECT_EQ(code, r == victim ? 128 + SIGKILL : kShrunkOk) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Transport, KilledRankThenShrink, ::testing::Values("local", "tcp"));

/// Runs fn(rank) on n threads.
void onThreads(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r) ts.emplace_back(fn, r);
  for (auto& t : ts) t.join();
}

TEST(Shrink, HealthyParentStaysUsableAndTheShrunkOneWorks) {
  const int n = 4;
  std::vector<strataComm_t> comms(n);
  ASSERT_EQ(strataCommInitAll(comms.data(), n), strataSuccess);
  std::vector<strataComm_t> shrunk(n, nullptr);
  onThreads(n - 1, [&](int r) {  // rank 3 takes no part
    const int excluded[] = {3};
    ASSERT_EQ(strataCommShrink(comms[r], excluded, 1, &shrunk[r], nullptr, STRATA_SHRINK_DEFAULT), strataSuccess)
        << strataGetLastError(comms[r]);
    int sn = 0;
    strataCommCount(shrunk[r], &sn);
    EXPECT_EQ(sn, 3);
    std::string why;
    EXPECT_TRUE(allReduceWorks(shrunk[r], &why)) << why;
  });
  onThreads(n, [&](int r) {
    std::string why;
    EXPECT_TRUE(allReduceWorks(comms[r], &why)) << "parent, rank " << r << ": " << why;
  });
  for (strataComm_t c : shrunk)
    if (c) strataCommDestroy(c);
  for (strataComm_t c : comms) strataCommDestroy(c);
}

TEST(Revoke, StopsACollectiveInFlightOnEveryRankThenAllShrink) {
  const int n = 3;
  std::vector<strataComm_t> comms(n);
  ASSERT_EQ(strataCommInitAll(comms.data(), n), strataSuccess);
  std::vector<double> errorAfter(n, -1);
  const double t0 = now();
  onThreads(n, [&](int r) {
    if (r == 0) {  // never enters; revokes instead
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      EXPECT_EQ(strataCommRevoke(comms[0], STRATA_REVOKE_DEFAULT), strataSuccess);
      return;
    }
    std::vector<float> buf(1000, 1.0f);
    EXPECT_NE(strataAllReduce(buf.data(), buf.data(), buf.size(), strataFloat32, strataSum, comms[r]), strataSuccess);
    errorAfter[r] = now() - t0;
    EXPECT_NE(std::string(strataGetLastError(comms[r])).find("revoked"), std::string::npos)
        << strataGetLastError(comms[r]);
  });
  for (int r = 1; r < n; ++r) EXPECT_LT(errorAfter[r], 5.0) << "rank " << r << " was not stopped promptly";
  std::vector<float> buf(10, 1.0f);
  EXPECT_EQ(strataAllReduce(buf.data(), buf.data(), buf.size(), strataFloat32, strataSum, comms[0]), strataAborted);
  EXPECT_NE(std::string(strataGetLastError(comms[0])).find("revoked"), std::string::npos);
  EXPECT_EQ(strataCommRevoke(comms[0], 5), strataInvalidArgument);
  // Everyone is alive: a shrink that excludes nobody remakes the communicator.
  std::vector<strataComm_t> fresh(n, nullptr);
  onThreads(n, [&](int r) {
    ASSERT_EQ(strataCommShrink(comms[r], nullptr, 0, &fresh[r], nullptr, STRATA_SHRINK_ABORT), strataSuccess)
        << strataGetLastError(comms[r]);
    std::string why;
    EXPECT_TRUE(allReduceWorks(fresh[r], &why)) << why;
  });
  for (strataComm_t c : fresh)
    if (c) strataCommDestroy(c);
  for (strataComm_t c : comms) strataCommDestroy(c);
}

TEST(Shrink, DifferentExcludeListsFailEverySurvivorNamingBothLists) {
  const int n = 4;
  std::vector<strataComm_t> comms(n);
  ASSERT_EQ(strataCommInitAll(comms.data(), n), strataSuccess);
  onThreads(3, [&](int r) {
    // Ranks 0 and 1 exclude rank 3; rank 2 also excludes rank 1 (which it thinks dead).
    const std::vector<int> ex = r == 2 ? std::vector<int>{3, 1} : std::vector<int>{3};
    strataComm_t out = nullptr;
    EXPECT_EQ(strataCommShrink(comms[r], ex.data(), static_cast<int>(ex.size()), &out, nullptr, STRATA_SHRINK_DEFAULT),
              strataInvalidUsage)
        << "rank " << r << ": " << strataGetLastError(comms[r]);
    EXPECT_EQ(out, nullptr);
    EXPECT_NE(std::string(strataGetLastError(comms[r])).find("rank 0 excludes 3, rank 2 excludes 1,3"),
              std::string::npos)
        << "rank " << r << ": " << strataGetLastError(comms[r]);
  });
  for (strataComm_t c : comms) strataCommDestroy(c);
}

TEST(Shrink, ASurvivorThatNeverComesIsAnErrorWithinTheTimeout) {
  const int n = 3;
  std::vector<strataComm_t> comms(n);
  ASSERT_EQ(strataCommInitAll(comms.data(), n), strataSuccess);
  strataConfig_t cfg;
  strataConfigInit(&cfg);
  cfg.timeout = 2;
  const double t0 = now();
  onThreads(2, [&](int r) {  // rank 2 is alive but does not call shrink
    strataComm_t out = nullptr;
    EXPECT_NE(strataCommShrink(comms[r], nullptr, 0, &out, &cfg, STRATA_SHRINK_DEFAULT), strataSuccess);
    EXPECT_NE(std::string(strataGetLastError(comms[r])).find("rank 2 did not join the shrink"), std::string::npos)
        << "rank " << r << ": " << strataGetLastError(comms[r]);
  });
  EXPECT_LT(now() - t0, 10.0);
  for (strataComm_t c : comms) strataCommDestroy(c);
}

TEST(Shrink, BadArgumentsAreNamedAndChangeNothing) {
  const int n = 2;
  std::vector<strataComm_t> comms(n);
  ASSERT_EQ(strataCommInitAll(comms.data(), n), strataSuccess);
  strataComm_t out = nullptr;
  struct Case {
    std::vector<int> ex;
    int flags;
    strataResult_t want;
    const char* says;
  };
  const Case cases[] = {
      {{2}, STRATA_SHRINK_DEFAULT, strataInvalidArgument, "excluded rank 2 is not a rank"},
      {{-1}, STRATA_SHRINK_DEFAULT, strataInvalidArgument, "excluded rank -1 is not a rank"},
      {{1, 1}, STRATA_SHRINK_DEFAULT, strataInvalidArgument, "rank 1 is excluded twice"},
      {{0}, STRATA_SHRINK_DEFAULT, strataInvalidUsage, "rank 0 excludes itself"},
      {{}, 7, strataInvalidArgument, "shrinkFlags 0x7"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(strataCommShrink(comms[0], c.ex.data(), static_cast<int>(c.ex.size()), &out, nullptr, c.flags), c.want);
    EXPECT_NE(std::string(strataGetLastError(comms[0])).find(c.says), std::string::npos) << strataGetLastError(comms[0]);
  }
  EXPECT_EQ(strataCommShrink(comms[0], nullptr, 1, &out, nullptr, 0), strataInvalidArgument);
  EXPECT_EQ(strataCommShrink(comms[0], nullptr, 0, nullptr, nullptr, 0), strataInvalidArgument);
  EXPECT_EQ(strataCommShrink(nullptr, nullptr, 0, &out, nullptr, 0), strataInvalidArgument);
  onThreads(n, [&](int r) {
    std::string why;
    EXPECT_TRUE(allReduceWorks(comms[r], &why)) << why;
  });
  for (strataComm_t c : comms) strataCommDestroy(c);
}

}  // namespace
