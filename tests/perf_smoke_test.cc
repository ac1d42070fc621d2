// perf_smoke_test.cc: the perf tools end to end. Each strata tool runs under strata-run with 2 ranks
// on small sizes; all-reduce also with every dtype x op, rank threads (-t), JSON output; the Open MPI
// and Gloo peers where built. Each run must exit 0, end with "Out of bounds values : 0 OK" and
// print the expected number of table rows.
#include <gtest/gtest.h>

#include "support/subprocess.h"
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace {

const std::string kBin = PERF_BIN_DIR;
const std::string kLaunch = std::string("timeout 120 ") + STRATA_RUN_BIN + " --timeout 100 ";
const std::string kSmall = " -b 8 -e 64K -f 4 -n 2 -w 1";  // 8 B .. 32 KiB: 7 sizes
constexpr int kSmallRows = 7;

using strata::testing::RunResult;
RunResult run(const std::string& cmd) { return strata::testing::runCommand(cmd); }

// Table rows: lines (without strata-run's "[R] " prefix) that start with a size.
int tableRows(const std::string& out) {
  std::istringstream in(out);
  int rows = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("[", 0) == 0 && line.find("] ") != std::string::npos) line = line.substr(line.find("] ") + 2);
    size_t i = line.find_first_not_of(' ');
    if (i != std::string::npos && std::isdigit(static_cast<unsigned char>(line[i]))) rows++;
  }
  return rows;
}

bool built(const std::string& tool) { return access((kBin + "/" + tool).c_str(), X_OK) == 0; }

void expectClean(const std::string& cmd, int rows) {
  RunResult r = run(cmd);
  EXPECT_EQ(r.code, 0) << cmd << "\n" << r.out;
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << cmd << "\n" << r.out;
  EXPECT_EQ(tableRows(r.out), rows) << cmd << "\n" << r.out;
}

class StrataTool : public ::testing::TestWithParam<const char*> {};

TEST_P(StrataTool, TwoRanksSmallSizes) {
  expectClean(kLaunch + "-n 2 -- " + kBin + "/" + GetParam() + "_perf" + kSmall, kSmallRows);
}

INSTANTIATE_TEST_SUITE_P(Perf, StrataTool,
                         ::testing::Values("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce",
                                           "alltoall", "gather", "scatter", "sendrecv"));

// --alloc: host buffers from strataMemAlloc (the default; single copy between the processes from
// 16 KiB) or malloc, at sizes across that threshold; results checked by the tool.
TEST(PerfSmoke, AllocStrataAndMalloc) {
  for (const char* alloc : {"strata", "malloc"})
    for (const char* tool : {"all_reduce", "all_gather", "alltoall"})
      expectClean(kLaunch + "-n 2 -- " + kBin + "/" + tool + "_perf --alloc " + alloc + " -b 8K -e 2M -f 4 -n 2 -w 1", 5);
  RunResult r = run(kLaunch + "-n 2 -- " + kBin + "/all_reduce_perf --alloc nccl -b 8 -e 8");
  EXPECT_NE(r.code, 0) << r.out;
}

TEST(PerfSmoke, AllReduceEveryTypeAndOp) {  // 12 dtypes x 6 ops x 3 sizes
  expectClean(kLaunch + "-n 2 -- " + kBin + "/all_reduce_perf -b 8 -e 128 -f 4 -n 2 -w 1 -d all -o all", 216);
}

TEST(PerfSmoke, ProcessesTimesThreads) {
  const std::string cmd = kLaunch + "-n 2 -- " + kBin + "/all_reduce_perf -t 2" + kSmall;
  expectClean(cmd, kSmallRows);
  EXPECT_NE(run(cmd).out.find("World: 4 ranks (2 processes x 2 threads)"), std::string::npos);
}

TEST(PerfSmoke, ThreadsWithoutLauncherEveryRoot) {  // 3 roots x 7 sizes
  expectClean("timeout 120 " + kBin + "/broadcast_perf -t 3 -r all" + kSmall, 3 * kSmallRows);
}

TEST(PerfSmoke, JsonOutput) {
  const std::string path = ::testing::TempDir() + "perf_smoke.json";
  expectClean(kLaunch + "-n 2 -- " + kBin + "/reduce_scatter_perf -J " + path + kSmall, kSmallRows);
  std::ifstream f(path);
  const nlohmann::json doc = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(doc["results"].size(), static_cast<size_t>(kSmallRows));
  EXPECT_EQ(doc["out_of_bounds"]["count"], 0);
  EXPECT_EQ(doc["config"]["nranks"], 2);
  std::remove(path.c_str());
}

