// nccl_abi_test.cc: the NCCL ABI (libnccl.so.2) end to end. Runs tests/helpers/nccl_abi_prog (built
// against strata's <nccl.h>) as processes under strata-run for several world sizes, as threads of one
// process, and as one thread driving every rank (ncclCommInitAll, grouped ncclCommInitRank); and the
// same program built against NVIDIA's nccl.h (nccl_abi_prog_nvidia), pointed at strata's library with
// LD_LIBRARY_PATH. Each run must exit 0 and print "rank R: N checks passed" for every rank.
//
// Run: ctest -L abi   (or build/tests/nccl_abi_test --gtest_filter='*Procs*')
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <regex>
#include <string>
#include <utility>
#include <vector>

extern char** environ;

namespace {

#ifndef STRATA_BUILD_DIR
#define STRATA_BUILD_DIR "."
#endif
#ifndef NCCL_ABI_PROG
#define NCCL_ABI_PROG STRATA_BUILD_DIR "/tests/helpers/nccl_abi_prog"
#endif
#ifndef NCCL_LIB_DIR
#define NCCL_LIB_DIR STRATA_BUILD_DIR "/collectives"
#endif

constexpr int kJobTimeoutSec = 120;  // strata-run --timeout; the harness kills 30 s later

struct RunResult {
  int exitCode = -1;  // -1: killed by a signal or by the harness
  bool timedOut = false;
  std::string output;  // stdout and stderr, interleaved
};

// Runs argv with the current environment minus the launcher's variables plus `extraEnv`; bounded by
// `timeoutSec` (the whole process group is killed then).
RunResult runProgram(const std::vector<std::string>& argv,
                     const std::vector<std::pair<std::string, std::string>>& extraEnv, int timeoutSec) {
  RunResult res;
  std::vector<std::string> envStore;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    std::string key = kv.substr(0, kv.find('='));
    bool overridden = key.rfind("STRATA_RANK", 0) == 0 || key == "STRATA_WORLD_SIZE" ||
                      key == "STRATA_UNIQUE_ID" || key == "STRATA_NTHREADS" ||
                      key.rfind("STRATA_LOCAL_", 0) == 0;
    for (const auto& [k, v] : extraEnv) overridden |= (k == key);
    if (!overridden) envStore.push_back(kv);
  }
  for (const auto& [k, v] : extraEnv) envStore.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& s : envStore) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argStore = argv;
  for (auto& s : argStore) args.push_back(s.data());
  args.push_back(nullptr);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    res.output = "pipe failed";
    return res;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], &fa, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    res.output = std::string("cannot start ") + argv[0] + ": " + strerror(rc);
    return res;
  }

  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSec);
  char buf[65536];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      res.timedOut = true;
      kill(-pid, SIGKILL);
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int pr = poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    ssize_t got = read(fds[0], buf, sizeof buf);
    if (got <= 0) break;  // every writer closed: the job has ended
    res.output.append(buf, static_cast<size_t>(got));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!res.timedOut && WIFEXITED(status)) res.exitCode = WEXITSTATUS(status);
  // Ranks left behind by a failed job belong to its process group.
  kill(-pid, SIGKILL);
  return res;
}

// Checks exit 0 and one "rank R: N checks passed" line per rank (launcher prefixes allowed).
void expectAllRanksPassed(const RunResult& r, int nranks, const std::string& what) {
  ASSERT_FALSE(r.timedOut) << what << ": timed out\n" << r.output;
  EXPECT_EQ(r.exitCode, 0) << what << ": exit code " << r.exitCode << "\n" << r.output;
  for (int rank = 0; rank < nranks; ++rank) {
    std::regex line("(^|\\n)[^\\n]*rank " + std::to_string(rank) + ": [0-9]+ checks passed");
    EXPECT_TRUE(std::regex_search(r.output, line))
        << what << ": no summary line for rank " << rank << "\n" << r.output;
  }
  EXPECT_EQ(r.output.find("FAIL"), std::string::npos) << what << ":\n" << r.output;
}

