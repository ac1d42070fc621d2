// host_exec.h: the execution context that runs a device block's code on one host thread (the
// emulation of the CUDA kernels used by the tests, and by nothing else): thread 0 of 1, barriers
// are no-ops, and waits yield the core, then sleep, because ranks outnumber cores here.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

namespace strata::dev {

struct HostExec {
  int tid() const { return 0; }
  int nthreads() const { return 1; }
  void sync() const {}
  bool syncOr(bool v) const { return v; }
  void pause(uint32_t spins) const {
    if (spins < 4096) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
};

}  // namespace strata::dev
