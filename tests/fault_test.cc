// fault_test.cc: failures must become errors on every surviving rank within the timeout, never
// hangs. Ranks are forked processes (shared-memory and tcp paths) or threads. Each child reports
// through its exit code; every child also arms alarm() so that a hang fails the test instead of
// stalling CI.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "strata/strata.h"
#include "support/thread_ranks.h"
#include "transport/bootstrap.h"
#include "transport/socket.h"

using namespace strata;
using namespace strata::testing;

namespace {

constexpr int kGotError = 0, kNoError = 10, kInitFailed = 11, kWrongMessage = 12;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

/// Forks n rank processes running body(comm, rank) -> exit code; returns the exit codes (128+sig
/// for signals). Children hang-guard themselves with alarm(limit).
std::vector<int> forkRanks(int n, int limitSec, const std::function<int(strataComm_t, int)>& body) {
  strataUniqueId id;
  EXPECT_EQ(strataGetUniqueId(&id), strataSuccess);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      alarm(static_cast<unsigned>(limitSec));
      strataComm_t comm = nullptr;
      if (strataCommInitRank(&comm, n, id, r) != strataSuccess) _exit(kInitFailed);
      _exit(body(comm, r));
    }
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    codes.push_back(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  }
  return codes;
}

/// Loops all-reduces until one fails; checks the error names `culprit` and came within `within` s
/// of the failure's cause.
int allReduceUntilError(strataComm_t comm, int culprit, double within) {
  std::vector<float> buf(1 << 20, 1.0f);
  double start = now();
  for (int it = 0; it < 100000; ++it) {
    strataResult_t rc = strataAllReduce(buf.data(), buf.data(), buf.size(), strataFloat32, strataSum, comm);
    if (rc != strataSuccess) {
      std::string msg = strataGetLastError(comm);
      fprintf(stderr, "error after %.2f s: %s\n", now() - start, msg.c_str());
      if (msg.find("rank " + std::to_string(culprit)) == std::string::npos) return kWrongMessage;
      // A later call fails at once: the communicator is marked failed.
      if (strataAllReduce(buf.data(), buf.data(), 1, strataFloat32, strataSum, comm) == strataSuccess) return kNoError;
      return now() - start < within ? kGotError : kNoError;
    }
  }
  return kNoError;
}

class KilledRank : public ::testing::TestWithParam<const char*> {};

TEST_P(KilledRank, SurvivorsGetAnErrorNamingIt) {
  ScopedEnv transport("STRATA_TRANSPORT", GetParam());
  ScopedEnv timeout("STRATA_TIMEOUT", "30");
  const int n = 3, victim = 2;
  auto codes = forkRanks(n, 60, [&](strataComm_t comm, int rank) {
    if (rank == victim) {
      std::vector<float> buf(1 << 20, 1.0f);
      for (int i = 0; i < 3; ++i) strataAllReduce(buf.data(), buf.data(), buf.size(), strataFloat32, strataSum, comm);
      raise(SIGKILL);  // dies mid-job, between or inside collectives of its peers
    }
    return allReduceUntilError(comm, victim, 20);
  });
  EXPECT_EQ(codes[0], kGotError);
  EXPECT_EQ(codes[1], kGotError);
  EXPECT_EQ(codes[2], 128 + SIGKILL);
}

INSTANTIATE_TEST_SUITE_P(Transport, KilledRank, ::testing::Values("local", "tcp"));

class ClosedConnection : public ::testing::TestWithParam<const char*> {};

TEST_P(ClosedConnection, AbortingRankBreaksPeersPromptly) {
  ScopedEnv transport("STRATA_TRANSPORT", GetParam());
  ScopedEnv timeout("STRATA_TIMEOUT", "30");
  auto codes = forkRanks(2, 60, [&](strataComm_t comm, int rank) {
    if (rank == 1) {
      sleep(1);
      strataCommAbort(comm);  // closes its connections while rank 0 waits in an all-reduce
      sleep(3);
      return kGotError;
    }
    return allReduceUntilError(comm, 1, 10);
  });
  EXPECT_EQ(codes[0], kGotError);
  EXPECT_EQ(codes[1], kGotError);
}

INSTANTIATE_TEST_SUITE_P(Transport, ClosedConnection, ::testing::Values("local", "tcp"));

