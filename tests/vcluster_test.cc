// vcluster_test: strata-run's virtual clusters (--nodes) end to end: hostnames, rail interfaces
// and addresses per node, TCP and the bootstrap across nodes, and that every namespace, bridge and
// veth is gone after a normal end, a failing rank, SIGINT, and SIGKILL plus a cleanup. Needs root
// (CAP_NET_ADMIN, CAP_SYS_ADMIN) and the `ip` command; skips visibly otherwise. Jobs of parallel
// test processes queue on strata-run's machine-wide virtual-cluster lock.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/launcher_run.h"
#include "support/netns_support.h"

// STRATA_RUN_BIN comes from tests/CMakeLists.txt, the helpers' paths from launcher_progs/.
#if defined(STRATA_RUN_BIN) && defined(VCLUSTER_HELPER) && defined(LAUNCHER_HELPER) && \
    defined(LAUNCHER_BOOTSTRAP_HELPER)
#define HAVE_PROGS 1
#else
#define HAVE_PROGS 0
#endif
#ifndef STRATA_RUN_BIN
#define STRATA_RUN_BIN ""
#endif
#ifndef VCLUSTER_HELPER
#define VCLUSTER_HELPER ""
#endif
#ifndef LAUNCHER_HELPER
#define LAUNCHER_HELPER ""
#endif
#ifndef LAUNCHER_BOOTSTRAP_HELPER
#define LAUNCHER_BOOTSTRAP_HELPER ""
#endif

namespace {

using Clock = std::chrono::steady_clock;

using strata::testing::JobRun;

/// Called with the output so far; may act on the launcher.
using Watch = std::function<void(pid_t launcher, const std::string& out)>;

/// Runs `prefix... strata-run args...` with output captured, SIGKILLed past `limitSec`.
JobRun runLauncher(const std::vector<std::string>& args, double limitSec = 30, const Watch& watch = {},
                   const std::vector<std::string>& prefix = {}) {
  std::vector<std::string> cmd = prefix;
  cmd.push_back(STRATA_RUN_BIN);
  cmd.insert(cmd.end(), args.begin(), args.end());
  strata::testing::Watch onOutput;
  if (watch) onOutput = [&watch](pid_t p, const std::string& out, const std::string&) { watch(p, out); };
  return strata::testing::runJob(cmd, limitSec, {}, onOutput);
}

bool has(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

int count(const std::string& hay, const std::string& needle) {
  int c = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++c;
  return c;
}

/// The value of "[rank] key=value" in a job's output, or "".
std::string rankValue(const std::string& out, int rank, const std::string& key) {
  std::regex re("(^|\n)\\[" + std::to_string(rank) + "\\] " + key + "=([^\n]*)");
  std::smatch m;
  return std::regex_search(out, m, re) ? m.str(2) : "";
}

bool inPath(const std::string& prog) {
  return !strata::testing::commandOutput("command -v " + prog).empty();
}

/// Why virtual clusters cannot be tested here, or "".
std::string missingPrivileges() {
  if (!HAVE_PROGS) return "strata-run or the helper programs are not built";
  return strata::testing::netnsUnavailable();
}

class VClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = missingPrivileges();
    if (!why.empty()) GTEST_SKIP() << why;
  }
  /// Fails unless every object of launcher `pid` is gone.
  static void expectClean(pid_t pid, const std::string& when) {
    EXPECT_EQ(strata::testing::joinWords(strata::testing::vclusterObjectsOf(pid)), "") << "virtual-cluster objects left " << when;
  }
  const std::string vhelper = VCLUSTER_HELPER;
  const std::string helper = LAUNCHER_HELPER;
};

/// A watch that, once `ready` ranks printed "ready", records the launcher's objects (and
/// `extra(launcher)`) and then sends `sig`.
Watch whenReady(int ready, int sig, std::vector<std::string>* objects, const std::function<void(pid_t)>& extra = {}) {
  auto done = std::make_shared<bool>(false);
  return [=](pid_t launcher, const std::string& out) {
    if (*done || count(out, "] ready\n") < ready) return;
    *done = true;
    *objects = strata::testing::vclusterObjectsOf(launcher);
    if (extra) extra(launcher);
    kill(launcher, sig);
  };
}

