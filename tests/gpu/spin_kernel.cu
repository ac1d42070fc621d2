// spin_kernel.cu: one block that sleeps on the GPU clock, then fills a buffer (see spin_kernel.h).
#include "gpu/spin_kernel.h"

namespace strata::testing {
namespace {

__device__ unsigned long long globalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spinThenFill(float* buf, size_t count, float value, unsigned long long ns) {
  if (threadIdx.x == 0) {
    const unsigned long long start = globalTimerNs();
    while (globalTimerNs() - start < ns) __nanosleep(100000);
  }
  __syncthreads();
  for (size_t i = threadIdx.x; i < count; i += blockDim.x) buf[i] = value;
}

}  // namespace

cudaError_t launchSpinThenFill(float* buf, size_t count, float value, unsigned long long ns, cudaStream_t stream) {
  spinThenFill<<<1, 256, 0, stream>>>(buf, count, value, ns);
  return cudaGetLastError();
}

}  // namespace strata::testing