TEST(SharedMemory, SegmentsOfDeadProcessesAreRemovedAtTheNextInit) {
  // A segment named for a process that no longer exists (a rank killed before it could unlink),
  // and one named for a live process, which must stay.
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  const std::string dead = "/strata-00000000deadbeef-1-" + std::to_string(child);
  const std::string live = "/strata-00000000deadbeef-2-" + std::to_string(getpid());
  for (const std::string& name : {dead, live}) {
    int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd, 0) << name;
    ::close(fd);
  }
  ScopedEnv transport("STRATA_TRANSPORT", "local");
  auto codes = forkRanks(2, 60, [](strataComm_t comm, int) {
    float x = 1;
    return strataAllReduce(&x, &x, 1, strataFloat32, strataSum, comm) == strataSuccess ? kGotError : kNoError;
  });
  EXPECT_EQ(codes[0], kGotError);
  EXPECT_EQ(codes[1], kGotError);
  int fd = shm_open(dead.c_str(), O_RDWR, 0600);
  EXPECT_LT(fd, 0) << "segment of a dead process was not removed";
  if (fd >= 0) ::close(fd);
  fd = shm_open(live.c_str(), O_RDWR, 0600);
  EXPECT_GE(fd, 0) << "segment of a live process was removed";
  if (fd >= 0) ::close(fd);
  shm_unlink(dead.c_str());
  shm_unlink(live.c_str());
}

TEST(Join, RankThatNeverJoinsIsNamed) {
  ScopedEnv join("STRATA_JOIN_TIMEOUT", "2");
  strataUniqueId id;
  ASSERT_EQ(strataGetUniqueId(&id), strataSuccess);
  std::vector<std::string> msgs(2);
  std::vector<strataResult_t> rcs(2);
  double start = now();
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      strataComm_t c = nullptr;
      rcs[r] = strataCommInitRank(&c, 3, id, r);
      msgs[r] = strataGetLastError(nullptr);
    });
  for (auto& t : ts) t.join();
  EXPECT_LT(now() - start, 10);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(rcs[r], strataSuccess);
    EXPECT_NE(msgs[r].find("rank 2 of 3 did not join within 2 s"), std::string::npos) << msgs[r];
  }
}

TEST(Join, WrongSecretAndGarbageAreRejectedWithoutBreakingTheRendezvous) {
  strataUniqueId id;
  ASSERT_EQ(strataGetUniqueId(&id), strataSuccess);
  UniqueIdData d = decodeUniqueId(id);
  // A stranger sends garbage to the root first.
  int fd = -1;
  ASSERT_TRUE(net::connectTo(d.rootAddr, d.rootPort, net::nowSec() + 5, &fd).ok());
  char junk[300];
  memset(junk, 0x5a, sizeof(junk));
  (void)net::sendAll(fd, junk, sizeof(junk), net::nowSec() + 5, nullptr, "root");
  ::close(fd);
  // A rank with the wrong secret is refused.
  UniqueIdData bad = d;
  bad.secret[0] ^= 1;
  strataComm_t c = nullptr;
  ScopedEnv join("STRATA_JOIN_TIMEOUT", "5");
  EXPECT_NE(strataCommInitRank(&c, 2, encodeUniqueId(bad), 0), strataSuccess);
  EXPECT_NE(std::string(strataGetLastError(nullptr)).find("secret"), std::string::npos);
  // The real ranks still meet.
  std::vector<strataComm_t> comms(2);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r) ts.emplace_back([&, r] { EXPECT_EQ(strataCommInitRank(&comms[r], 2, id, r), strataSuccess); });
  for (auto& t : ts) t.join();
  for (auto x : comms)
    if (x) strataCommDestroy(x);
}

