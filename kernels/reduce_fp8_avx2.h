// reduce_fp8_avx2.h: AVX2 + F16C loops for fp8 (e4m3, e5m2) Sum, Prod and scale, 32 elements a step.
//
// Each fp8 byte is widened to an fp16 bit pattern that holds it exactly, converted to float by
// vcvtph2ps, combined in float, rounded to fp16 by vcvtps2ph (nearest even), and rounded from fp16
// to fp8 (nearest even) with integer adds on the 16-bit lanes:
//   - e5m2 is the top byte of an fp16: widen with byte << 8; round at bit 8. Same exponent range, so
//     fp16 overflow (inf) and subnormals line up with e5m2's.
//   - e4m3 is placed as sign << 15 | magnitude << 7, the fp16 of value * 2^-8 (exponent fields and
//     subnormals line up); sums need no rescaling, products are multiplied by 2^8 (exact). Round at
//     bit 7; a magnitude past 0x7e (overflow, inf, NaN) becomes the NaN 0x7f; a NaN input (which
//     this widening would read as 1.875 * 2^-8) is forced to NaN at the end.
// Rounding twice (float -> fp16 -> fp8) gives the correctly rounded result here: the float result
// of two fp8 operands is exact, or (a sum of operands far apart) lies much closer to the larger
// operand than to any fp8 halfway point, and fp16's extra 7 or 8 bits keep it there. So the bits
// are those of the generic loops (reduce_loops.h), NaN payloads aside; kernels_test checks this
// exhaustively over every pair of operands. The generic body runs the tails. x86 only;
// host_reduce.cc calls these only where the CPU has AVX2 and F16C.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <type_traits>

#include "kernels/reduce_avx2.h"
#include "kernels/reduce_loops.h"

namespace strata::kernels::detail {

template <class Cd>
constexpr bool kIsE4m3 = std::is_same_v<Cd, E4m3>;

/// fp8 bytes (one 128-bit lane's low or high 8 of each lane, as unpack picks them) as fp16 bits.
template <class Cd, bool kHigh>
STRATA_AVX2 [[gnu::always_inline]] inline __m256i fp8ToHalfBits(__m256i v) {
  const __m256i zero = _mm256_setzero_si256();
  const __m256i w = kHigh ? _mm256_unpackhi_epi8(zero, v) : _mm256_unpacklo_epi8(zero, v);  // byte << 8
  if constexpr (!kIsE4m3<Cd>) return w;
  // e4m3: shift the magnitude down one bit (sign copied into bit 14 by the arithmetic shift: cleared).
  return _mm256_and_si256(_mm256_srai_epi16(w, 1), _mm256_set1_epi16(int16_t(0xbf80)));
}

/// The op on 16 fp16 values, rounded back to fp16 bits (nearest even).
template <class Cd, RedKind K>
STRATA_AVX2 [[gnu::always_inline]] inline __m256i halfOp16(__m256i x, __m256i y) {
  const __m256 x0 = _mm256_cvtph_ps(_mm256_castsi256_si128(x)), x1 = _mm256_cvtph_ps(_mm256_extracti128_si256(x, 1));
  const __m256 y0 = _mm256_cvtph_ps(_mm256_castsi256_si128(y)), y1 = _mm256_cvtph_ps(_mm256_extracti128_si256(y, 1));
  __m256 r0 = vop<K>(x0, y0), r1 = vop<K>(x1, y1);
  if constexpr (kIsE4m3<Cd> && K == RedKind::Prod) {  // (a 2^-8)(b 2^-8) 2^8 = ab 2^-8
    r0 = _mm256_mul_ps(r0, _mm256_set1_ps(256.0f));
    r1 = _mm256_mul_ps(r1, _mm256_set1_ps(256.0f));
  }
  const __m128i h0 = _mm256_cvtps_ph(r0, _MM_FROUND_TO_NEAREST_INT);
  const __m128i h1 = _mm256_cvtps_ph(r1, _MM_FROUND_TO_NEAREST_INT);
  return _mm256_inserti128_si256(_mm256_castsi128_si256(h0), h1, 1);
}

/// fp16 bits rounded to nearest even at the fp8 mantissa's last bit: the fp8 byte in the low 8 bits
/// of each 16-bit lane (e4m3: a magnitude past 0x7e, overflow/inf/NaN, is 0x7f, the NaN).
template <class Cd>
STRATA_AVX2 [[gnu::always_inline]] inline __m256i roundHalfToFp8(__m256i h) {
  constexpr int kCut = kIsE4m3<Cd> ? 7 : 8;  // bits of fp16 mantissa below the fp8 mantissa
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi16(h, kCut), _mm256_set1_epi16(1));
  const __m256i q = _mm256_add_epi16(_mm256_add_epi16(h, odd), _mm256_set1_epi16((1 << (kCut - 1)) - 1));
  // No carry reaches bit 15: |h| <= 0x7c00 (e5m2: inf; a NaN of an op on e5m2 has only its top
  // two mantissa bits and the quiet bit set, so <= 0x7f00) or <= 0x6220 (e4m3: the largest product, 448 * 448 * 2^-8).
  if constexpr (!kIsE4m3<Cd>) return _mm256_srli_epi16(q, 8);
  const __m256i magnitude = _mm256_min_epu16(_mm256_srli_epi16(_mm256_slli_epi16(q, 1), 8), _mm256_set1_epi16(0x7f));
  return _mm256_or_si256(magnitude, _mm256_and_si256(_mm256_srli_epi16(q, 8), _mm256_set1_epi16(0x80)));
}

