// device_proxy_bench: the device proxy's bandwidth against the tcp transport's host-buffer figure.
// Two ranks, threads of this process, talk tcp (STRATA_TRANSPORT=tcp). For each size it times
//   host:  strataSend/strataRecv (rank 0 -> rank 1) and strataAllReduce on host buffers, and
//   proxy: the same operations on the emulated device side (tests/support/device_proxy_emulation.h):
//          the device kernels' code on host threads writes the proxy's shadow slots, the proxies
//          move them over their own tcp connections, the receiver's kernel copies them out.
// The emulation has the copies a GPU would do over the bus (into the send shadow, out of the
// receive slot) as host memcpys; the network part is the proxy's real code.
// Each figure is the median of --reps measurements, host and proxy alternating (a shared machine's
// load drifts).
//   device_proxy_bench [--sizes 1M,4M,16M,64M] [--seconds 0.3] [--reps 5] [--slot-bytes 128K] [--channels 2]
#include <stdlib.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "strata/strata.h"
#include "support/device_proxy_emulation.h"
#include "transport/config.h"

namespace {

using strata::testing::EmulatedDeviceRank;
using Clock = std::chrono::steady_clock;

size_t parseSize(const std::string& s) {
  size_t mult = 1;
  std::string num = s;
  const char last = s.empty() ? 0 : static_cast<char>(toupper(s.back()));
  if (last == 'K' || last == 'M' || last == 'G') {
    mult = last == 'K' ? 1024 : last == 'M' ? (1 << 20) : (size_t(1) << 30);
    num = s.substr(0, s.size() - 1);
  }
  return static_cast<size_t>(std::stoull(num)) * mult;
}

/// Runs op(rank) `iters` times on both ranks, concurrently; returns the slower rank's seconds.
double timeBoth(int iters, const std::function<void(int)>& op) {
  std::barrier<> sync(2);
  double secs[2] = {0, 0};
  std::vector<std::thread> t;
  for (int r = 0; r < 2; ++r)
    t.emplace_back([&, r] {
      op(r);  // warm-up
      sync.arrive_and_wait();
      const auto t0 = Clock::now();
      for (int i = 0; i < iters; ++i) op(r);
      secs[r] = std::chrono::duration<double>(Clock::now() - t0).count();
      sync.arrive_and_wait();
    });
  for (auto& x : t) x.join();
  return std::max(secs[0], secs[1]);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"device proxy bandwidth (host emulation) against tcp host-buffer bandwidth"};
  std::string sizesArg = "1M,4M,16M,64M";
  std::string slotArg = "128K";
  double seconds = 0.3;
  int reps = 5;
  int channels = 2;
  app.add_option("--sizes", sizesArg, "message sizes (bytes; K/M/G suffixes), comma-separated");
  app.add_option("--seconds", seconds, "target time per measurement");
  app.add_option("--slot-bytes", slotArg, "emulated FIFO slot size (STRATA_CUDA_SLOT_BYTES' default: 128K)");
  app.add_option("--reps", reps, "measurements per figure (the median is shown)");
  app.add_option("--channels", channels, "emulated channels, each a host thread per rank (STRATA_CUDA_CHANNELS)");
  CLI11_PARSE(app, argc, argv);
  setenv("STRATA_TRANSPORT", "tcp", 1);
  if (!strata::reloadConfig().ok()) return 1;
  std::vector<size_t> sizes;
  for (size_t pos = 0; pos <= sizesArg.size();) {
    const size_t comma = std::min(sizesArg.find(',', pos), sizesArg.size());
    if (comma > pos) sizes.push_back(parseSize(sizesArg.substr(pos, comma - pos)));
    pos = comma + 1;
  }
  const uint64_t slotBytes = parseSize(slotArg);

