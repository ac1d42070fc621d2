// launcher_test: strata-run end to end. Each test runs the launcher on a helper program
// (tests/launcher_progs) with its stdout and stderr captured, under a hard time limit (the
// launcher is SIGKILLed past it, and the test fails).
#include <fcntl.h>
#include <sched.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/launcher_run.h"

// STRATA_RUN_BIN comes from tests/CMakeLists.txt, the helpers' paths from launcher_progs/.
#if defined(STRATA_RUN_BIN) && defined(LAUNCHER_HELPER) && defined(LAUNCHER_BOOTSTRAP_HELPER)
#define HAVE_LAUNCHER 1
#else
#define HAVE_LAUNCHER 0
#endif
#ifndef STRATA_RUN_BIN
#define STRATA_RUN_BIN ""
#endif
#ifndef LAUNCHER_HELPER
#define LAUNCHER_HELPER ""
#endif
#ifndef LAUNCHER_BOOTSTRAP_HELPER
#define LAUNCHER_BOOTSTRAP_HELPER ""
#endif

namespace {

using Clock = std::chrono::steady_clock;

using strata::testing::Env;
using strata::testing::JobRun;
using strata::testing::Watch;

JobRun runLauncher(const std::vector<std::string>& args, double limitSec = 30, const Env& env = {},
                   const Watch& watch = {}) {
  std::vector<std::string> cmd = {STRATA_RUN_BIN};
  cmd.insert(cmd.end(), args.begin(), args.end());
  return strata::testing::runJob(cmd, limitSec, env, watch);
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

bool has(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

int count(const std::string& hay, const std::string& needle) {
  int c = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++c;
  return c;
}

/// The pids the helper ranks printed ("[R] pid=N").
std::vector<pid_t> rankPids(const std::string& out) {
  std::vector<pid_t> pids;
  std::regex re(R"(^\[\d+\] pid=(\d+)$)");
  for (const auto& l : lines(out)) {
    std::smatch m;
    if (std::regex_match(l, m, re)) pids.push_back(static_cast<pid_t>(std::stol(m[1])));
  }
  return pids;
}

bool processGone(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  // A zombie whose parent has not reaped it yet is gone as far as running goes.
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (!f) return true;
  char buf[512] = {};
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  const char* close = std::strrchr(buf, ')');
  return n > 0 && close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

/// A watch that sends `sig` to the launcher once `readyCount` ranks printed "ready".
Watch signalWhenReady(int readyCount, int sig, bool* sent) {
  return [=](pid_t launcher, const std::string& out, const std::string&) {
    if (!*sent && count(out, "] ready\n") >= readyCount) {
      *sent = true;
      kill(launcher, sig);
    }
  };
}

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HAVE_LAUNCHER) GTEST_SKIP() << "strata-run or the helper programs are not built";
  }
  const std::string helper = LAUNCHER_HELPER;
  const std::string bootstrapHelper = LAUNCHER_BOOTSTRAP_HELPER;
};

TEST_F(LauncherTest, SetsEnvironmentPerRank) {
  // Stale values in the launcher's environment must not leak into the ranks.
  JobRun r = runLauncher({"-n", "3", "--", helper, "env"}, 30, {{"STRATA_NTHREADS", "9"}, {"STRATA_RANK", "7"}});
  ASSERT_FALSE(r.limitHit);
  EXPECT_EQ(r.code, 0) << r.err;
  std::set<std::string> ids;
  for (int k = 0; k < 3; ++k) {
    const std::string p = "[" + std::to_string(k) + "] ";
    EXPECT_TRUE(has(r.out, p + "STRATA_RANK=" + std::to_string(k) + "\n")) << r.out;
    EXPECT_TRUE(has(r.out, p + "STRATA_WORLD_SIZE=3\n")) << r.out;
    EXPECT_TRUE(has(r.out, p + "STRATA_LOCAL_RANK=" + std::to_string(k) + "\n")) << r.out;
    EXPECT_TRUE(has(r.out, p + "STRATA_LOCAL_SIZE=3\n")) << r.out;
    EXPECT_TRUE(has(r.out, p + "STRATA_NTHREADS unset\n")) << r.out;
    std::smatch m;
    std::string esc = "\\[" + std::to_string(k) + "\\] STRATA_UNIQUE_ID=([0-9a-f]+)\n";
    ASSERT_TRUE(std::regex_search(r.out, m, std::regex(esc))) << r.out;
    ids.insert(m[1]);
    // stderr goes to stderr, with the prefix.
    EXPECT_TRUE(has(r.err, p + "stderr of rank " + std::to_string(k) + "\n")) << r.err;
  }
  EXPECT_EQ(ids.size(), 1u) << "every rank must get the same unique id";
  EXPECT_EQ(ids.begin()->size(), 256u) << "128 bytes, hex";
  EXPECT_FALSE(has(r.out, "stderr of rank"));
  EXPECT_FALSE(has(r.err, "strata-run:")) << r.err;
}

TEST_F(LauncherTest, EveryLineIsPrefixed) {
  JobRun r = runLauncher({"-n", "2", helper, "env"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const auto& l : lines(r.out)) EXPECT_TRUE(l.rfind("[0] ", 0) == 0 || l.rfind("[1] ", 0) == 0) << l;
  for (const auto& l : lines(r.err)) EXPECT_TRUE(l.rfind("[0] ", 0) == 0 || l.rfind("[1] ", 0) == 0) << l;
}

TEST_F(LauncherTest, NoPrefixPassesOutputThrough) {
  JobRun r = runLauncher({"--no-prefix", "-n", "2", "--", helper, "env"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(has(r.out, "[0]")) << r.out;
  EXPECT_TRUE(has(r.out, "\nSTRATA_RANK=1\n") || r.out.rfind("STRATA_RANK=1\n", 0) == 0) << r.out;
  EXPECT_TRUE(has(r.err, "stderr of rank 0\n")) << r.err;
}

TEST_F(LauncherTest, PartialLastLinesAreFlushed) {
  JobRun r = runLauncher({"-n", "2", helper, "partial"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "[0] no newline\n")) << r.out;
  EXPECT_TRUE(has(r.out, "[1] no newline\n")) << r.out;
  EXPECT_TRUE(has(r.err, "[0] err partial\n")) << r.err;
  EXPECT_TRUE(has(r.err, "[1] err partial\n")) << r.err;
  JobRun raw = runLauncher({"--no-prefix", "-n", "2", helper, "partial"});
  ASSERT_EQ(raw.code, 0) << raw.err;
  EXPECT_EQ(raw.out, "no newlineno newline") << "no bytes added without a prefix";
}

TEST_F(LauncherTest, LinesOfRanksNeverInterleave) {
  const int kLines = 3000;
  JobRun r = runLauncher({"-n", "4", helper, "lines", std::to_string(kLines)}, 60);
  ASSERT_EQ(r.code, 0) << r.err;
  std::regex re(R"(^\[(\d)\] rank (\d) line (\d+) (x+)$)");
  std::map<int, int> next;
  for (const auto& l : lines(r.out)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(l, m, re)) << "mangled line: " << l.substr(0, 200);
    const int rank = std::stoi(m[1]);
    ASSERT_EQ(m[2], m[1]) << l.substr(0, 200);
    ASSERT_EQ(std::stoi(m[3]), next[rank]) << "rank " << rank << " lines out of order";
    ASSERT_EQ(m[4].length(), static_cast<size_t>(100 + 37 * rank));
    ++next[rank];
  }
  for (int k = 0; k < 4; ++k) EXPECT_EQ(next[k], kLines) << "rank " << k;
}

TEST_F(LauncherTest, LongLineGetsOnePrefix) {
  const size_t kBytes = 300000;  // several pipe buffers, above the relay's line cap
  JobRun r = runLauncher({"-n", "1", helper, "longline", std::to_string(kBytes)});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "[0] " + std::string(kBytes, 'x') + "\n");
}

TEST_F(LauncherTest, ArgumentsPassThrough) {
  JobRun r = runLauncher({"-n", "1", "--", helper, "args", "-n", "5", "with space", "--threads", "--", ""});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "[0] arg[0]=-n\n[0] arg[1]=5\n[0] arg[2]=with space\n[0] arg[3]=--threads\n[0] arg[4]=--\n"
                   "[0] arg[5]=\n");
  // Without "--", options after the program belong to the program too.
  JobRun r2 = runLauncher({"-n", "1", helper, "args", "--timeout", "x"});
  ASSERT_EQ(r2.code, 0) << r2.err;
  EXPECT_EQ(r2.out, "[0] arg[0]=--timeout\n[0] arg[1]=x\n");
}

TEST_F(LauncherTest, ExitsZeroWhenAllRanksSucceed) {
  JobRun r = runLauncher({"-n", "4", helper, "exit", "0"});
  ASSERT_FALSE(r.limitHit);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST_F(LauncherTest, FailingRankCodePropagatesAndOthersAreKilled) {
  JobRun r = runLauncher({"-n", "4", helper, "fail", "1", "3"}, 30);
  ASSERT_FALSE(r.limitHit) << "the launcher did not end the job";
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_LT(r.seconds, 10.0);
  EXPECT_TRUE(has(r.err, "strata-run: rank 1 exited with code 3\n")) << r.err;
  EXPECT_EQ(count(r.err, "strata-run: rank"), 1) << "only the first failure is reported: " << r.err;
  EXPECT_FALSE(has(r.err, "SIGKILL")) << "sleeping ranks die on SIGTERM: " << r.err;
  // The rank's own last words come before the verdict.
  EXPECT_LT(r.err.find("[1] rank 1 failing"), r.err.find("strata-run: rank 1 exited")) << r.err;
  std::vector<pid_t> pids = rankPids(r.out);
  EXPECT_FALSE(pids.empty()) << r.out;
  for (pid_t p : pids) EXPECT_TRUE(processGone(p)) << "rank pid " << p << " outlived the job";
}

TEST_F(LauncherTest, SigkillAfterGraceWhenSigtermIsIgnored) {
  JobRun r = runLauncher({"-n", "3", helper, "fail", "0", "5", "ignore-term"}, 30);
  ASSERT_FALSE(r.limitHit) << "the launcher did not escalate to SIGKILL";
  EXPECT_EQ(r.code, 5) << r.err;
  EXPECT_GE(r.seconds, 3.0) << "SIGKILL must wait out the grace period";
  EXPECT_LT(r.seconds, 15.0);
  EXPECT_TRUE(has(r.err, "SIGKILL")) << r.err;
  for (pid_t p : rankPids(r.out)) EXPECT_TRUE(processGone(p)) << "rank pid " << p;
}

TEST_F(LauncherTest, RankKilledBySignalGives128PlusSignal) {
  for (int sig : {SIGSEGV, SIGKILL}) {
    JobRun r = runLauncher({"-n", "3", helper, "crash", "2", std::to_string(sig)}, 30);
    ASSERT_FALSE(r.limitHit);
    EXPECT_EQ(r.code, 128 + sig) << r.err;
    EXPECT_TRUE(has(r.err, std::string("strata-run: rank 2 killed by signal ") + (sig == SIGSEGV ? "SIGSEGV" : "SIGKILL")))
        << r.err;
    EXPECT_LT(r.seconds, 10.0);
  }
}

// --keep-going (elastic jobs): a rank killed by a signal is reported and the others go on; the
// job's code is theirs. A rank that exits with an error still ends the job; so does the death of
// the last rank.
TEST_F(LauncherTest, KeepGoingLetsTheOthersGoOnPastAKilledRank) {
  JobRun r = runLauncher({"--keep-going", "-n", "3", helper, "crash", "1", std::to_string(SIGKILL), "1.5"}, 30);
  ASSERT_FALSE(r.limitHit);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_GE(r.seconds, 1.5) << "the others were stopped";
  EXPECT_TRUE(has(r.err, "strata-run: rank 1 killed by signal SIGKILL; the others go on (--keep-going)")) << r.err;
  JobRun f = runLauncher({"--keep-going", "-n", "3", helper, "fail", "1", "3"}, 30);
  ASSERT_FALSE(f.limitHit);
  EXPECT_EQ(f.code, 3) << f.err;
  EXPECT_LT(f.seconds, 10.0);
  JobRun all = runLauncher({"--keep-going", "-n", "1", helper, "crash", "0", std::to_string(SIGKILL)}, 30);
  EXPECT_EQ(all.code, 128 + SIGKILL) << all.err;
}

TEST_F(LauncherTest, TimeoutKillsAllAndExits124) {
  JobRun r = runLauncher({"--timeout", "1", "-n", "2", helper, "sleep", "60"}, 30);
  ASSERT_FALSE(r.limitHit);
  EXPECT_EQ(r.code, 124) << r.err;
  EXPECT_GE(r.seconds, 1.0);
  EXPECT_LT(r.seconds, 10.0);
  EXPECT_TRUE(has(r.err, "timeout")) << r.err;
  EXPECT_TRUE(has(r.err, "ranks still running: 0 1")) << r.err;
  for (pid_t p : rankPids(r.out)) EXPECT_TRUE(processGone(p)) << "rank pid " << p;
  // A job that ends in time is not affected by the timeout.
  JobRun ok = runLauncher({"--timeout", "30", "-n", "2", helper, "exit", "0"});
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_LT(ok.seconds, 20.0);
}

TEST_F(LauncherTest, ThreadsModeRunsOneProcess) {
  JobRun r = runLauncher({"--threads", "-n", "4", helper, "env"}, 30, {{"STRATA_RANK", "7"}, {"STRATA_LOCAL_RANK", "7"}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "[0] STRATA_NTHREADS=4\n")) << r.out;
  EXPECT_TRUE(has(r.out, "[0] STRATA_WORLD_SIZE=4\n")) << r.out;
  EXPECT_TRUE(has(r.out, "[0] STRATA_RANK unset\n")) << r.out;
  EXPECT_TRUE(has(r.out, "[0] STRATA_LOCAL_RANK unset\n")) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\[0\] STRATA_UNIQUE_ID=[0-9a-f]{256}\n)"))) << r.out;
  EXPECT_EQ(rankPids(r.out).size(), 1u) << r.out;
  EXPECT_FALSE(has(r.out, "[1]")) << r.out;
}

TEST_F(LauncherTest, BadFlagsFailWithAMessage) {
  const std::vector<std::vector<std::string>> cases = {
      {"-n", "0", helper, "env"},           {"-n", "-2", helper, "env"},
      {"-n", "abc", helper, "env"},         {"--bogus", "-n", "2", helper, "env"},
      {"-n", "2"},                          {helper, "env"},
      {"-n", "2", "--timeout", "0", helper, "env"}, {"-n", "2", "--timeout", "soon", helper, "env"},
      {"-n"},
  };
  for (const auto& args : cases) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    JobRun r = runLauncher(args, 20);
    ASSERT_FALSE(r.limitHit) << joined;
    EXPECT_NE(r.code, 0) << joined;
    EXPECT_NE(r.code, 127) << joined;
    EXPECT_FALSE(r.err.empty()) << "no message for: " << joined;
    EXPECT_FALSE(has(r.out, "STRATA_RANK")) << "ranks started for: " << joined;
  }
  JobRun help = runLauncher({"--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_TRUE(has(help.out, "--threads")) << help.out;
}

TEST_F(LauncherTest, UnknownProgramExits127) {
  JobRun r = runLauncher({"-n", "2", "no-such-program-strata-test"});
  EXPECT_EQ(r.code, 127) << r.err;
  EXPECT_TRUE(has(r.err, "no-such-program-strata-test")) << r.err;
  EXPECT_TRUE(has(r.err, "not found")) << r.err;
  JobRun r2 = runLauncher({"-n", "2", "/nonexistent/dir/prog"});
  EXPECT_EQ(r2.code, 127) << r2.err;
  JobRun r3 = runLauncher({"-n", "1", "/dev/null"});  // exists, not executable
  EXPECT_EQ(r3.code, 126) << r3.err;
  EXPECT_TRUE(has(r3.err, "not executable")) << r3.err;
}

TEST_F(LauncherTest, ConfigPrintsAlignedTable) {
  JobRun r = runLauncher({"--config"}, 20, {{"STRATA_ALGO", "ring"}});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> ls = lines(r.out);
  ASSERT_GE(ls.size(), 5u) << r.out;
  const std::string& head = ls[0];
  const size_t cols[] = {head.find("TYPE"), head.find("DEFAULT"), head.find("VALUE"), head.find("DESCRIPTION")};
  for (size_t c : cols) ASSERT_NE(c, std::string::npos) << head;
  bool sawAlgo = false;
  for (size_t i = 1; i < ls.size(); ++i) {
    const std::string& l = ls[i];
    // Every variable is strata's, except NCCL's names strata honours.
    ASSERT_TRUE(l.rfind("STRATA_", 0) == 0 || l.rfind("NCCL_SOCKET_IFNAME ", 0) == 0) << l;
    for (size_t c : cols) {
      ASSERT_GT(l.size(), c) << l;
      EXPECT_TRUE(l[c - 1] == ' ' && l[c] != ' ') << "misaligned: " << l;
    }
    if (l.rfind("STRATA_ALGO ", 0) == 0) {
      sawAlgo = true;
      EXPECT_EQ(l.substr(cols[1], 4), "auto") << l;   // default
      EXPECT_EQ(l.substr(cols[2], 4), "ring") << l;   // current value
    }
  }
  EXPECT_TRUE(sawAlgo) << r.out;
}

TEST_F(LauncherTest, SigtermToLauncherIsForwarded) {
  bool sent = false;
  JobRun r = runLauncher({"-n", "2", helper, "sleep", "60"}, 30, {}, signalWhenReady(2, SIGTERM, &sent));
  ASSERT_TRUE(sent) << r.out << r.err;
  ASSERT_FALSE(r.limitHit);
  EXPECT_EQ(r.code, 128 + SIGTERM) << r.err;
  EXPECT_LT(r.seconds, 10.0);
  EXPECT_TRUE(has(r.err, "SIGTERM")) << r.err;
  std::vector<pid_t> pids = rankPids(r.out);
  EXPECT_EQ(pids.size(), 2u);
  for (pid_t p : pids) EXPECT_TRUE(processGone(p)) << "rank pid " << p;
}

TEST_F(LauncherTest, NoRankOutlivesAKilledLauncher) {
  // Become the reaper of orphans, so that the ranks' ends can be observed exactly.
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  bool sent = false;
  JobRun r = runLauncher({"-n", "3", helper, "sleep", "60"}, 30, {}, signalWhenReady(3, SIGKILL, &sent));
  ASSERT_TRUE(sent) << r.out << r.err;
  EXPECT_EQ(r.code, 128 + SIGKILL);
  std::vector<pid_t> pids = rankPids(r.out);
  ASSERT_EQ(pids.size(), 3u) << r.out;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  for (pid_t p : pids) {
    int status = 0;
    pid_t w = 0;
    while ((w = waitpid(p, &status, WNOHANG)) == 0 && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_EQ(w, p) << "rank pid " << p << " outlived the launcher";
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  }
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

TEST_F(LauncherTest, RanksReadEofOnStdin) {
  JobRun r = runLauncher({"-n", "2", helper, "stdin"}, 20);
  ASSERT_FALSE(r.limitHit) << "a rank blocked on stdin";
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "[0] stdin eof\n")) << r.out;
  EXPECT_TRUE(has(r.out, "[1] stdin eof\n")) << r.out;
}

TEST_F(LauncherTest, RanksBootstrapThroughTheLaunchersRoot) {
  JobRun r = runLauncher({"-n", "3", bootstrapHelper}, 90);
  ASSERT_FALSE(r.limitHit);
  EXPECT_EQ(r.code, 0) << r.err;
  for (int round = 0; round < 2; ++round)
    for (int k = 0; k < 3; ++k)
      EXPECT_TRUE(has(r.out, "[" + std::to_string(k) + "] round " + std::to_string(round) + " ok rank " +
                                 std::to_string(k) + " of 3\n"))
          << r.out << r.err;
}

TEST_F(LauncherTest, ThreadRanksBootstrapThroughTheLaunchersRoot) {
  JobRun r = runLauncher({"--threads", "-n", "3", bootstrapHelper}, 90);
  ASSERT_FALSE(r.limitHit);
  EXPECT_EQ(r.code, 0) << r.err;
  for (int round = 0; round < 2; ++round)
    for (int k = 0; k < 3; ++k)
      EXPECT_TRUE(has(r.out, "[0] round " + std::to_string(round) + " ok rank " + std::to_string(k) + " of 3\n"))
          << r.out << r.err;
}

// ---- CPU binding (--bind, tools/launcher_bind.h) ----

/// The CPUs this test process may run on, as the helper prints them.
std::string ownCpuList() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(0, sched_getaffinity(0, sizeof(set), &set));
  std::string list;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) list += (list.empty() ? "" : ",") + std::to_string(c);
  return list;
}

