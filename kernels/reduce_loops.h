// reduce_loops.h: the plain element loops behind host_reduce.cc: codecs (stored type <-> the type
// an op runs in), the op functors and the reduce/scale/divide loop bodies. host_reduce.cc inlines
// each body into a generic and an AVX2 variant; GCC -O3 vectorises them (the float conversions only
// with -fno-trapping-math, set in kernels/CMakeLists.txt). Internal to kernels/.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/element_ops.h"
#include "kernels/float_convert.h"
#include "kernels/fp8_minmax.h"
#include "kernels/host_reduce.h"

namespace strata::kernels::detail {

using Byte = unsigned char;

template <class T>
inline T load(const Byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
inline void store(Byte* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

// ---- loop bodies, inlined into each variant ----

template <class Cd, RedKind K>
[[gnu::always_inline]] inline void reduceElems(Byte* d, const Byte* a, const Byte* b, size_t n) {
  using S = typename Cd::S;
  for (size_t i = 0; i < n; ++i) {
    const S x = load<S>(a + i * sizeof(S)), y = load<S>(b + i * sizeof(S));
    store<S>(d + i * sizeof(S), Cd::enc(Op<K>::apply(Cd::dec(x), Cd::dec(y))));
  }
}

/// fc::floatToBf16 without the final shift (the bf16 result is in the high 16 bits) and without its
/// NaN case: a NaN made by an op on bf16 values has its low 16 bits clear (ops propagate an input's
/// payload or give the default NaN), so the rounding increment cannot carry out of them and the NaN
/// stays a NaN. Only for results of ops on decoded bf16, not for arbitrary floats.
inline uint32_t bf16RoundHigh(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  return u + 0x7fffu + ((u >> 16) & 1u);
}

/// bf16 two at a time in a 32-bit word: one element shifted up, the other masked, so the vectorised
/// loop needs no widening or narrowing shuffles (about 3x faster). Same bits as reduceElems<Bf16>,
/// except that Max/Min may pass a signalling NaN through unquieted; both halves are treated alike,
/// so byte order does not matter.
template <RedKind K>
[[gnu::always_inline]] inline void reduceBf16Pairs(Byte* d, const Byte* a, const Byte* b, size_t n) {
  const size_t words = n / 2;
  for (size_t i = 0; i < words; ++i) {
    const uint32_t x = load<uint32_t>(a + 4 * i), y = load<uint32_t>(b + 4 * i);
    const float lo = Op<K>::apply(std::bit_cast<float>(x << 16), std::bit_cast<float>(y << 16));
    const float hi = Op<K>::apply(std::bit_cast<float>(x & 0xffff0000u), std::bit_cast<float>(y & 0xffff0000u));
    store<uint32_t>(d + 4 * i, (bf16RoundHigh(lo) >> 16) | (bf16RoundHigh(hi) & 0xffff0000u));
  }
  reduceElems<Bf16, K>(d + 4 * words, a + 4 * words, b + 4 * words, n & 1);
}

template <class Cd, RedKind K>
[[gnu::always_inline]] inline void reduceBody(Byte* d, const Byte* a, const Byte* b, size_t n) {
  constexpr bool kFp8 = std::is_same_v<Cd, E4m3> || std::is_same_v<Cd, E5m2>;
  if constexpr (std::is_same_v<Cd, Bf16>)
    reduceBf16Pairs<K>(d, a, b, n);
  else if constexpr (kFp8 && (K == RedKind::Max || K == RedKind::Min))
    reduceFp8MinMax<Cd, K>(d, a, b, n);  // on the bytes, no conversion (fp8_minmax.h)
  else
    reduceElems<Cd, K>(d, a, b, n);
}

template <class Cd>
[[gnu::always_inline]] inline void scaleBody(Byte* d, const Byte* s, size_t n, const Byte* scalar) {
  using S = typename Cd::S;
  const typename Cd::C k = Cd::dec(load<S>(scalar));
  for (size_t i = 0; i < n; ++i) store<S>(d + i * sizeof(S), scaleOne<Cd>(load<S>(s + i * sizeof(S)), k));
}

template <class Cd>
[[gnu::always_inline]] inline void divideBody(Byte* d, size_t n, int div) {
  using S = typename Cd::S;
  const DivisorT<Cd> w = DivisorT<Cd>(div);
  for (size_t i = 0; i < n; ++i) store<S>(d + i * sizeof(S), divideOne<Cd>(load<S>(d + i * sizeof(S)), w));
}

}  // namespace strata::kernels::detail
