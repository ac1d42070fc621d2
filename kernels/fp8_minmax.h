// fp8_minmax.h: Max and Min of fp8 (e4m3, e5m2) elements computed on the bytes, with no conversion to
// float. Both formats are sign-magnitude with the magnitude bits ordered like the values, so the
// signed key (sign ? -magnitude : magnitude) orders every non-NaN value, with -0 and +0 equal. The
// result is the selected input byte, which is what decoding, Op<Max/Min> in float and re-encoding
// give (every non-NaN byte round-trips); a NaN in either input gives a NaN, as documented in
// host_reduce.cc. Plain loops: GCC vectorises them for the generic and the AVX2 variant alike.
// Internal to kernels/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/element_ops.h"
#include "kernels/red_kind.h"

namespace strata::kernels::detail {

/// Whether fp8 byte v of codec Cd (E4m3 or E5m2) is a NaN: e4m3 S.1111.111; e5m2 S.11111.mm, mm != 0.
template <class Cd>
inline bool fp8IsNan(uint8_t v) {
  static_assert(std::is_same_v<Cd, E4m3> || std::is_same_v<Cd, E5m2>);
  if constexpr (std::is_same_v<Cd, E4m3>) return (v & 0x7f) == 0x7f;
  else return (v & 0x7f) > 0x7c;
}

/// The ordering key of a non-NaN fp8 byte: -magnitude for negatives, so -0 and +0 are both 0.
inline int8_t fp8OrderKey(uint8_t v) {
  const int8_t magnitude = int8_t(v & 0x7f);
  return (v & 0x80) ? int8_t(-magnitude) : magnitude;
}

/// Max(a, b) = (a > b || a is NaN) ? a : b, Min likewise with <: a is kept when it is a NaN, or
/// when b is not a NaN and a orders strictly before/after b.
template <class Cd, RedKind K>
[[gnu::always_inline]] inline uint8_t fp8MinMax(uint8_t a, uint8_t b) {
  static_assert(K == RedKind::Max || K == RedKind::Min);
  const int8_t ka = fp8OrderKey(a), kb = fp8OrderKey(b);
  const bool beats = K == RedKind::Max ? ka > kb : ka < kb;
  return (fp8IsNan<Cd>(a) || (!fp8IsNan<Cd>(b) && beats)) ? a : b;
}

template <class Cd, RedKind K>
[[gnu::always_inline]] inline void reduceFp8MinMax(uint8_t* d, const uint8_t* a, const uint8_t* b, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = fp8MinMax<Cd, K>(a[i], b[i]);
}

}  // namespace strata::kernels::detail