int ownCpuCount() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
}

/// Rank -> "list=..." value printed by the helper's cpus mode.
std::map<int, std::string> rankCpuLists(const std::string& out) {
  std::map<int, std::string> m;
  std::regex re("\\[(\\d+)\\] cpus=\\d+ list=([0-9,]+)\n");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it)
    m[std::stoi((*it)[1])] = (*it)[2];
  return m;
}

TEST_F(LauncherTest, BindsEachRankToItsOwnCpuWhenTheyFit) {
  const int ncpu = ownCpuCount();
  if (ncpu < 2) GTEST_SKIP() << "needs 2 CPUs, this process may use " << ncpu;
  JobRun r = runLauncher({"-n", "2", "--", helper, "cpus"});
  ASSERT_FALSE(r.limitHit);
  ASSERT_EQ(r.code, 0) << r.err;
  std::map<int, std::string> lists = rankCpuLists(r.out);
  ASSERT_EQ(lists.size(), 2u) << r.out;
  const std::string allowed = "," + ownCpuList() + ",";
  for (const auto& [rank, list] : lists) {
    EXPECT_EQ(list.find(','), std::string::npos) << "rank " << rank << " is not bound to one CPU: " << list;
    EXPECT_NE(allowed.find("," + list + ","), std::string::npos) << "rank " << rank << " got CPU " << list
                                                                 << " outside " << allowed;
  }
  EXPECT_NE(lists[0], lists[1]) << "both ranks on one CPU";
}