TEST(VClusterUsage, BadCombinationsAreUsageErrors) {
  if (!HAVE_PROGS) GTEST_SKIP() << "strata-run is not built";
  JobRun r = runLauncher({"--nodes", "2", "--threads", "-n", "2", "--", "true"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(has(r.err, "--threads cannot be used with --nodes")) << r.err;
  r = runLauncher({"--nodes", "2", "--ppn", "2", "-n", "3", "--", "true"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(has(r.err, "-n 3 does not match --nodes 2 x --ppn 2 = 4")) << r.err;
  r = runLauncher({"-n", "2", "--rails", "2", "--", "true"});
  EXPECT_EQ(r.code, 2) << r.err;
  r = runLauncher({"--nodes", "2", "--rail-rate", "fast", "--", "true"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(has(r.err, "--rail-rate 'fast' is not a rate")) << r.err;
}

TEST_F(VClusterTest, NodesHaveTheirHostnamesAndRails) {
  JobRun r = runLauncher({"--nodes", "2", "--ppn", "2", "--rails", "2", "--rail-rate", "1gbit", "--node-prefix", "vct",
                          "--", vhelper, "info"});
  ASSERT_FALSE(r.limitHit);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "strata-run: virtual cluster: 2 nodes x 2 ranks, 2 rails at 1gbit (namespaces strata-" +
                             std::to_string(r.pid) + "-n0..n1"))
      << r.err;
  std::set<std::string> hosts;
  for (int rank = 0; rank < 4; ++rank) {
    const int node = rank / 2;
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(rankValue(r.out, rank, "host"), "vct-node" + std::to_string(node)) << r.out;
    hosts.insert(rankValue(r.out, rank, "host"));
    EXPECT_EQ(rankValue(r.out, rank, "node"), std::to_string(node));
    EXPECT_EQ(rankValue(r.out, rank, "local"), std::to_string(rank % 2) + "/2");
    EXPECT_EQ(rankValue(r.out, rank, "rate"), "1000000000");
    EXPECT_EQ(rankValue(r.out, rank, "ifname"), "rail");
    EXPECT_EQ(rankValue(r.out, rank, "sysnet"), "lo,rail0,rail1") << "/sys/class/net is the node's";
    for (int rail = 0; rail < 2; ++rail)
      EXPECT_TRUE(has(r.out, "[" + std::to_string(rank) + "] if rail" + std::to_string(rail) + " 198.18." +
                                 std::to_string(rail) + "." + std::to_string(node + 1) + "/24\n"))
          << r.out;
    EXPECT_EQ(count(r.out, "[" + std::to_string(rank) + "] if "), 2) << r.out;
  }
  EXPECT_EQ(hosts.size(), 2u);
  expectClean(r.pid, "after a normal end");
}

TEST_F(VClusterTest, RanksConnectAcrossNodesOnEveryRail) {
  const std::string port = std::to_string(20000 + getpid() % 20000);
  JobRun r = runLauncher({"--nodes", "2", "--ppn", "2", "--rails", "2", "--", vhelper, "connect", port});
  ASSERT_FALSE(r.limitHit);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_TRUE(has(r.out, "[" + std::to_string(rank) + "] connect ok\n")) << r.out << r.err;
    const int peer = 1 - rank / 2;
    for (int rail = 0; rail < 2; ++rail)
      EXPECT_TRUE(has(r.out, "[" + std::to_string(rank) + "] rank " + std::to_string(rank) + " -> node " +
                                 std::to_string(peer) + " rail " + std::to_string(rail) + " ok\n"))
          << r.out;
  }
  expectClean(r.pid, "after a normal end");
}

TEST_F(VClusterTest, BootstrapRunsAcrossNodes) {
  // The ranks reach the launcher's root at 198.18.0.254 and each other on rail0.
  JobRun r = runLauncher({"--nodes", "2", "-n", "4", "--", LAUNCHER_BOOTSTRAP_HELPER}, 60);
  ASSERT_FALSE(r.limitHit);
  EXPECT_EQ(r.code, 0) << r.err;
  for (int k = 0; k < 4; ++k)
    EXPECT_TRUE(has(r.out, "[" + std::to_string(k) + "] round 1 ok rank " + std::to_string(k) + " of 4\n"))
        << r.out << r.err;
  expectClean(r.pid, "after a normal end");
}

TEST_F(VClusterTest, FailingRankEndsTheJobAndCleansUp) {
  std::vector<std::string> during;
  auto seen = std::make_shared<bool>(false);
  JobRun r = runLauncher({"--nodes", "2", "--ppn", "2", "--", helper, "fail", "3", "3"}, 30,
                         [&](pid_t launcher, const std::string& out) {
                           if (!*seen && count(out, "] ready\n") == 4) *seen = true, during = strata::testing::vclusterObjectsOf(launcher);
                         });
  ASSERT_FALSE(r.limitHit);
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_EQ(during.size(), 2u + 2u + 1u) << "2 namespaces, 2 veths, 1 bridge: " << strata::testing::joinWords(during);
  expectClean(r.pid, "after a failed job");
}

TEST_F(VClusterTest, SigintEndsTheJobAndCleansUp) {
  std::vector<std::string> during;
  std::string tcNode, tcHost;
  JobRun r = runLauncher({"--nodes", "2", "--ppn", "2", "--rails", "2", "--rail-rate", "100mbit", "--", helper,
                          "sleep", "30"},
                         30, whenReady(4, SIGINT, &during, [&](pid_t launcher) {
                           const std::string p = std::to_string(launcher);
                           tcNode = strata::testing::commandOutput("tc -n strata-" + p + "-n1 qdisc show dev rail1");
                           tcHost = strata::testing::commandOutput("tc qdisc show dev st" + p + "n1r1");
                         }));
  ASSERT_FALSE(r.limitHit);
  EXPECT_EQ(r.code, 128 + SIGINT) << r.err;
  EXPECT_EQ(during.size(), 2u + 4u + 2u) << strata::testing::joinWords(during);
  EXPECT_TRUE(has(tcNode, "tbf") && has(tcNode, "rate 100Mbit")) << tcNode;
  EXPECT_TRUE(has(tcHost, "tbf") && has(tcHost, "rate 100Mbit")) << tcHost;
  expectClean(r.pid, "after SIGINT");
}

TEST_F(VClusterTest, CleanupCommandRemovesWhatAKilledLauncherLeft) {
  std::vector<std::string> during;
  JobRun r = runLauncher({"--nodes", "2", "--", helper, "sleep", "30"}, 30, whenReady(2, SIGKILL, &during));
  ASSERT_FALSE(r.limitHit);
  EXPECT_EQ(r.code, 128 + SIGKILL);
  EXPECT_EQ(during.size(), 2u + 2u + 1u) << strata::testing::joinWords(during);
  JobRun c = runLauncher({"--cleanup-vcluster"});
  EXPECT_EQ(c.code, 0) << c.err;
  expectClean(r.pid, "after --cleanup-vcluster");
}

TEST_F(VClusterTest, NextLaunchRemovesWhatAKilledLauncherLeft) {
  std::vector<std::string> during;
  JobRun r = runLauncher({"--nodes", "2", "--", helper, "sleep", "30"}, 30, whenReady(2, SIGKILL, &during));
  ASSERT_FALSE(r.limitHit);
  EXPECT_EQ(r.code, 128 + SIGKILL);
  EXPECT_FALSE(during.empty());
  JobRun next = runLauncher({"--nodes", "1", "--", "true"});
  EXPECT_EQ(next.code, 0) << next.err;
  expectClean(r.pid, "after the next virtual-cluster launch");
  expectClean(next.pid, "after a normal end");
}

TEST_F(VClusterTest, FailedSetupSaysWhatFailedAndCleansUp) {
  // A `tc` that fails, found first in PATH: the setup stops after the namespaces and veths exist.
  char dir[] = "/tmp/vcluster_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string fakeTc = std::string(dir) + "/tc";
  std::ofstream(fakeTc) << "#!/bin/sh\necho 'fake tc failure' >&2\nexit 2\n";
  chmod(fakeTc.c_str(), 0755);
  const char* path = std::getenv("PATH");
  JobRun r = runLauncher({"--nodes", "2", "--rails", "2", "--rail-rate", "1gbit", "--", "true"}, 30, {},
                         {"env", std::string("PATH=") + dir + ":" + (path ? path : "/usr/sbin:/usr/bin:/sbin:/bin")});
  unlink(fakeTc.c_str());
  rmdir(dir);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(has(r.err, "strata-run: virtual cluster setup failed: `tc -n strata-" + std::to_string(r.pid) +
                             "-n0 qdisc add dev rail0 root tbf rate 1000000000bit") &&
              has(r.err, "`: exit 2: fake tc failure\n"))
      << r.err;
  expectClean(r.pid, "after a failed setup");
}

TEST_F(VClusterTest, WithoutNetAdminSaysSo) {
  if (!inPath("setpriv")) GTEST_SKIP() << "setpriv (util-linux) is not installed";
  JobRun r = runLauncher({"--nodes", "2", "--", "true"}, 30, {}, {"setpriv", "--bounding-set", "-net_admin"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(has(r.err, "strata-run: --nodes needs CAP_NET_ADMIN (run as root) to create network namespaces"))
      << r.err;
  expectClean(r.pid, "after a refused launch");
}

}  // namespace
