// float_convert.h: branch-free scalar conversions between float and the 16- and 8-bit float formats
// (fp16, bf16, fp8 e4m3, fp8 e5m2), written so that GCC auto-vectorises loops that call them.
// Internal to kernels/; host_reduce.h exposes them as halfToFloat, floatToHalf, ... Every function
// is STRATA_HD: the CUDA kernels use these same conversions, so host tests cover their math.
//
// All encoders round to nearest, ties to even. The subnormal paths of the narrow formats use one
// float addition, so they assume the default rounding mode (round-to-nearest), as all of strata does.
// Decoders never produce float subnormals (except bf16, whose subnormals are float subnormals), so
// they are exact even with denormals-are-zero set.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

#include "kernels/hd.h"

namespace strata::kernels::fc {

using kernels::bitCast;

/// fp16 bits -> float: exact; NaN payloads are kept (shifted), so quiet NaNs stay quiet.
STRATA_HD inline float halfToFloat(uint16_t h) {
  const uint32_t em = h & 0x7fffu;  // exponent and mantissa
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t e = em & 0x7c00u;
  uint32_t u = (em << 13) + (112u << 23);   // rebias 15 -> 127
  u = e == 0x7c00u ? u + (112u << 23) : u;  // inf/NaN: exponent to 255
  // Subnormal: build 2^-14 * (1 + m/1024) as a normal float and subtract 2^-14 (exact).
  const float sub = bitCast<float>((em << 13) + (113u << 23)) - 0x1p-14f;
  u = e == 0 ? bitCast<uint32_t>(sub) : u;
  return bitCast<float>(u | sign);
}

/// float -> a narrow IEEE-like format with kExp exponent bits and kMant mantissa bits (bias
/// 2^(kExp-1)-1), round to nearest even. kIeee: the all-ones exponent holds inf/NaN (fp16, e5m2);
/// otherwise (e4m3) only all-ones exponent+mantissa is NaN, there is no inf, and overflow or an
/// infinite input gives NaN. A NaN input gives a quiet NaN (payload kept where it fits).
template <int kExp, int kMant, bool kIeee>
STRATA_HD inline uint32_t encodeNarrow(float f) {
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  constexpr int kEmin = 1 - kBias;  // exponent of the smallest normal
  constexpr int kShift = 23 - kMant;
  constexpr uint32_t kAbsMask = (1u << (kExp + kMant)) - 1;
  constexpr uint32_t kMinNormal = uint32_t(kEmin + 127) << 23;
  // A float whose ulp is the narrow format's subnormal step 2^(kEmin-kMant).
  constexpr uint32_t kMagic = uint32_t(kEmin - kMant + 23 + 127) << 23;
  constexpr uint32_t kInf = ((1u << kExp) - 1) << kMant;
  constexpr uint32_t kMaxFinite = kIeee ? kInf - 1 : kAbsMask - 1;
  constexpr uint32_t kOverflow = kIeee ? kInf : kAbsMask;
  constexpr uint32_t kQuiet = kIeee ? 1u << (kMant - 1) : kAbsMask;

  const uint32_t u = bitCast<uint32_t>(f);
  const uint32_t sign = (u >> 31) << (kExp + kMant);
  const uint32_t a = u & 0x7fffffffu;
  // Normal range: rebias, add half an ulp minus one plus the lowest kept bit (ties to even).
  const uint32_t odd = (a >> kShift) & 1u;
  const uint32_t nrm = (a - (uint32_t(127 - kBias) << 23) + ((1u << (kShift - 1)) - 1) + odd) >> kShift;
  // Subnormal range: the float adder rounds |f| to a multiple of the subnormal step.
  const uint32_t sub = bitCast<uint32_t>(bitCast<float>(a) + bitCast<float>(kMagic)) - kMagic;
  uint32_t r = a < kMinNormal ? sub : nrm;
  r = r > kMaxFinite ? kOverflow : r;
  r = a > 0x7f800000u ? (((a >> kShift) | kQuiet) & kAbsMask) : r;
  return r | sign;
}

STRATA_HD inline uint16_t floatToHalf(float f) { return uint16_t(encodeNarrow<5, 10, true>(f)); }
STRATA_HD inline uint8_t floatToE4m3(float f) { return uint8_t(encodeNarrow<4, 3, false>(f)); }
STRATA_HD inline uint8_t floatToE5m2(float f) { return uint8_t(encodeNarrow<5, 2, true>(f)); }

STRATA_HD inline float bf16ToFloat(uint16_t b) { return bitCast<float>(uint32_t(b) << 16); }

/// float -> bf16: add 0x7fff plus the lowest kept bit and truncate (ties to even); NaN -> quiet NaN.
STRATA_HD inline uint16_t floatToBf16(float f) {
  const uint32_t u = bitCast<uint32_t>(f);
  const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return uint16_t((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : r);
}

/// Decodes one narrow-format byte exactly (constexpr, for the fp8 tables).
template <int kExp, int kMant, bool kIeee>
STRATA_HD constexpr float decodeNarrow(uint32_t v) {
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  constexpr uint32_t kExpMax = (1u << kExp) - 1, kMantMax = (1u << kMant) - 1;
  const uint32_t sign = (v >> (kExp + kMant)) & 1u;
  const uint32_t e = (v >> kMant) & kExpMax, m = v & kMantMax;
  uint32_t bits;
  if (kIeee && e == kExpMax) {
    bits = m == 0 ? 0x7f800000u : 0x7fc00000u | (m << (23 - kMant));
  } else if (!kIeee && e == kExpMax && m == kMantMax) {
    bits = 0x7fc00000u;
  } else if (e == 0) {  // m * 2^(1 - bias - kMant), a normal float
    bits = bitCast<uint32_t>(float(m) * bitCast<float>(uint32_t(1 - kBias - kMant + 127) << 23));
  } else {
    bits = ((e - kBias + 127) << 23) | (m << (23 - kMant));
  }
  return bitCast<float>(bits | (sign << 31));
}

#if !defined(__CUDACC__)  // nvcc's front end cannot constant-evaluate the bit casts
template <int kExp, int kMant, bool kIeee>
constexpr std::array<float, 256> makeNarrowTable() {
  std::array<float, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) t[i] = decodeNarrow<kExp, kMant, kIeee>(i);
  return t;
}

inline constexpr std::array<float, 256> kE4m3Table = makeNarrowTable<4, 3, false>();
inline constexpr std::array<float, 256> kE5m2Table = makeNarrowTable<5, 2, true>();
#endif

// Host code looks the byte up in a table; CUDA translation units decode it (same function, tested on the host
// against the table by kernels_test).
STRATA_HD inline float e4m3ToFloat(uint8_t v) {
#if defined(__CUDACC__)
  return decodeNarrow<4, 3, false>(v);
#else
  return kE4m3Table[v];
#endif
}
STRATA_HD inline float e5m2ToFloat(uint8_t v) {
#if defined(__CUDACC__)
  return decodeNarrow<5, 2, true>(v);
#else
  return kE5m2Table[v];
#endif
}

}  // namespace strata::kernels::fc