/// 32 fp8 results from 32 + 32 fp8 operands.
template <class Cd, RedKind K>
STRATA_AVX2 [[gnu::always_inline]] inline __m256i fp8Op32(__m256i a, __m256i b) {
  const __m256i lo = roundHalfToFp8<Cd>(halfOp16<Cd, K>(fp8ToHalfBits<Cd, false>(a), fp8ToHalfBits<Cd, false>(b)));
  const __m256i hi = roundHalfToFp8<Cd>(halfOp16<Cd, K>(fp8ToHalfBits<Cd, true>(a), fp8ToHalfBits<Cd, true>(b)));
  const __m256i r = _mm256_packus_epi16(lo, hi);  // undoes the unpacks' lane order
  if constexpr (!kIsE4m3<Cd>) return r;
  const __m256i nanMagnitude = _mm256_set1_epi8(0x7f);
  const __m256i aNan = _mm256_cmpeq_epi8(_mm256_and_si256(a, nanMagnitude), nanMagnitude);
  const __m256i bNan = _mm256_cmpeq_epi8(_mm256_and_si256(b, nanMagnitude), nanMagnitude);
  return _mm256_or_si256(r, _mm256_or_si256(aNan, bNan));  // 0xff: a NaN
}

template <class Cd, RedKind K>
STRATA_AVX2 void reduceFp8F16c(void* dst, const void* src0, const void* src1, size_t n) {
  static_assert(K == RedKind::Sum || K == RedKind::Prod);
  auto* d = static_cast<Byte*>(dst);
  auto* a = static_cast<const Byte*>(src0);
  auto* b = static_cast<const Byte*>(src1);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), fp8Op32<Cd, K>(x, y));
  }
  reduceBody<Cd, K>(d + i, a + i, b + i, n - i);
}

/// scale: Prod with the scalar in every lane (the same rounding, so the same bits as scaleBody).
template <class Cd>
STRATA_AVX2 void scaleFp8F16c(void* dst, const void* src, size_t n, const void* scalar) {
  auto* d = static_cast<Byte*>(dst);
  auto* s = static_cast<const Byte*>(src);
  const __m256i k = _mm256_set1_epi8(static_cast<char>(*static_cast<const Byte*>(scalar)));
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), fp8Op32<Cd, RedKind::Prod>(x, k));
  }
  scaleBody<Cd>(d + i, s + i, n - i, static_cast<const Byte*>(scalar));
}

}  // namespace strata::kernels::detail

#endif  // x86
