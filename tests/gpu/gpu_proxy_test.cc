// gpu_proxy_test.cc: device buffers through the network proxy (label gpu), on one GPU: ranks that
// the host path would connect over the network (every pair under STRATA_TRANSPORT=tcp; ranks on two
// virtual nodes of a topology file) move device data kernel -> pinned shadow -> proxy -> tcp ->
// proxy -> pinned slot -> kernel. The quick device sweep must be exact. Skipped without a GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <tuple>

#include "gpu/device_ranks.h"
#include "support/subprocess.h"
#include "support/thread_ranks.h"

namespace strata::testing {
namespace {

class GpuProxyThreads : public ::testing::TestWithParam<std::tuple<int, SweepPart>> {};

TEST_P(GpuProxyThreads, ExactResultsOverTcp) {
  STRATA_REQUIRE_CUDA_DEVICE();
  ScopedEnv tcp("STRATA_TRANSPORT", "tcp");
  const auto [n, part] = GetParam();
  runDeviceThreadRanks(n, [part = part](DeviceRank& d, CheckReport& rep) { runDeviceSweep(d, part, true, &rep); });
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuProxyThreads,
                         ::testing::Combine(::testing::Values(2, 4), ::testing::ValuesIn(kAllSweepParts)),
                         [](const auto& info) {
                           return std::string(sweepPartName(std::get<1>(info.param))) + "_n" +
                                  std::to_string(std::get<0>(info.param));
                         });

TEST(GpuProxyProcesses, FourRanksOnTwoVirtualNodes) {
  STRATA_REQUIRE_CUDA_DEVICE();
#if !defined(STRATA_RUN_BIN) || !defined(GPU_WORKER_BIN)
  GTEST_SKIP() << "strata-run or the GPU worker is not built";
#else
  char path[] = "/tmp/strata-gpu-proxy-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string topo =
      "{\"version\": 1, \"rails\": 1, \"nodes\": [{\"hostname\": \"gnode0\"}, {\"hostname\": \"gnode1\"}], "
      "\"placement\": [0, 0, 1, 1]}\n";
  ASSERT_EQ(write(fd, topo.data(), topo.size()), static_cast<ssize_t>(topo.size()));
  close(fd);
  const std::string cmd = std::string("STRATA_LOG_LEVEL=info STRATA_TOPO_FILE=") + path +
                          " timeout 330 " STRATA_RUN_BIN " --timeout 300 -n 4 -- " GPU_WORKER_BIN
                          " --quick --watchdog 280";
  RunResult r = runCommand(cmd);
  unlink(path);
  EXPECT_EQ(r.code, 0) << cmd << "\n" << r.out;
  int passed = 0;
  for (size_t pos = 0; (pos = r.out.find("checks passed, 0 failed", pos)) != std::string::npos; ++pos) passed++;
  EXPECT_EQ(passed, 4) << r.out;
  EXPECT_NE(r.out.find("through the network proxy"), std::string::npos) << "no rank reported proxied peers:\n" << r.out;
#endif
}

}  // namespace
}  // namespace strata::testing