TEST(PerfSmoke, BadFlagsAreUsageErrors) {
  for (const char* flags : {"--bogus", "-d float32", "-b 1Q", "-g 2", "-b 2M -e 1M"}) {
    RunResult r = run(kBin + "/all_reduce_perf " + flags);
    EXPECT_EQ(r.code, 2) << flags << "\n" << r.out;
  }
}

TEST(PerfSmoke, MpiPeer) {
  const std::string mpirun = MPIRUN_BIN;
  if (!built("mpi_all_reduce_perf") || mpirun.empty() || mpirun.find("NOTFOUND") != std::string::npos)
    GTEST_SKIP() << "the MPI peer tools are not built (Debian: libopenmpi-dev, openmpi-bin)";
  expectClean("timeout 120 " + mpirun + " --allow-run-as-root --oversubscribe -n 2 " + kBin + "/mpi_all_reduce_perf" +
                  kSmall,
              kSmallRows);
}

TEST(PerfSmoke, GlooPeer) {
  if (!built("gloo_all_reduce_perf")) GTEST_SKIP() << "the Gloo peer tools are not built (Debian: libgloo-dev)";
  expectClean(kLaunch + "-n 2 -- " + kBin + "/gloo_all_reduce_perf --algo halving_doubling" + kSmall, kSmallRows);
}

// --memory device (strata) and the NCCL peer (nccl_*_perf, device memory only). Without a GPU or
// driver (the tools link the static CUDA runtime, so they start) every run must fail cleanly: a
// clear message, a non-zero exit, no hang. With a GPU: clean runs, and the device-to-device copy
// reference in the footer. Ranks share the GPU when there are fewer GPUs than ranks.
TEST(PerfSmoke, DeviceMemory) {
  const std::string cmd = kLaunch + "-n 2 -- " + kBin + "/all_reduce_perf --memory device" + kSmall;
  RunResult r = run(cmd);
  if (r.out.find("no CUDA device (") != std::string::npos) {
    EXPECT_EQ(r.code, 2) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find("all_reduce_perf: --memory device: no CUDA device ("), std::string::npos) << r.out;
    EXPECT_EQ(tableRows(r.out), 0) << r.out;
    return;
  }
  if (r.out.find("needs the CUDA build") != std::string::npos) {  // a build without CUDA
    EXPECT_EQ(r.code, 2) << cmd << "\n" << r.out;
    GTEST_SKIP() << "built without CUDA: --memory device is refused";
  }
  expectClean(cmd, kSmallRows);
  EXPECT_NE(r.out.find("# device-to-device copy bandwidth: "), std::string::npos) << r.out;
}

TEST(PerfSmoke, NcclPeerDeviceMemory) {
  if (!built("nccl_all_reduce_perf")) GTEST_SKIP() << "the NCCL peer tools need the CUDA build";
  const std::string tool = kBin + "/nccl_all_reduce_perf";
  // A library that cannot be loaded: every rank says so and the job fails, whatever the machine.
  RunResult r = run(kLaunch + "-n 2 -- " + tool + " --nccl-lib /nonexistent/libnccl.so.2" + kSmall);
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("cannot load NCCL from /nonexistent/libnccl.so.2"), std::string::npos) << r.out;
  // Host memory: an NCCL that takes host buffers (strata's own, an NCCL program on malloc'd memory)
  // is measured like any other, every element checked.
  expectClean(kLaunch + "-n 2 -- " + tool + " --memory host --nccl-lib " + STRATA_BUILD_DIR +
                  "/collectives/libnccl.so.2" + kSmall,
              kSmallRows);
  // The default library (libnccl.so.2 from the loader's path), one rank.
  r = run("timeout 120 " + tool + kSmall);
  if (r.out.find("no CUDA device (") != std::string::npos || r.out.find("cannot load NCCL") != std::string::npos) {
    EXPECT_NE(r.code, 0) << r.out;
    EXPECT_EQ(tableRows(r.out), 0) << r.out;
    r = run(kLaunch + "-n 2 -- " + tool + kSmall);  // the same under the launcher: no hang, non-zero
    EXPECT_NE(r.code, 0) << r.out;
    EXPECT_TRUE(r.out.find("no CUDA device (") != std::string::npos ||
                r.out.find("cannot load NCCL") != std::string::npos)
        << r.out;
    return;
  }
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NCCL 2."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# device-to-device copy bandwidth: "), std::string::npos) << r.out;
}

}  // namespace
