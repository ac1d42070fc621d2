// comm_process_test.cc: ranks as processes through the launcher (the real shared-memory and tcp
// paths): `strata-run -n N -- strata_check_worker` must report every check passed on every rank.
#include <gtest/gtest.h>

#include "support/free_port.h"
#include "support/subprocess.h"

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <string>

namespace {

using strata::testing::RunResult;
RunResult run(const std::string& cmd) { return strata::testing::runCommand(cmd); }

int countPassedRanks(const std::string& out) {
  int n = 0;
  for (size_t pos = 0; (pos = out.find("checks passed, 0 failed", pos)) != std::string::npos; ++pos) n++;
  return n;
}

struct Case {
  int n;
  const char* env;
  const char* args;
};

class ProcessRanks : public ::testing::TestWithParam<Case> {};

TEST_P(ProcessRanks, EveryRankPassesTheSweep) {
  const Case c = GetParam();
  std::string cmd = std::string("env ") + c.env + " " STRATA_RUN_BIN " --timeout 240 -n " + std::to_string(c.n) +
                    " -- " WORKER_BIN " " + c.args;
  RunResult r = run(cmd);
  EXPECT_EQ(r.code, 0) << cmd << "\n" << r.out;
  EXPECT_EQ(countPassedRanks(r.out), c.n) << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    Launcher, ProcessRanks,
    ::testing::Values(Case{2, "STRATA_TRANSPORT=auto", "--split"}, Case{4, "STRATA_TRANSPORT=auto", "--quick --split"},
                      Case{2, "STRATA_TRANSPORT=tcp", "--quick"}, Case{3, "STRATA_TRANSPORT=tcp STRATA_TCP_SOCKETS=3 STRATA_TCP_CHUNK_BYTES=8192", "--quick"},
                      Case{4, "STRATA_ALGO=ring STRATA_LOCAL_SLOT_BYTES=4096", "--quick"},
                      Case{3, "STRATA_LOCAL_CMA=1 STRATA_CMA_MIN_BYTES=0 STRATA_LOCAL_SLOT_BYTES=8192", "--quick"}),
    [](const auto& info) {
      std::string env = info.param.env;
      std::string tag = env.find("tcp") != std::string::npos    ? "tcp"
                        : env.find("ring") != std::string::npos    ? "ring_small_slots"
                        : env.find("CMA_MIN") != std::string::npos ? "cma_all_sizes"
                                                                   : "local";
      return tag + "_n" + std::to_string(info.param.n) + "_" + std::to_string(info.index);
    });

TEST(ProcessEnv, TorchrunStyleVariablesWork) {
  // Two ranks started by hand with RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT.
  std::string port = std::to_string(strata::testing::freePort());
  std::string common = "env -u STRATA_UNIQUE_ID WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port + " ";
  std::string cmd = common + "RANK=1 " WORKER_BIN " --quick & p=$!; " + common + "RANK=0 " WORKER_BIN
                    " --quick; b=$?; wait $p; a=$?; exit $((a | b))";
  RunResult r = run("timeout 120 bash -c '" + cmd + "'");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(countPassedRanks(r.out), 2) << r.out;
}

// Unbound ranks (torchrun-style, no CPU binding) bind their thread to a CPU each at init when they
// fit the CPUs (collectives/auto_bind.h); STRATA_AUTO_BIND=0 leaves them as they were started.
std::string cpusOf(const std::string& out, int rank) {
  const std::string key = "rank " + std::to_string(rank) + " cpus=";
  const size_t at = out.find(key);
  if (at == std::string::npos) return "";
  return out.substr(at + key.size(), out.find('\n', at) - at - key.size());
}

RunResult runUnboundPair(const std::string& extraEnv) {
  std::string port = std::to_string(strata::testing::freePort());
  std::string common = "env -u STRATA_UNIQUE_ID " + extraEnv + " WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port + " ";
  std::string cmd = common + "RANK=1 " WORKER_BIN " --quick --cpus & p=$!; " + common + "RANK=0 " WORKER_BIN
                    " --quick --cpus; b=$?; wait $p; a=$?; exit $((a | b))";
  return run("timeout 120 bash -c '" + cmd + "' 2>&1");
}

int allowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
}

TEST(ProcessEnv, UnboundRanksBindTheirThreadToACpuEach) {
  if (allowedCpus() < 2) GTEST_SKIP() << "needs 2 CPUs, this process may use " << allowedCpus();
  RunResult r = runUnboundPair("STRATA_LOG_LEVEL=info");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(countPassedRanks(r.out), 2) << r.out;
  const std::string c0 = cpusOf(r.out, 0), c1 = cpusOf(r.out, 1);
  EXPECT_FALSE(c0.empty() || c0.find(',') != std::string::npos) << "rank 0 not bound to one CPU: " << r.out;
  EXPECT_FALSE(c1.empty() || c1.find(',') != std::string::npos) << "rank 1 not bound to one CPU: " << r.out;
  EXPECT_NE(c0, c1) << r.out;
  EXPECT_NE(r.out.find("STRATA_AUTO_BIND=0 leaves it unbound"), std::string::npos) << "no log line: " << r.out;
}

