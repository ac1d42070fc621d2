// reduce_fp8_avx512.h: AVX-512 (BW, VBMI, BF16) loop for fp8 (e4m3, e5m2) Sum, 64 elements a step.
//
// Why not the F16C loop of reduce_fp8_avx2.h made wider: on the CPUs measured (AMD Zen 5) an F16C
// conversion costs a cycle whatever its width and shares its pipes with shifts, shuffles and float
// adds, so 8 widening + 4 narrowing conversions per 64 elements bound that loop. Here only the
// narrowing conversions remain:
//   1. decode: every fp8 value is exactly a bf16 (at most 3 mantissa bits, exponents in range). Two
//      vpermi2b lookups in 128-entry tables (the magnitude indexes, the sign is OR-ed back) give each
//      byte's bf16 low and high bytes; e4m3 is tabled as value * 2^-8, as in the AVX2 loop, so that
//      its subnormals line up with fp16's. NaN (and e5m2 inf) bytes are tabled as bf16 NaN (inf).
//   2. add: unpacks interleave the bf16 of a and b into (a, b) pairs per 32-bit lane, and vdpbf16ps
//      computes acc + a * 1 + b * 1 in float. Products by 1 are exact, the accumulator starts at -0
//      (so -0 + -0 stays -0, and -0 + x = x), so the result is a + b rounded once to float to
//      nearest even: what vaddps gives on the decoded values. vdpbf16ps treats float subnormals as
//      zero, but decoded values and their sums never are subnormal (smallest: 2^-17).
//   3. round: vcvtps2ph to fp16 (nearest even), then nearest even at the fp8 mantissa's last bit in
//      16-bit integer lanes, as roundHalfToFp8 (reduce_fp8_avx2.h) but leaving the fp8 byte in each
//      lane's high byte, where one vpermt2b picks the 64 results in element order. Shifts are done
//      as multiplications (vpmulhuw), which run beside the conversions.
// The float result and both rounding steps are those of the AVX2 loop, so the bits are those of the
// generic loops (reduce_loops.h), NaN payloads aside; kernels_test checks this exhaustively over
// every pair of operands. The generic body runs the tails. x86 only; host_reduce.cc calls this only
// where the CPU has these extensions (HostIsa::Avx512).
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <array>
#include <bit>
#include <cstdint>

#include "kernels/float_convert.h"
#include "kernels/reduce_fp8_avx2.h"
#include "kernels/reduce_loops.h"

#define STRATA_AVX512 [[gnu::target("avx2,f16c,avx512f,avx512bw,avx512vbmi,avx512bf16")]]

