// spin_kernel.h: a kernel that holds a stream for a while and then writes a buffer (stream-ordering tests).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace strata::testing {

/// Enqueues on `stream`: wait `ns` nanoseconds on the GPU, then buf[i] = value for every i < count.
cudaError_t launchSpinThenFill(float* buf, size_t count, float value, unsigned long long ns, cudaStream_t stream);

}  // namespace strata::testing
