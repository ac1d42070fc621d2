// device_kernels.cu: the CUDA collective kernel. One kernel for every collective, dtype and op
// (switches at run time, so nvcc compiles one kernel per architecture, not a grid of them): each
// block runs one channel of kernels/device/dev_algos.h with BlockExec, the CUDA side of the
// execution context that the host emulation (host_exec.h) provides in the tests.
#include <cuda_runtime.h>

#include "kernels/device/dev_algos.h"
#include "kernels/device/device_launch.h"

namespace strata::dev {

static_assert(sizeof(DevWork) <= 32764, "DevWork must fit the kernel parameter space (32764 bytes since CUDA 12.1)");

struct BlockExec {
  STRATA_HD int tid() const {
#if defined(__CUDA_ARCH__)
    return int(threadIdx.x);
#else
    return 0;
#endif
  }
  STRATA_HD int nthreads() const {
#if defined(__CUDA_ARCH__)
    return int(blockDim.x);
#else
    return 1;
#endif
  }
  STRATA_HD void sync() const {
#if defined(__CUDA_ARCH__)
    __syncthreads();
#endif
  }
  STRATA_HD bool syncOr(bool v) const {
#if defined(__CUDA_ARCH__)
    return __syncthreads_or(v ? 1 : 0) != 0;
#else
    return v;
#endif
  }
  STRATA_HD void pause(uint32_t spins) const {
#if defined(__CUDA_ARCH__)
    // Ranks may share the GPU: after a while, give the SM's issue slots to the others.
    if (spins > 1024) __nanosleep(100);
#endif
  }
};

// __grid_constant__: the algorithms take the descriptor by reference; without it every thread
// would copy the 3 KiB parameter block into local memory first.
__global__ void __launch_bounds__(kMaxThreads) collectiveKernel(const __grid_constant__ DevWork w) {
  const BlockExec ex;
  const bool ok = runBlock(ex, w, int(blockIdx.x));
  if (!ok && threadIdx.x == 0 && w.errorFlag) {
    // Pinned host memory: a plain store (atomics on host memory need platform support).
    *reinterpret_cast<volatile uint32_t*>(w.errorFlag) = kErrAborted;
    __threadfence_system();
  }
}

int launchWork(const DevWork& w, int blocks, int threads, void* stream) {
  collectiveKernel<<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(w);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace strata::dev
