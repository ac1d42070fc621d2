// hd.h: marks functions that compile for both host and CUDA device (STRATA_HD), and a bit cast
// usable on both. Host-only translation units see plain inline functions.
#pragma once

#if defined(__CUDACC__)
#define STRATA_HD __host__ __device__
#define STRATA_HD_INLINE __host__ __device__ __forceinline__
#else
#define STRATA_HD
#define STRATA_HD_INLINE inline __attribute__((always_inline))
#endif

// Keeps a large device function out of line: each collective calls the step and reduce loops
// from many places, and inlining them all multiplies nvcc's compile time.
#if defined(__CUDA_ARCH__)
#define STRATA_DEVICE_NOINLINE __noinline__
#else
#define STRATA_DEVICE_NOINLINE
#endif

namespace strata::kernels {

template <class To, class From>
STRATA_HD constexpr To bitCast(const From& v) {
  static_assert(sizeof(To) == sizeof(From), "bitCast between types of different sizes");
  return __builtin_bit_cast(To, v);
}

}  // namespace strata::kernels
