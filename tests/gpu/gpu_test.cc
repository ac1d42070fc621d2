// gpu_test.cc: collectives on CUDA device buffers: thread-rank sweeps, process ranks, the NCCL ABI (label gpu).
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "gpu/device_ranks.h"
#include "support/subprocess.h"

namespace strata::testing {
namespace {

int countPassedRanks(const std::string& out) {
  int n = 0;
  for (size_t pos = 0; (pos = out.find("checks passed, 0 failed", pos)) != std::string::npos; ++pos) n++;
  return n;
}

TEST(GpuDevice, StrataSeesTheDevicesTheRuntimeSees) {
  STRATA_REQUIRE_CUDA_DEVICE();
  int runtime = 0, strata = -1;
  ASSERT_EQ(cudaGetDeviceCount(&runtime), cudaSuccess);
  ASSERT_EQ(strataCudaDeviceCount(&strata), strataSuccess) << strataGetLastError(nullptr);
  EXPECT_EQ(strata, runtime) << "strataCudaDeviceCount disagrees with cudaGetDeviceCount";
}

// Every collective, dtype and op (sampled: see runDeviceSweep) with n thread ranks sharing the GPU.
class GpuThreadSweep : public ::testing::TestWithParam<std::tuple<int, SweepPart>> {};

TEST_P(GpuThreadSweep, ExactResults) {
  STRATA_REQUIRE_CUDA_DEVICE();
  const auto [n, part] = GetParam();
  runDeviceThreadRanks(n, [part = part](DeviceRank& d, CheckReport& rep) { runDeviceSweep(d, part, false, &rep); });
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuThreadSweep,
                         ::testing::Combine(::testing::Values(2, 4, 8), ::testing::ValuesIn(kAllSweepParts)),
                         [](const auto& info) {
                           return std::string(sweepPartName(std::get<1>(info.param))) + "_n" +
                                  std::to_string(std::get<0>(info.param));
                         });

// Ranks as processes under strata-run, all on one GPU: the quick sweep plus the plain (legacy-stream) forms.
class GpuProcesses : public ::testing::TestWithParam<int> {};

TEST_P(GpuProcesses, EveryRankPassesTheDeviceSweep) {
  STRATA_REQUIRE_CUDA_DEVICE();
  const int n = GetParam();
  const std::string cmd = "timeout 330 " STRATA_RUN_BIN " --timeout 300 -n " + std::to_string(n) + " -- " GPU_WORKER_BIN
                          " --quick --watchdog 280";
  RunResult r = runCommand(cmd);
  EXPECT_EQ(r.code, 0) << cmd << "\n" << r.out;
  EXPECT_EQ(countPassedRanks(r.out), n) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuProcesses, ::testing::Values(2, 4, 8),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

// The NCCL ABI on device buffers: ncclAllReduce / ncclAllGather with a cudaStream_t, two processes.
TEST(GpuNcclAbi, TwoProcessesOnDeviceBuffersAndAStream) {
  STRATA_REQUIRE_CUDA_DEVICE();
#ifndef NCCL_GPU_PROG
  GTEST_SKIP() << "strata's libnccl.so.2 (target nccl) is not built";
#else
  // The program must load strata's libnccl.so.2, not NVIDIA's (which may sit beside the CUDA libraries).
  RunResult ldd = runCommand("env LD_TRACE_LOADED_OBJECTS=1 " NCCL_GPU_PROG);
  EXPECT_NE(ldd.out.find(NCCL_LIB_DIR "/libnccl.so.2"), std::string::npos) << "not strata's libnccl.so.2:\n" << ldd.out;
  const std::string cmd = "timeout 150 " STRATA_RUN_BIN " --timeout 120 -n 2 -- " NCCL_GPU_PROG;
  RunResult r = runCommand(cmd);
  EXPECT_EQ(r.code, 0) << cmd << "\n" << r.out;
  EXPECT_EQ(countPassedRanks(r.out), 2) << r.out;
#endif
}

}  // namespace
}  // namespace strata::testing