namespace strata::kernels::detail {

/// bf16 bits of every fp8 magnitude (0..127), split in low and high bytes for vpermi2b.
struct Fp8Bf16Table {
  alignas(64) std::array<uint8_t, 128> low, high;
};

template <class Cd>
constexpr Fp8Bf16Table makeFp8Bf16Table() {
  Fp8Bf16Table t{};
  for (uint32_t m = 0; m < 128; ++m) {
    const float f = kIsE4m3<Cd> ? fc::decodeNarrow<4, 3, false>(m) * 0x1p-8f : fc::decodeNarrow<5, 2, true>(m);
    const uint32_t bits = f != f ? 0x7fc00000u : std::bit_cast<uint32_t>(f);  // NaN: the quiet NaN
    t.low[m] = uint8_t(bits >> 16);
    t.high[m] = uint8_t(bits >> 24);
  }
  return t;
}
template <class Cd>
inline constexpr Fp8Bf16Table kFp8Bf16Table = makeFp8Bf16Table<Cd>();

/// vpermt2b index placing the result of element e (the high byte of a 16-bit lane of the two
/// rounded vectors) at byte e. After the unpacks, float lane L of pair vector k (0..3) holds element
/// 16 * (L / 4) + 4 * k + L % 4; pair vectors 0, 1 become the low and high halves of the first
/// rounded vector, 2, 3 those of the second (bytes 64..127 of the vpermt2b table).
constexpr std::array<uint8_t, 64> makeFp8ResultOrder() {
  std::array<uint8_t, 64> order{};
  for (int e = 0; e < 64; ++e) {
    const int k = (e % 16) / 4, lane = 4 * (e / 16) + e % 4;
    order[e] = uint8_t(64 * (k / 2) + 2 * (16 * (k % 2) + lane) + 1);
  }
  return order;
}
alignas(64) inline constexpr std::array<uint8_t, 64> kFp8ResultOrder = makeFp8ResultOrder();

/// fp16 bits rounded to nearest even at the fp8 mantissa's last bit; the fp8 byte in the high byte
/// of each 16-bit lane (e4m3: a magnitude past 0x7e, overflow or NaN, is 0x7f, the NaN).
template <class Cd>
STRATA_AVX512 [[gnu::always_inline]] inline __m512i roundHalfToFp8High(__m512i h) {
  constexpr int kCut = kIsE4m3<Cd> ? 7 : 8;  // bits of fp16 mantissa below the fp8 mantissa
  const __m512i odd = _mm512_and_si512(_mm512_mulhi_epu16(h, _mm512_set1_epi16(1 << (16 - kCut))),
                                       _mm512_set1_epi16(1));  // (h >> kCut) & 1
  const __m512i q = _mm512_add_epi16(_mm512_add_epi16(h, odd), _mm512_set1_epi16((1 << (kCut - 1)) - 1));
  // No carry reaches bit 15: |h| <= 0x7e00 (e4m3 sums are at most 3.5 = 0x4300; e5m2 sums overflow
  // to inf, 0x7c00; a NaN from vdpbf16ps is the quiet NaN without payload, 0x7e00). e5m2: the
  // fp8 byte is q's high byte.
  if constexpr (!kIsE4m3<Cd>) return q;
  // e4m3: the magnitude is q's bits 7..14 (bit 14: overflow); doubled, it is the high byte, and
  // the unsigned min makes any magnitude past 0x7f 0x7f. The sign comes back from q's bit 15.
  const __m512i magnitude = _mm512_min_epu16(_mm512_add_epi16(q, q), _mm512_set1_epi16(0x7fff));
  return _mm512_ternarylogic_epi32(magnitude, q, _mm512_set1_epi16(int16_t(0x8000)), 0xd8);  // mask ? q : magnitude
}

/// 16 float sums of the (a, b) bf16 pairs in p, rounded to fp16 bits.
STRATA_AVX512 [[gnu::always_inline]] inline __m256i sumPairsToHalf(__m512i p) {
  const __m512 sum = _mm512_dpbf16_ps(_mm512_set1_ps(-0.0f), reinterpret_cast<__m512bh>(p),
                                      reinterpret_cast<__m512bh>(_mm512_set1_epi16(0x3f80)));  // bf16 1.0
  return _mm512_maskz_cvtps_ph(0xffff, sum, _MM_FROUND_TO_NEAREST_INT);  // (maskz: see joinHalves)
}

/// low and high as one vector. (The maskz forms of GCC 12's intrinsics avoid the warnings that its
/// undefined pass-through operands raise; an all-ones mask compiles to the unmasked instruction.)
STRATA_AVX512 [[gnu::always_inline]] inline __m512i joinHalves(__m256i low, __m256i high) {
  return _mm512_maskz_inserti64x4(0xff, _mm512_castsi256_si512(low), high, 1);
}

template <class Cd>
STRATA_AVX512 void reduceFp8SumAvx512(void* dst, const void* src0, const void* src1, size_t n) {
  auto* d = static_cast<Byte*>(dst);
  auto* a = static_cast<const Byte*>(src0);
  auto* b = static_cast<const Byte*>(src1);
  const Fp8Bf16Table& table = kFp8Bf16Table<Cd>;
  const __m512i low0 = _mm512_load_si512(table.low.data()), low1 = _mm512_load_si512(table.low.data() + 64);
  const __m512i high0 = _mm512_load_si512(table.high.data()), high1 = _mm512_load_si512(table.high.data() + 64);
  const __m512i order = _mm512_load_si512(kFp8ResultOrder.data());
  const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i x = _mm512_loadu_si512(a + i), y = _mm512_loadu_si512(b + i);
    // bf16 low and high bytes of each element; high | (byte & 0x80) puts the sign back.
    const __m512i xLow = _mm512_permutex2var_epi8(low0, x, low1);
    const __m512i xHigh = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(high0, x, high1), x, sign, 0xf8);
    const __m512i yLow = _mm512_permutex2var_epi8(low0, y, low1);
    const __m512i yHigh = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(high0, y, high1), y, sign, 0xf8);
    // bf16 words, then (a, b) pairs.
    const __m512i xWords0 = _mm512_unpacklo_epi8(xLow, xHigh), xWords1 = _mm512_unpackhi_epi8(xLow, xHigh);
    const __m512i yWords0 = _mm512_unpacklo_epi8(yLow, yHigh), yWords1 = _mm512_unpackhi_epi8(yLow, yHigh);
    const __m256i h0 = sumPairsToHalf(_mm512_unpacklo_epi16(xWords0, yWords0));
    const __m256i h1 = sumPairsToHalf(_mm512_unpackhi_epi16(xWords0, yWords0));
    const __m256i h2 = sumPairsToHalf(_mm512_unpacklo_epi16(xWords1, yWords1));
    const __m256i h3 = sumPairsToHalf(_mm512_unpackhi_epi16(xWords1, yWords1));
    const __m512i r01 = roundHalfToFp8High<Cd>(joinHalves(h0, h1));
    const __m512i r23 = roundHalfToFp8High<Cd>(joinHalves(h2, h3));
    _mm512_storeu_si512(d + i, _mm512_permutex2var_epi8(r01, order, r23));
  }
  reduceBody<Cd, RedKind::Sum>(d + i, a + i, b + i, n - i);
}

}  // namespace strata::kernels::detail

#endif  // x86
