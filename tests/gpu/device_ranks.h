// device_ranks.h: GPU test scaffolding: the visible skip without a device, and n thread ranks with a stream each.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gpu/device_checks.h"
#include "gpu/watchdog.h"

/// Skips the calling test, with the reason, when no CUDA device can be used (CTest counts it as skipped).
#define STRATA_REQUIRE_CUDA_DEVICE()                                                 \
  do {                                                                               \
    const std::string strataNoGpu_ = ::strata::testing::noCudaDeviceReason();        \
    if (!strataNoGpu_.empty()) GTEST_SKIP() << "no CUDA device: " << strataNoGpu_;   \
  } while (0)

namespace strata::testing {

/// Records one hand-written check of a device test.
inline void expectCheck(DeviceRank& d, CheckReport& rep, bool ok, const std::string& what) {
  d.checks++;
  if (ok) rep.passed++;
  else rep.fail(fmt::format("{} (rank {} of {})", what, d.rank, d.n));
}

/// Creates n thread ranks (strataCommInitAll; device rank % count, a non-blocking stream and an arena each), runs
/// fn on each in its own thread, then requires every rank to have run checks and passed all of them. A watchdog
/// ends the process, naming what each rank was doing, if the ranks do not finish within `watchdogSec`.
inline void runDeviceThreadRanks(int n, const std::function<void(DeviceRank&, CheckReport&)>& fn,
                                 double watchdogSec = 420) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  std::vector<strataComm_t> comms(static_cast<size_t>(n));
  ASSERT_EQ(strataCommInitAll(comms.data(), n), strataSuccess) << strataGetLastError(nullptr);
  std::vector<std::unique_ptr<DeviceRank>> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(std::make_unique<DeviceRank>()), ranks.back()->rank = r;
  std::vector<CheckReport> reps(static_cast<size_t>(n));
  std::vector<std::string> setupError(static_cast<size_t>(n));
  std::barrier<> sync(n);
  std::atomic<int> notOk{0};
  std::atomic<bool> setupFailed{false};
  {
    Watchdog watchdog(watchdogSec, [&] {
      std::string s;
      for (auto& d : ranks) s += fmt::format("  rank {} of {}: {}\n", d->rank, n, d->currentLabel());
      return s;
    });
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        DeviceRank& d = *ranks[static_cast<size_t>(r)];
        d.barrier = [&] { sync.arrive_and_wait(); };
        d.allTrue = [&](bool ok) {
          if (!ok) notOk++;
          sync.arrive_and_wait();
          const bool all = notOk.load() == 0;
          sync.arrive_and_wait();
          if (d.rank == 0) notOk = 0;
          sync.arrive_and_wait();
          return all;
        };
        if (!openDeviceRank(&d, comms[static_cast<size_t>(r)], sweepArenaBytes(n), &setupError[static_cast<size_t>(r)]))
          setupFailed = true;
        sync.arrive_and_wait();
        if (!setupFailed) fn(d, reps[static_cast<size_t>(r)]);
        d.setLabel("finishing (stream synchronize)");
        if (d.stream) cudaStreamSynchronize(d.stream);
        sync.arrive_and_wait();  // no rank frees memory while a peer's kernels may still read it
        closeDeviceRank(&d);
      });
    for (auto& t : threads) t.join();
  }
  for (strataComm_t c : comms) strataCommDestroy(c);
  for (int r = 0; r < n; ++r) {
    const DeviceRank& d = *ranks[static_cast<size_t>(r)];
    const CheckReport& rep = reps[static_cast<size_t>(r)];
    EXPECT_EQ(setupError[static_cast<size_t>(r)], "");
    if (setupFailed) continue;
    std::string failures;
    for (const auto& f : rep.failures) failures += "  " + f + "\n";
    EXPECT_TRUE(rep.ok()) << "rank " << r << " of " << n << ": " << rep.failures.size() << " failures:\n" << failures;
    EXPECT_GT(d.checks, 0) << "rank " << r << " ran no checks";
    EXPECT_EQ(rep.passed, d.checks) << "rank " << r << " of " << n;
  }
}

}  // namespace strata::testing
