// shrink_test.cc: going on after a failure. strataCommShrink makes the communicator of the
// surviving ranks without the excluded ones taking part (after a rank was SIGKILLed, with local
// and tcp transports, as processes), on a healthy parent (threads; the parent stays usable),
// after strataCommRevoke stopped a collective in flight; survivors that pass different lists or a
// survivor that never comes get an error, not a hang; bad arguments are named. With
// STRATA_SHRINK_DETECT the survivors find the dead ranks themselves.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "strata/strata.h"
#include "support/thread_ranks.h"
#include "support/topo_placement.h"

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

#ifdef STRATA_RDMA_LAYOUTS
// shrink_rdma_test (label rdma): the killed-rank cases over a real verbs stack (CI: soft-RoCE,
// scripts/rdma_vm.sh), every rank on a virtual node of its own so that every connection is ib or
// UCX over verbs; the thread-rank tests after them are not built.
class KilledRankThenShrink : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    bool any = false;
    if (DIR* d = opendir("/sys/class/infiniband")) {
      while (dirent* e = readdir(d)) any = any || e->d_name[0] != '.';
      closedir(d);
    }
    if (!any) GTEST_SKIP() << "no RDMA device (/sys/class/infiniband is empty): runs on soft-RoCE in CI's rdma stage";
    const std::string text = withPlacement(std::string(TOPO_FILES_DIR) + "/virtual_4x2.json", "[0, 1, 2, 3, 0]");
    ASSERT_FALSE(text.empty()) << "virtual_4x2.json has no placement line";
    file_ = "/tmp/shrink_rdma_" + std::to_string(getpid()) + ".json";
    std::ofstream(file_) << text;
    env_.push_back(std::make_unique<ScopedEnv>("STRATA_TOPO_FILE", file_));
    env_.push_back(std::make_unique<ScopedEnv>("UCX_TLS", "rc_verbs,ud_verbs"));
    env_.push_back(std::make_unique<ScopedEnv>("UCX_UD_VERBS_ETH_DGID_CHECK", "n"));
  }
  void TearDown() override {
    env_.clear();
    if (!file_.empty()) std::remove(file_.c_str());
  }
  std::string file_;
  std::vector<std::unique_ptr<ScopedEnv>> env_;
};
#else
class KilledRankThenShrink : public ::testing::TestWithParam<const char*> {};
#endif