TEST(Abort, ReturnsPromptlyWhileAPeerNeverShowsUp) {
  std::vector<strataComm_t> comms(2);
  ASSERT_EQ(strataCommInitAll(comms.data(), 2), strataSuccess);
  std::vector<float> buf(1000, 1.0f);
  strataResult_t rc = strataSuccess;
  double start = now();
  std::thread waiter([&] { rc = strataAllReduce(buf.data(), buf.data(), buf.size(), strataFloat32, strataSum, comms[0]); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  double abortStart = now();
  EXPECT_EQ(strataCommAbort(comms[0]), strataSuccess);
  EXPECT_LT(now() - abortStart, 2.0);
  waiter.join();
  EXPECT_EQ(rc, strataAborted);
  EXPECT_LT(now() - start, 5.0);
  strataCommDestroy(comms[1]);
}

TEST(Timeout, SilentPeerTimesOutNamingIt) {
  ScopedEnv timeout("STRATA_TIMEOUT", "1");
  std::vector<strataComm_t> comms(2);
  ASSERT_EQ(strataCommInitAll(comms.data(), 2), strataSuccess);
  std::vector<float> buf(1000, 1.0f);
  double start = now();
  EXPECT_EQ(strataAllReduce(buf.data(), buf.data(), buf.size(), strataFloat32, strataSum, comms[0]), strataTimeout);
  EXPECT_LT(now() - start, 4.0);
  std::string msg = strataGetLastError(comms[0]);
  EXPECT_NE(msg.find("waiting on rank(s) 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no progress for 1 s"), std::string::npos) << msg;
  // The peer arriving late sees the failure instead of hanging.
  EXPECT_NE(strataAllReduce(buf.data(), buf.data(), buf.size(), strataFloat32, strataSum, comms[1]), strataSuccess);
  for (auto c : comms) strataCommDestroy(c);
}

// Thread ranks read each other's send buffers in place. A call that failed returns, and its caller
// may reuse or free the buffers at once: a peer arriving late must not read them (the failing
// sender retracts what it published; under ASan a read of the freed buffer was a use after free).
TEST(Timeout, LatePeerDoesNotReadTheBuffersOfAFailedSend) {
  ScopedEnv timeout("STRATA_TIMEOUT", "1");
  std::vector<strataComm_t> comms(2);
  ASSERT_EQ(strataCommInitAll(comms.data(), 2), strataSuccess);
  auto sent = std::make_unique<std::vector<float>>(1 << 16, 1.0f);
  EXPECT_EQ(strataSend(sent->data(), sent->size(), strataFloat32, 1, comms[0]), strataTimeout);
  std::fill(sent->begin(), sent->end(), -1.0f);  // the caller reuses its buffer...
  std::vector<float> got(sent->size(), 0.0f);
  const double start = now();
  EXPECT_NE(strataRecv(got.data(), got.size(), strataFloat32, 0, comms[1]), strataSuccess);
  EXPECT_LT(now() - start, 4.0);
  EXPECT_EQ(std::count(got.begin(), got.end(), 0.0f), static_cast<long>(got.size())) << "read the failed send's buffer";
  sent.reset();  // ...or frees it
  for (auto c : comms) strataCommDestroy(c);
}

// strataConfig_t::timeout overrides STRATA_TIMEOUT for one communicator (the PyTorch backend
// maps init_process_group(timeout=...) to it); its splits keep it.
TEST(Timeout, ConfigTimeoutOverridesTheVariableAndSplitsKeepIt) {
  ScopedEnv timeout("STRATA_TIMEOUT", "600");
  strataUniqueId id;
  ASSERT_EQ(strataGetUniqueId(&id), strataSuccess);
  std::vector<strataComm_t> comms(2), halves(2);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      strataConfig_t cfg;
      strataConfigInit(&cfg);
      cfg.timeout = 1.0;
      ASSERT_EQ(strataCommInitRankConfig(&comms[r], 2, id, r, &cfg), strataSuccess);
      ASSERT_EQ(strataCommSplit(comms[r], 0, r, &halves[r], nullptr), strataSuccess);
    });
  for (auto& t : ts) t.join();
  std::vector<float> buf(1000, 1.0f);
  for (strataComm_t c : {comms[0], halves[0]}) {
    const double start = now();
    EXPECT_EQ(strataAllReduce(buf.data(), buf.data(), buf.size(), strataFloat32, strataSum, c), strataTimeout);
    EXPECT_LT(now() - start, 4.0);
    const std::string msg = strataGetLastError(c);
    EXPECT_NE(msg.find("no progress for 1 s"), std::string::npos) << msg;
  }
  for (auto c : halves) strataCommDestroy(c);
  for (auto c : comms) strataCommDestroy(c);
}

// A split is a call on its communicator: a member that never comes makes it fail within the
// communicator's timeout (STRATA_TIMEOUT here; the config's on a split child, which keeps its
// parent's), not the join timeout of 120 s the bootstrap was made with.
TEST(Timeout, SplitWithASilentMemberTimesOut) {
  ScopedEnv timeout("STRATA_TIMEOUT", "1");
  std::vector<strataComm_t> comms(2), halves(2);
  ASSERT_EQ(strataCommInitAll(comms.data(), 2), strataSuccess);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] { EXPECT_EQ(strataCommSplit(comms[r], 0, r, &halves[r], nullptr), strataSuccess); });
  for (auto& t : ts) t.join();
  ASSERT_TRUE(halves[0] && halves[1]);
  for (strataComm_t c : {comms[1], halves[1]}) {  // rank 0 never calls
    strataComm_t out = reinterpret_cast<strataComm_t>(&out);
    const double start = now();
    EXPECT_EQ(strataCommSplit(c, 0, 1, &out, nullptr), strataTimeout);
    EXPECT_LT(now() - start, 4.0);
    EXPECT_EQ(out, nullptr);
    const std::string msg = strataGetLastError(c);
    EXPECT_NE(msg.find("split"), std::string::npos) << msg;
    EXPECT_NE(msg.find("no progress for 1 s"), std::string::npos) << msg;
  }
  for (auto c : halves) strataCommDestroy(c);
  for (auto c : comms) strataCommDestroy(c);
}

}  // namespace
