// reduce_avx2.h: hand-written AVX2 loops for fp16 through the F16C converters (reduce, scale,
// divide): GCC does not turn the portable conversions into vcvtph2ps/vcvtps2ph. They give the same
// bits as the generic loops (reduce_loops.h), which also run their tails (a signalling NaN may come
// out quieted or not: still a NaN). x86 only; host_reduce.cc calls them only where the CPU has
// AVX2 and F16C.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "kernels/reduce_loops.h"

#define STRATA_AVX2 [[gnu::target("avx2,f16c")]]

namespace strata::kernels::detail {

// fp16 through F16C: 8 lanes per conversion, the generic body for the tail.
template <RedKind K>
STRATA_AVX2 [[gnu::always_inline]] inline __m256 vop(__m256 a, __m256 b) {
  if constexpr (K == RedKind::Sum) return _mm256_add_ps(a, b);
  if constexpr (K == RedKind::Prod) return _mm256_mul_ps(a, b);
  const __m256 nan = _mm256_cmp_ps(a, a, _CMP_UNORD_Q);
  if constexpr (K == RedKind::Max) return _mm256_blendv_ps(b, a, _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ), nan));
  if constexpr (K == RedKind::Min) return _mm256_blendv_ps(b, a, _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ), nan));
}
STRATA_AVX2 [[gnu::always_inline]] inline __m256 loadHalf8(const Byte* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
STRATA_AVX2 [[gnu::always_inline]] inline void storeHalf8(Byte* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

template <RedKind K>
STRATA_AVX2 void reduceHalfF16c(void* dst, const void* src0, const void* src1, size_t n) {
  auto* d = static_cast<Byte*>(dst);
  auto* a = static_cast<const Byte*>(src0);
  auto* b = static_cast<const Byte*>(src1);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 x0 = loadHalf8(a + 2 * i), x1 = loadHalf8(a + 2 * i + 16);
    const __m256 y0 = loadHalf8(b + 2 * i), y1 = loadHalf8(b + 2 * i + 16);
    storeHalf8(d + 2 * i, vop<K>(x0, y0));
    storeHalf8(d + 2 * i + 16, vop<K>(x1, y1));
  }
  for (; i + 8 <= n; i += 8) storeHalf8(d + 2 * i, vop<K>(loadHalf8(a + 2 * i), loadHalf8(b + 2 * i)));
  reduceBody<Half, K>(d + 2 * i, a + 2 * i, b + 2 * i, n - i);
}
STRATA_AVX2 inline void scaleHalfF16c(void* dst, const void* src, size_t n, const void* scalar) {
  auto* d = static_cast<Byte*>(dst);
  auto* s = static_cast<const Byte*>(src);
  const __m256 k = _mm256_set1_ps(fc::halfToFloat(load<uint16_t>(static_cast<const Byte*>(scalar))));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) storeHalf8(d + 2 * i, _mm256_mul_ps(loadHalf8(s + 2 * i), k));
  scaleBody<Half>(d + 2 * i, s + 2 * i, n - i, static_cast<const Byte*>(scalar));
}
STRATA_AVX2 inline void divideHalfF16c(void* dst, size_t n, int div) {
  auto* d = static_cast<Byte*>(dst);
  const __m256 w = _mm256_set1_ps(float(div));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) storeHalf8(d + 2 * i, _mm256_div_ps(loadHalf8(d + 2 * i), w));
  divideBody<Half>(d + 2 * i, n - i, div);
}

}  // namespace strata::kernels::detail

#endif  // x86