/// `n` processes; the `victims` die by SIGKILL after two all-reduces. Each survivor sees the
/// error, shrinks (STRATA_SHRINK_ABORT | `flags`) without excludeOf(its rank), and goes on as its
/// rank among the survivors. Returns each rank's exit code (128 + signal for a victim).
std::vector<int> killThenShrink(int n, const std::vector<int>& victims,
                                const std::function<std::vector<int>(int)>& excludeOf, int flags) {
  auto isVictim = [&](int r) { return std::find(victims.begin(), victims.end(), r) != victims.end(); };
  strataUniqueId id;
  EXPECT_EQ(strataGetUniqueId(&id), strataSuccess);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      alarm(60);
      strataComm_t comm = nullptr;
      if (strataCommInitRank(&comm, n, id, r) != strataSuccess) _exit(kInitFailed);
      std::vector<float> buf(1 << 18, 1.0f);
      for (int i = 0; i < 2; ++i) strataAllReduce(buf.data(), buf.data(), buf.size(), strataFloat32, strataSum, comm);
      if (isVictim(r)) raise(SIGKILL);
      bool failed = false;
      for (int i = 0; i < 100000 && !failed; ++i)
        failed = strataAllReduce(buf.data(), buf.data(), buf.size(), strataFloat32, strataSum, comm) != strataSuccess;
      if (!failed) _exit(kNoError);
      const std::vector<int> excluded = excludeOf(r);
      strataComm_t shrunk = nullptr;
      const double t0 = now();
      if (strataCommShrink(comm, excluded.data(), static_cast<int>(excluded.size()), &shrunk, nullptr,
                           STRATA_SHRINK_ABORT | flags) != strataSuccess) {
        fprintf(stderr, "rank %d: shrink failed: %s\n", r, strataGetLastError(comm));
        _exit(kShrinkFailed);
      }
      int sn = 0, sr = 0, below = 0;
      strataCommCount(shrunk, &sn);
      strataCommUserRank(shrunk, &sr);
      for (int v : victims) below += v < r;
      if (sn != n - static_cast<int>(victims.size()) || sr != r - below) {
        fprintf(stderr, "rank %d: shrunk to rank %d of %d\n", r, sr, sn);
        _exit(kWrongShape);
      }
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
  std::vector<int> codes;
  for (int r = 0; r < n; ++r) {
    int st = 0;
    EXPECT_EQ(waitpid(pids[r], &st, 0), pids[r]);
    codes.push_back(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  }
  return codes;
}

// Four processes; rank 2 dies. The survivors name it, shrink and go on as ranks 0, 1, 2 of three.
TEST_P(KilledRankThenShrink, SurvivorsGoOnAsAThreeRankCommunicator) {
  ScopedEnv transport("STRATA_TRANSPORT", GetParam());
  ScopedEnv timeout("STRATA_TIMEOUT", "20");
  const std::vector<int> codes = killThenShrink(4, {2}, [](int) { return std::vector<int>{2}; }, 0);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(codes[r], r == 2 ? 128 + SIGKILL : kShrunkOk) << "rank " << r;
}

// Five processes; ranks 0 (the one that would gather the shrink) and 3 die. With
// STRATA_SHRINK_DETECT the survivors need not know who: rank 4 names rank 3, ranks 1 and 2 name
// nobody. They find both dead and go on as ranks 0, 1, 2 of three, promptly.
TEST_P(KilledRankThenShrink, WithDetectSurvivorsThatKnowLittleFindTheDead) {
  ScopedEnv transport("STRATA_TRANSPORT", GetParam());
  ScopedEnv timeout("STRATA_TIMEOUT", "20");
  const double t0 = now();
  const std::vector<int> codes =
      killThenShrink(5, {0, 3}, [](int r) { return r == 4 ? std::vector<int>{3} : std::vector<int>{}; },
                     STRATA_SHRINK_DETECT);
  for (int r = 0; r < 5; ++r) EXPECT_EQ(codes[r], r == 0 || r == 3 ? 128 + SIGKILL : kShrunkOk) << "rank " << r;
  EXPECT_LT(now() - t0, 15.0) << "the 20 s timeouts were waited out";
}

#ifdef STRATA_RDMA_LAYOUTS
INSTANTIATE_TEST_SUITE_P(Transport, KilledRankThenShrink, ::testing::Values("ib", "ucx"));
#else
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

// With STRATA_SHRINK_DETECT a rank that is alive but does not come is left out at the timeout:
// the others go on without it.
TEST(Shrink, WithDetectASurvivorThatNeverComesIsLeftOutAtTheTimeout) {
  const int n = 4;
  std::vector<strataComm_t> comms(n);
  ASSERT_EQ(strataCommInitAll(comms.data(), n), strataSuccess);
  strataConfig_t cfg;
  strataConfigInit(&cfg);
  cfg.timeout = 2;
  std::vector<strataComm_t> shrunk(n, nullptr);
  const double t0 = now();
  onThreads(3, [&](int r) {  // rank 3 is alive but does not call shrink
    ASSERT_EQ(strataCommShrink(comms[r], nullptr, 0, &shrunk[r], &cfg, STRATA_SHRINK_DETECT), strataSuccess)
        << "rank " << r << ": " << strataGetLastError(comms[r]);
    int sn = 0, sr = -1;
    strataCommCount(shrunk[r], &sn);
    strataCommUserRank(shrunk[r], &sr);
    EXPECT_EQ(sn, 3);
    EXPECT_EQ(sr, r);
    std::string why;
    EXPECT_TRUE(allReduceWorks(shrunk[r], &why)) << why;
  });
  EXPECT_LT(now() - t0, 10.0);
  for (strataComm_t c : shrunk)
    if (c) strataCommDestroy(c);
  for (strataComm_t c : comms) strataCommDestroy(c);
}

// A survivor that another names as dead is told so; the others go on without it.
TEST(Shrink, WithDetectARankNamedDeadByAnotherIsToldSo) {
  const int n = 3;
  std::vector<strataComm_t> comms(n);
  ASSERT_EQ(strataCommInitAll(comms.data(), n), strataSuccess);
  std::vector<strataComm_t> shrunk(n, nullptr);
  std::vector<strataResult_t> rc(n);
  onThreads(n, [&](int r) {
    const std::vector<int> ex = r == 1 ? std::vector<int>{2} : std::vector<int>{};  // rank 1 thinks 2 died
    rc[r] = strataCommShrink(comms[r], ex.data(), static_cast<int>(ex.size()), &shrunk[r], nullptr, STRATA_SHRINK_DETECT);
  });
  EXPECT_EQ(rc[0], strataSuccess) << strataGetLastError(comms[0]);
  EXPECT_EQ(rc[1], strataSuccess) << strataGetLastError(comms[1]);
  EXPECT_EQ(rc[2], strataInvalidUsage);
  EXPECT_NE(std::string(strataGetLastError(comms[2])).find("another survivor excludes it"), std::string::npos)
      << strataGetLastError(comms[2]);
  onThreads(2, [&](int r) {
    int sn = 0;
    strataCommCount(shrunk[r], &sn);
    EXPECT_EQ(sn, 2);
    std::string why;
    EXPECT_TRUE(allReduceWorks(shrunk[r], &why)) << why;
  });
  for (strataComm_t c : shrunk)
    if (c) strataCommDestroy(c);
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
      {{}, STRATA_SHRINK_DETECT | 2, strataInvalidArgument, "shrinkFlags 0x102"},
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

#endif  // STRATA_RDMA_LAYOUTS

}  // namespace