TEST_F(LauncherTest, BindNoneAndOversubscribedJobsKeepTheLaunchersCpus) {
  const std::string own = ownCpuList();
  JobRun none = runLauncher({"--bind", "none", "-n", "2", "--", helper, "cpus"});
  ASSERT_EQ(none.code, 0) << none.err;
  for (const auto& [rank, list] : rankCpuLists(none.out)) EXPECT_EQ(list, own) << "rank " << rank;
  EXPECT_EQ(rankCpuLists(none.out).size(), 2u) << none.out;
  // More ranks than CPUs: binding would stack ranks anyway; the OS places them.
  const int n = ownCpuCount() + 1;
  JobRun over = runLauncher({"-n", std::to_string(n), "--", helper, "cpus"}, 60);
  ASSERT_EQ(over.code, 0) << over.err;
  std::map<int, std::string> lists = rankCpuLists(over.out);
  EXPECT_EQ(lists.size(), static_cast<size_t>(n)) << over.out;
  for (const auto& [rank, list] : lists) EXPECT_EQ(list, own) << "rank " << rank;
}

TEST_F(LauncherTest, UnknownBindPolicyIsAUsageError) {
  JobRun r = runLauncher({"--bind", "socket", "-n", "2", "--", helper, "cpus"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "--bind")) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

}  // namespace
