// hang_test.cc: the hang report end to end. One rank of a 4-rank job does not enter the 6th
// all-reduce (tests/support/hang_worker.cc); the others time out (STRATA_TIMEOUT=2). Under
// strata-run the launcher asks the survivor for its dump and prints the diagnosis naming that
// rank; launched by hand with torchrun-style variables and STRATA_DUMP_DIR, strata-diagnose names
// it from the dumps: as the rank everyone waits on while it has sent none, and as the rank behind
// once SIGUSR1 made it write one. Each job is bounded by seconds.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "support/free_port.h"
#include "support/launcher_run.h"
#include "support/subprocess.h"

extern char** environ;

using namespace strata::testing;

namespace {

const std::string kBehind = "rank 2 has not entered all_reduce #6 (count 1024 fp32 sum); ranks 0,1,3 wait in it";

class StrataRunHang : public ::testing::TestWithParam<const char*> {};

TEST_P(StrataRunHang, LauncherNamesTheRankThatDidNotEnter) {
  JobRun r = runJob({STRATA_RUN_BIN, "-n", "4", "--", HANG_WORKER_BIN, "2", "5", "30"}, 60,
                    {{"STRATA_TIMEOUT", "2"}, {"STRATA_TRANSPORT", GetParam()}});
  EXPECT_FALSE(r.limitHit);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("strata-run: hang report from 4 rank process dumps"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(kBehind), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank 2 (host "), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, 20) << "the rank that sleeps was not stopped promptly";
}

INSTANTIATE_TEST_SUITE_P(Transport, StrataRunHang, ::testing::Values("local", "tcp"));

TEST(StrataRunHang, NoReportWhenTheJobSucceeds) {
  JobRun r = runJob({STRATA_RUN_BIN, "-n", "2", "--", HANG_WORKER_BIN, "-1", "3", "0"}, 60);
  EXPECT_EQ(r.code, 5) << r.err;  // rank -1 skips nothing: the extra all-reduce succeeds (exit 5)
  EXPECT_EQ(r.err.find("hang report"), std::string::npos) << r.err;
}


/// Starts hang_worker as rank `r` of 4 with torchrun-style variables; its stderr goes to `log`.
pid_t startRank(int r, int port, const std::string& dumpDir, const std::string& log) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (kv.rfind("STRATA_UNIQUE_ID=", 0) == 0 || kv.rfind("STRATA_RANK=", 0) == 0 || kv.rfind("RANK=", 0) == 0)
      continue;
    env.push_back(kv);
  }
  for (std::string kv : {"WORLD_SIZE=4", "MASTER_ADDR=127.0.0.1", "STRATA_TIMEOUT=2"}) env.push_back(kv);
  env.push_back("RANK=" + std::to_string(r));
  env.push_back("MASTER_PORT=" + std::to_string(port));
  env.push_back("STRATA_DUMP_DIR=" + dumpDir);
  pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) dup2(fd, 2);
    std::vector<char*> envp;
    for (std::string& kv : env) envp.push_back(kv.data());
    envp.push_back(nullptr);
    const char* argv[] = {HANG_WORKER_BIN, "2", "5", "20", nullptr};
    execve(HANG_WORKER_BIN, const_cast<char**>(argv), envp.data());
    _exit(127);
  }
  return pid;
}

TEST(OtherLaunchers, StrataDiagnoseNamesTheRankFromTheDumps) {
  char templ[] = "/tmp/strata-hang-test-XXXXXX";
  ASSERT_NE(mkdtemp(templ), nullptr);
  const std::string dir = templ;
  char logTempl[] = "/tmp/strata-hang-logs-XXXXXX";  // the ranks' stderr, shown if the test fails
  ASSERT_NE(mkdtemp(logTempl), nullptr);
  const std::string logs = logTempl;
  const int port = freePort();
  std::vector<pid_t> pids;
  for (int r = 0; r < 4; ++r) pids.push_back(startRank(r, port, dir, logs + "/rank" + std::to_string(r)));
  // Ranks 0, 1 and 3 time out (2 s) and exit 1, each writing its dump on the way.
  for (int r : {0, 1, 3}) {
    int st = 0;
    ASSERT_EQ(waitpid(pids[r], &st, 0), pids[r]);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 1) << "rank " << r << " status " << st;
  }
  RunResult d = runCommand(std::string(STRATA_DIAGNOSE_BIN) + " " + dir);
  EXPECT_EQ(d.code, 1) << d.out;
  EXPECT_NE(d.out.find("no dump from rank 2 (ranks 0,1,3 wait on it); ranks 0,1,3 wait in all_reduce #6"),
            std::string::npos)
      << d.out;
  // Asked with SIGUSR1, rank 2 (still sleeping) writes its dump, and the diagnosis says it is behind.
  kill(pids[2], SIGUSR1);
  bool written = false;
  for (int i = 0; i < 100 && !written; ++i) {
    d = runCommand(std::string(STRATA_DIAGNOSE_BIN) + " " + dir);
    written = d.out.find("dumps from 4") != std::string::npos;
    if (!written) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(written) << d.out;
  EXPECT_NE(d.out.find(kBehind), std::string::npos) << d.out;
  kill(pids[2], SIGKILL);
  waitpid(pids[2], nullptr, 0);
  if (HasFailure()) std::cerr << runCommand("tail -n 20 " + logs + "/rank*").out;
  EXPECT_EQ(runCommand(std::string("rm -rf ") + dir + " " + logs).code, 0);
}

TEST(OtherLaunchers, StrataDiagnoseUsage) {
  EXPECT_EQ(runCommand(STRATA_DIAGNOSE_BIN).code, 2);
  EXPECT_EQ(runCommand(std::string(STRATA_DIAGNOSE_BIN) + " /nonexistent-dir").code, 2);
}

}  // namespace