TEST(ProcessEnv, AutoBindOffLeavesUnboundRanksAlone) {
  if (allowedCpus() < 2) GTEST_SKIP() << "needs 2 CPUs, this process may use " << allowedCpus();
  RunResult r = runUnboundPair("STRATA_AUTO_BIND=0");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(countPassedRanks(r.out), 2) << r.out;
  EXPECT_NE(cpusOf(r.out, 0).find(','), std::string::npos) << r.out;
  EXPECT_NE(cpusOf(r.out, 1).find(','), std::string::npos) << r.out;
}

TEST(ProcessEnv, SrunStyleVariablesWork) {
  // Two ranks started by hand with the variables srun sets; rank 0 serves the rendezvous on the
  // first host of the step's node list, on a port derived from the job and step ids.
  std::string job = std::to_string(100000 + getpid());
  std::string common = "env -u STRATA_UNIQUE_ID -u MASTER_ADDR -u MASTER_PORT SLURM_NTASKS=2 SLURM_JOB_ID=" + job +
                       " SLURM_STEP_ID=0 SLURM_STEP_NODELIST=localhost ";
  std::string cmd = common + "SLURM_PROCID=1 " WORKER_BIN " --quick & p=$!; " + common + "SLURM_PROCID=0 " WORKER_BIN
                    " --quick; b=$?; wait $p; a=$?; exit $((a | b))";
  RunResult r = run("timeout 120 bash -c '" + cmd + "'");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(countPassedRanks(r.out), 2) << r.out;
}

TEST(ProcessEnv, MpirunVariablesWork) {
#ifdef MPIRUN_BIN
  RunResult r = run("timeout 120 " MPIRUN_BIN " --allow-run-as-root --oversubscribe -n 3 " WORKER_BIN " --quick");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(countPassedRanks(r.out), 3) << r.out;
#else
  GTEST_SKIP() << "mpirun is not installed (Debian: openmpi-bin)";
#endif
}

}  // namespace

// strataMemAlloc buffers between processes: chunks from STRATA_SHARED_MIN_BYTES go single-copy
// (the receiver reads the sender's memfd region through its own mapping). Every collective, in
// place and out of place, with each algorithm forced, exact results; also single copy at every
// size (min 1 byte, small slots: many chunks per message), beside CMA, and single copy off (0).
struct MemAllocCase {
  int n;
  const char* env;
};

class MemAllocRanks : public ::testing::TestWithParam<MemAllocCase> {};

TEST_P(MemAllocRanks, EveryCollectiveIsExact) {
  const MemAllocCase c = GetParam();
  std::string cmd = std::string("env ") + c.env + " " STRATA_RUN_BIN " --timeout 240 -n " + std::to_string(c.n) +
                    " -- " WORKER_BIN " --memalloc";
  RunResult r = run(cmd);
  EXPECT_EQ(r.code, 0) << cmd << "\n" << r.out;
  EXPECT_EQ(countPassedRanks(r.out), c.n) << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    SingleCopy, MemAllocRanks,
    ::testing::Values(MemAllocCase{2, "STRATA_ALGO=auto"}, MemAllocCase{3, "STRATA_ALGO=auto"},
                      MemAllocCase{2, "STRATA_ALGO=ring"}, MemAllocCase{3, "STRATA_ALGO=ring"},
                      MemAllocCase{2, "STRATA_ALGO=rhd"}, MemAllocCase{3, "STRATA_ALGO=rhd"},
                      MemAllocCase{3, "STRATA_ALGO=tree"}, MemAllocCase{3, "STRATA_ALGO=direct"},
                      MemAllocCase{2, "STRATA_ALGO=oneshot"}, MemAllocCase{3, "STRATA_ALGO=pairwise"},
                      MemAllocCase{3, "STRATA_ALGO=bruck"}, MemAllocCase{3, "STRATA_ALGO=linear"},
                      MemAllocCase{3, "STRATA_SHARED_MIN_BYTES=1 STRATA_LOCAL_SLOT_BYTES=4096"},
                      MemAllocCase{2, "STRATA_SHARED_MIN_BYTES=1 STRATA_LOCAL_CMA=1 STRATA_CMA_MIN_BYTES=0"},
                      MemAllocCase{2, "STRATA_SHARED_MIN_BYTES=0 STRATA_ALGO=ring"}),
    [](const auto& info) {
      std::string env = info.param.env;
      std::string tag;
      for (char ch : env) tag += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return tag + "_n" + std::to_string(info.param.n);
    });
