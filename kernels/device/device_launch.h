// device_launch.h: host-callable entry points of the CUDA kernels (device_kernels.cu), declared
// without CUDA headers so that the executor's C++ code includes them freely.
#pragma once

#include "kernels/device/dev_work.h"

namespace strata::dev {

/// Enqueues the collective kernel for `w` on `stream` (a cudaStream_t): `blocks` blocks of
/// `threads` threads. Returns the cudaError_t of the launch (0: enqueued).
int launchWork(const DevWork& w, int blocks, int threads, void* stream);

}  // namespace strata::dev
