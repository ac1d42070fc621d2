// gpu_worker.cc: one GPU process rank (strata-run -n N -- strata_gpu_worker [--quick] [--watchdog S]): device sweep, exit 0 iff all exact.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gpu/device_checks.h"
#include "gpu/watchdog.h"

using namespace strata::testing;
using strata::CollType;

int main(int argc, char** argv) {
  bool quick = false;
  double watchdogSec = 280;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    if (!std::strcmp(argv[i], "--watchdog") && i + 1 < argc) watchdogSec = std::atof(argv[++i]);
  }
  const std::string noGpu = noCudaDeviceReason();
  if (!noGpu.empty()) {
    std::fprintf(stderr, "no CUDA device: %s\n", noGpu.c_str());
    return 2;
  }
  strataComm_t comm = nullptr;
  if (strataCommInitFromEnv(&comm, nullptr) != strataSuccess) {
    std::fprintf(stderr, "init failed: %s\n", strataGetLastError(nullptr));
    return 2;
  }
  DeviceRank d;
  std::string why;
  int n = 0;
  strataCommCount(comm, &n);
  if (!openDeviceRank(&d, comm, sweepArenaBytes(n), &why)) {
    std::fprintf(stderr, "%s\n", why.c_str());
    strataCommDestroy(comm);
    return 2;
  }
  d.barrier = [&] { strataBarrier(comm); };
  CheckReport rep;
  {
    Watchdog watchdog(watchdogSec, [&] { return fmt::format("  rank {} of {}: {}", d.rank, d.n, d.currentLabel()); });
    for (SweepPart part : kAllSweepParts) runDeviceSweep(d, part, quick, &rep);
    // One rank per process: the legacy default stream is this rank's alone, so the plain forms can use it.
    checkDevice(d, CollType::AllReduce, strataFloat32, strataSum, kMidCount, 0, false, &rep, true);
    checkDevice(d, CollType::Broadcast, strataInt32, strataSum, 1000, n - 1, false, &rep, true);
    checkDevice(d, CollType::AllGather, strataBfloat16, strataSum, 1000, 0, true, &rep, true);
    d.setLabel("finishing");
    strataBarrier(comm);  // no rank frees memory while a peer may still read it
    closeDeviceRank(&d);
    strataCommDestroy(comm);
  }
  for (const auto& f : rep.failures) std::fprintf(stderr, "FAIL %s\n", f.c_str());
  const bool ok = rep.ok() && d.checks > 0 && rep.passed == d.checks;
  std::printf("rank %d: %d checks passed, %d failed\n", d.rank, rep.passed, d.checks - rep.passed);
  return ok ? 0 : 1;
}
