// device_proxy_emulation.h: ranks' device sides emulated on the host over real communicators,
// with the network proxy. Each rank gets a host-memory FIFO arena wired as setupDevice
// (collectives/device_exec.cc) wires device arenas: mapped (plain pointers) between ranks of one
// node, and through a DeviceProxy over the network transports (tcp between virtual nodes, or
// everywhere under STRATA_TRANSPORT=tcp) for the others. Planned launches run one host thread per
// block (kernels/device/host_exec.h, sleeping sooner), as in device_emulation_test. Used by
// device_proxy_test and perf/bench/device_proxy_bench.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "collectives/comm.h"
#include "collectives/device_plan.h"
#include "collectives/device_proxy.h"
#include "kernels/device/dev_algos.h"
#include "kernels/device/host_exec.h"

namespace strata::testing {

/// HostExec whose waits sleep sooner: the emulated kernels share the cores with the proxy threads
/// (and, here, with everything else on two cores); yielding for thousands of polls would take
/// the CPU the proxies need to make the progress the kernels wait for.
struct ProxyEmulationExec : dev::HostExec {
  void pause(uint32_t spins) const {
    if (spins < 64) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
};

struct EmulatedDeviceRank {
  Comm* comm = nullptr;
  dev::ArenaLayout layout;
  char* arena = nullptr;
  std::vector<dev::PeerConn> conns;
  std::unique_ptr<DeviceProxy> proxy;
  bool anyProxied = false;  ///< on some rank (the same answer everywhere): Simple only
  volatile uint32_t abort = 0;  ///< the kernels' abort flag; the proxy raises it on a failure
  uint32_t error = 0;
  std::atomic<bool> busy{false};  ///< launches are running (the proxy's "device work pending")
  std::mutex mu;
  Status proxyError;  ///< what the proxy reported through onError
  std::chrono::steady_clock::time_point failedAt;  ///< and when

  ~EmulatedDeviceRank() {
    proxy.reset();
    std::free(arena);
  }
  Status proxyFailure() {
    std::lock_guard<std::mutex> lock(mu);
    return proxyError;
  }
  /// Seconds from `since` to the proxy's failure report (a large number when there was none).
  double failedAfter(std::chrono::steady_clock::time_point since) {
    std::lock_guard<std::mutex> lock(mu);
    return proxyError.ok() ? 1e9 : std::chrono::duration<double>(failedAt - since).count();
  }
  DevPlanParams params() const {
    DevPlanParams p;
    p.rank = comm->rank();
    p.nranks = comm->nranks();
    p.channels = layout.nch;
    p.slotBytes = layout.slotBytes;
    p.llSlotBytes = layout.llSlotBytes;
    p.simpleOnly = anyProxied;
    return p;
  }
};

/// Collective over `c`: the emulated device side of this rank (arena, connection table, proxy).
inline Status setupEmulatedDevice(Comm& c, int nch, uint64_t slotBytes, uint64_t llSlotBytes, EmulatedDeviceRank* d) {
  const int n = c.nranks(), r = c.rank();
  d->comm = &c;
  d->layout.nranks = n;
  d->layout.nch = nch;
  d->layout.slotBytes = slotBytes;
  d->layout.llSlotBytes = llSlotBytes;
  const size_t bytes = (d->layout.totalBytes() + 127) / 128 * 128 + 128;
  d->arena = static_cast<char*>(std::aligned_alloc(128, bytes));
  std::memset(d->arena, 0, bytes);
  const std::vector<uint8_t> proxied = proxiedPeers(c.transports(), n);
  struct Info {
    uint64_t base;
    uint32_t proxied;
    uint32_t pad;
  };
  Info mine{reinterpret_cast<uint64_t>(d->arena), 0, 0};
  for (uint8_t x : proxied) mine.proxied += x;
  std::vector<Info> all(static_cast<size_t>(n));
  STRATA_RETURN_IF_ERROR(c.bootstrap().allGather(&mine, all.data(), sizeof(Info)));
  std::vector<char*> bases(static_cast<size_t>(n), nullptr);
  for (size_t p = 0; p < static_cast<size_t>(n); ++p) {
    d->anyProxied = d->anyProxied || all[p].proxied > 0;
    // A peer on another node is never mapped, although here it is a thread of this process.
    if (!proxied[p]) bases[p] = reinterpret_cast<char*>(all[p].base);
  }
  d->conns.resize(static_cast<size_t>(nch) * static_cast<size_t>(n));
  d->layout.buildConns(r, bases.data(), d->conns.data());
  if (d->anyProxied) {
    ProxyHooks hooks;
    hooks.abortFlag = &d->abort;
    hooks.onError = [d](const Status& st) {
      {
        std::lock_guard<std::mutex> lock(d->mu);
        d->proxyError = st;
        d->failedAt = std::chrono::steady_clock::now();
      }
      __atomic_store_n(&d->abort, 1u, __ATOMIC_RELEASE);  // the blocks poll it (dev::loadVolatile32)
    };
    hooks.busy = [d] { return d->busy.load(); };
    ProxyGeometry g;
    g.rank = r;
    g.nranks = n;
    g.nch = nch;
    g.slotBytes = slotBytes;
    STRATA_RETURN_IF_ERROR(DeviceProxy::create(c.bootstrap(), c.layout(), g, proxied, hostProxyMemory(),
                                               std::move(hooks), &d->proxy));
    d->proxy->wire(d->conns.data());
  }
  return c.bootstrap().barrier();  // every rank wired before any block writes into a peer's arena
}

/// Runs this rank's launches in order, each with one host thread per block, as the executor
/// would enqueue them (wanting send/recv peers and kicking the proxy first). False if a block
/// gave up (abort).
inline bool runEmulatedLaunches(EmulatedDeviceRank& d, std::vector<DevLaunch>& launches) {
  d.busy = true;
  std::atomic<bool> ok{true};
  for (DevLaunch& l : launches) {
    l.work.conns = d.conns.data();
    l.work.abortFlag = &d.abort;
    l.work.errorFlag = &d.error;
    if (d.proxy) {
      d.proxy->wantLaunch(l.work);
      d.proxy->kick();
    }
    std::vector<std::thread> blocks;
    for (int b = 0; b < l.blocks; ++b)
      blocks.emplace_back([&, b] {
        if (!dev::runBlock(ProxyEmulationExec{}, l.work, b)) ok = false;
      });
    for (auto& t : blocks) t.join();
    if (!ok) break;
  }
  d.busy = false;
  return ok;
}

}  // namespace strata::testing
