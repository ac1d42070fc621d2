// device_cluster.h: n emulated device ranks in one process for the device emulation tests: host-
// memory FIFO arenas wired by the same ArenaLayout::buildConns as device arenas, plan parameters
// like the executor's, and a runner that executes each rank's launches with one host thread per
// block (kernels/device/host_exec.h), ranks concurrently.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "collectives/device_plan.h"
#include "kernels/device/dev_algos.h"
#include "kernels/device/host_exec.h"

namespace strata::testing {

/// n emulated ranks: their FIFO arenas, connection tables and abort flag.
class Cluster {
 public:
  Cluster(int n, int channels, uint64_t slotBytes, uint64_t llSlotBytes) : n_(n) {
    layout_.nranks = n;
    layout_.nch = channels;
    layout_.slotBytes = slotBytes;
    layout_.llSlotBytes = llSlotBytes;
    std::vector<char*> bases(n);
    for (int r = 0; r < n; ++r) {
      arenas_.emplace_back(new (std::align_val_t(128)) char[layout_.totalBytes() + 128]());
      bases[r] = arenas_.back().get();
    }
    conns_.resize(n);
    for (int r = 0; r < n; ++r) {
      conns_[r].resize(static_cast<size_t>(channels) * n);
      layout_.buildConns(r, bases.data(), conns_[r].data());
    }
    errors_ = std::vector<uint32_t>(n, 0);
  }
  ~Cluster() {
    for (auto& a : arenas_) ::operator delete[](a.release(), std::align_val_t(128));
  }

  DevPlanParams params(int rank) const {
    DevPlanParams p;
    p.rank = rank;
    p.nranks = n_;
    p.channels = layout_.nch;
    p.slotBytes = layout_.slotBytes;
    p.llSlotBytes = layout_.llSlotBytes;
    p.algo = algo;
    p.proto = proto;
    p.llMaxBytes = llMaxBytes;
    p.treeMaxBytes = treeMaxBytes;
    p.deterministic = deterministic;
    return p;
  }

  /// Runs each rank's launches in order (ranks concurrently, blocks as threads). False if any
  /// block gave up (abort).
  bool run(std::vector<std::vector<DevLaunch>>& launches) {
    std::atomic<bool> ok{true};
    std::vector<std::thread> ranks;
    for (int r = 0; r < n_; ++r)
      ranks.emplace_back([&, r] {
        for (DevLaunch& l : launches[r]) {
          l.work.conns = conns_[r].data();
          l.work.abortFlag = &abort_;
          l.work.errorFlag = &errors_[r];
          EXPECT_LE(l.work.nch, layout_.nch);
          std::vector<std::thread> blocks;
          for (int b = 0; b < l.blocks; ++b)
            blocks.emplace_back([&, b] {
              if (!dev::runBlock(dev::HostExec{}, l.work, b)) ok = false;
            });
          for (auto& t : blocks) t.join();
        }
      });
    for (auto& t : ranks) t.join();
    return ok;
  }

  int n() const { return n_; }
  volatile uint32_t abort_ = 0;
  std::string algo = "auto", proto = "auto";
  uint64_t llMaxBytes = 2048, treeMaxBytes = 1024;
  bool deterministic = false;  ///< plans deterministic mode's reductions (DevPlanParams::deterministic)

 private:
  int n_;
  dev::ArenaLayout layout_;
  std::vector<std::unique_ptr<char[]>> arenas_;
  std::vector<std::vector<dev::PeerConn>> conns_;
  std::vector<uint32_t> errors_;
};

}  // namespace strata::testing