  strataComm_t comms[2];
  if (strataCommInitAll(comms, 2) != strataSuccess) {
    std::fprintf(stderr, "strataCommInitAll: %s\n", strataGetLastError(nullptr));
    return 1;
  }
  EmulatedDeviceRank dev[2];
  {
    strata::Status st[2];
    std::vector<std::thread> t;
    for (int r = 0; r < 2; ++r)
      t.emplace_back([&, r] {
        st[r] = strata::testing::setupEmulatedDevice(*static_cast<strata::Comm*>(comms[r]), channels, slotBytes, 32768,
                                                     &dev[r]);
      });
    for (auto& x : t) x.join();
    for (int r = 0; r < 2; ++r)
      if (!st[r].ok()) {
        std::fprintf(stderr, "rank %d: %s\n", r, st[r].message().c_str());
        return 1;
      }
  }
  std::printf("# device_proxy_bench: 2 thread ranks, tcp between them (STRATA_TRANSPORT=tcp, %d sockets per pair)\n",
              strata::config().tcpSockets);
  std::printf("# proxy: emulated device side, %d channels of 8 x %llu-byte slots; GB/s = 1e9 bytes/s\n", channels,
              static_cast<unsigned long long>(slotBytes));
  std::printf("# sendrecv: one direction, bytes / time; allreduce: bus bandwidth 2(n-1)/n x bytes / time\n");
  std::printf("%12s %8s | %14s %14s %7s | %14s %14s %7s\n", "bytes", "iters", "host sendrecv", "proxy sendrecv",
              "ratio", "host allreduce", "proxy allred.", "ratio");
  for (size_t bytes : sizes) {
    const size_t count = bytes / 4;
    std::vector<std::vector<float>> a(2, std::vector<float>(count, 1.0f)), b(2, std::vector<float>(count, 0.0f));
    // Iterations for about `seconds` at 1 GB/s, at least 3.
    const int iters = std::max(3, static_cast<int>(seconds * 1e9 / static_cast<double>(bytes)));
    std::vector<std::vector<strata::DevLaunch>> p2p(2), ar(2);
    for (int r = 0; r < 2; ++r) {
      std::vector<strata::DevP2P> ops = {r == 0 ? strata::DevP2P{true, a[0].data(), count * 4, 1}
                                                : strata::DevP2P{false, b[1].data(), count * 4, 0}};
      if (!strata::planDeviceP2P(dev[r].params(), ops, &p2p[r]).ok()) return 1;
      strata::DevCall call;
      call.send = a[r].data();
      call.recv = b[r].data();
      call.count = count;
      if (!strata::planDeviceCollective(dev[r].params(), call, &ar[r]).ok()) return 1;
    }
    bool ok = true;
    std::vector<double> t[4];  // host p2p, proxy p2p, host all-reduce, proxy all-reduce
    for (int k = 0; k < reps; ++k) {
      t[0].push_back(timeBoth(iters, [&](int r) {
        if (r == 0) strataSend(a[0].data(), count, strataFloat32, 1, comms[0]);
        else strataRecv(b[1].data(), count, strataFloat32, 0, comms[1]);
      }));
      t[1].push_back(timeBoth(iters, [&](int r) { ok = strata::testing::runEmulatedLaunches(dev[r], p2p[r]) && ok; }));
      t[2].push_back(timeBoth(iters, [&](int r) {
        strataAllReduce(a[r].data(), b[r].data(), count, strataFloat32, strataSum, comms[r]);
      }));
      t[3].push_back(timeBoth(iters, [&](int r) { ok = strata::testing::runEmulatedLaunches(dev[r], ar[r]) && ok; }));
    }
    if (!ok || b[0][count / 2] != 2.0f) {
      std::fprintf(stderr, "emulated device operations failed or gave wrong results\n");
      return 1;
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    const double hostP2P = median(t[0]), proxyP2P = median(t[1]), hostAR = median(t[2]), proxyAR = median(t[3]);
    const double gb = static_cast<double>(bytes) * iters / 1e9;
    const double hp = gb / hostP2P, pp = gb / proxyP2P, ha = gb / hostAR, pa = gb / proxyAR;  // 2(n-1)/n = 1
    std::printf("%12zu %8d | %14.3f %14.3f %7.2f | %14.3f %14.3f %7.2f\n", bytes, iters, hp, pp, pp / hp, ha, pa,
                pa / ha);
    std::fflush(stdout);
  }
  for (auto& d : dev) d.proxy.reset();
  strataCommDestroy(comms[0]);
  strataCommDestroy(comms[1]);
  return 0;
}