bool exists(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

std::vector<std::string> launcherArgs(int n, const std::string& prog, bool threads = false) {
#ifdef STRATA_RUN_BIN
  std::vector<std::string> a = {STRATA_RUN_BIN, "-n", std::to_string(n)};
  if (threads) a.push_back("--threads");
  a.insert(a.end(), {"--timeout", std::to_string(kJobTimeoutSec), "--", prog});
  return a;
#else
  (void)n, (void)prog, (void)threads;
  return {};
#endif
}

#define REQUIRE_PROGRAM(path)                                                          \
  do {                                                                                 \
    if (!exists(path)) GTEST_SKIP() << "helper program not built: " << (path);         \
  } while (0)

#ifdef STRATA_RUN_BIN
#define REQUIRE_LAUNCHER()                                                             \
  do {                                                                                 \
    if (!exists(STRATA_RUN_BIN)) GTEST_SKIP() << "strata-run not built: " STRATA_RUN_BIN; \
  } while (0)
#else
#define REQUIRE_LAUNCHER() GTEST_SKIP() << "strata-run is not part of this build (tools/strata_run.cc)"
#endif

// ---- ranks as processes under strata-run -----------------------------------------------------------

class NcclAbiProcs : public ::testing::TestWithParam<int> {};

TEST_P(NcclAbiProcs, AllChecksPass) {
  REQUIRE_LAUNCHER();
  REQUIRE_PROGRAM(NCCL_ABI_PROG);
  const int n = GetParam();
  RunResult r = runProgram(launcherArgs(n, NCCL_ABI_PROG), {}, kJobTimeoutSec + 30);
  expectAllRanksPassed(r, n, "strata-run -n " + std::to_string(n) + " nccl_abi_prog");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, NcclAbiProcs, ::testing::Values(1, 2, 3, 4, 8),
                         [](const auto& info) { return "N" + std::to_string(info.param); });

// ---- ranks as threads of one process ----------------------------------------------------------------

TEST(NcclAbi, Threads4) {
  REQUIRE_PROGRAM(NCCL_ABI_PROG);
  RunResult r = runProgram({NCCL_ABI_PROG, "threads", "4"}, {}, kJobTimeoutSec);
  expectAllRanksPassed(r, 4, "nccl_abi_prog threads 4");
}

TEST(NcclAbi, LauncherThreads3) {
  REQUIRE_LAUNCHER();
  REQUIRE_PROGRAM(NCCL_ABI_PROG);
  RunResult r = runProgram(launcherArgs(3, NCCL_ABI_PROG, /*threads=*/true), {}, kJobTimeoutSec + 30);
  expectAllRanksPassed(r, 3, "strata-run -n 3 --threads nccl_abi_prog");
}

// ---- one thread driving every rank: ncclGroupStart / a call per comm / ncclGroupEnd ----------------

TEST(NcclAbi, InitAll3) {
  REQUIRE_PROGRAM(NCCL_ABI_PROG);
  RunResult r = runProgram({NCCL_ABI_PROG, "initall", "3"}, {}, kJobTimeoutSec);
  expectAllRanksPassed(r, 3, "nccl_abi_prog initall 3");
}

TEST(NcclAbi, GroupedInitRank2) {
  REQUIRE_PROGRAM(NCCL_ABI_PROG);
  RunResult r = runProgram({NCCL_ABI_PROG, "groupinit", "2"}, {}, kJobTimeoutSec);
  expectAllRanksPassed(r, 2, "nccl_abi_prog groupinit 2");
}

// ---- binary compatibility: built against NVIDIA's nccl.h, run on strata's libnccl.so.2 -------------

#ifdef NCCL_ABI_PROG_NVIDIA
class NcclAbiNvidiaHeader : public ::testing::TestWithParam<int> {};

TEST_P(NcclAbiNvidiaHeader, AllChecksPass) {
  REQUIRE_LAUNCHER();
  REQUIRE_PROGRAM(NCCL_ABI_PROG_NVIDIA);
  const int n = GetParam();
  const char* old = getenv("LD_LIBRARY_PATH");
  std::string ld = std::string(NCCL_LIB_DIR) + (old && *old ? std::string(":") + old : "");
  RunResult r = runProgram(launcherArgs(n, NCCL_ABI_PROG_NVIDIA), {{"LD_LIBRARY_PATH", ld}},
                           kJobTimeoutSec + 30);
  expectAllRanksPassed(r, n, "strata-run -n " + std::to_string(n) + " nccl_abi_prog_nvidia");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, NcclAbiNvidiaHeader, ::testing::Range(1, 9),
                         [](const auto& info) { return "N" + std::to_string(info.param); });

// The "done" bar of the foundation issue: 4 ranks as threads and 3 ranks from ncclCommInitAll,
// in a program that only ever saw NVIDIA's header.
TEST(NcclAbi, NvidiaHeaderThreads4AndInitAll3) {
  REQUIRE_PROGRAM(NCCL_ABI_PROG_NVIDIA);
  const char* old = getenv("LD_LIBRARY_PATH");
  std::string ld = std::string(NCCL_LIB_DIR) + (old && *old ? std::string(":") + old : "");
  RunResult t = runProgram({NCCL_ABI_PROG_NVIDIA, "threads", "4"}, {{"LD_LIBRARY_PATH", ld}}, kJobTimeoutSec);
  expectAllRanksPassed(t, 4, "nccl_abi_prog_nvidia threads 4");
  RunResult a = runProgram({NCCL_ABI_PROG_NVIDIA, "initall", "3"}, {{"LD_LIBRARY_PATH", ld}}, kJobTimeoutSec);
  expectAllRanksPassed(a, 3, "nccl_abi_prog_nvidia initall 3");
}

TEST(NcclAbi, NvidiaBuildLinksNoCudaRuntime) {
  REQUIRE_PROGRAM(NCCL_ABI_PROG_NVIDIA);
  RunResult r = runProgram({"/usr/bin/env", "LD_TRACE_LOADED_OBJECTS=1", NCCL_ABI_PROG_NVIDIA},
                           {{"LD_LIBRARY_PATH", NCCL_LIB_DIR}}, 30);
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_EQ(r.output.find("libcudart"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(NCCL_LIB_DIR "/libnccl.so.2"), std::string::npos)
      << "libnccl.so.2 does not resolve to strata's:\n" << r.output;
}
#else
TEST(NcclAbiNvidiaHeader, AllChecksPass) {
  GTEST_SKIP() << "nccl_abi_prog_nvidia not built: NVIDIA's nccl.h was not found "
                  "(set STRATA_NVIDIA_NCCL_INCLUDE to its path)";
}
#endif

}  // namespace
