// typed.h: element codecs (double <-> each dtype's bits) and the typed fill / compare loops.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/element_value.h"
#include "kernels/host_reduce.h"
#include "perf/common/types.h"
#include "perf/common/values.h"

namespace strata::perf {

template <typename T>
struct PlainCodec {
  using Raw = T;
  static Raw encode(double v) { return static_cast<Raw>(v); }
  static double decode(Raw x) { return static_cast<double>(x); }
};

template <typename R, R (*Enc)(float), float (*Dec)(R)>
struct PackedCodec {
  using Raw = R;
  static Raw encode(double v) { return Enc(static_cast<float>(v)); }
  static double decode(Raw x) { return Dec(x); }
};

/// Calls f(Codec{}) with the codec of dtype t.
template <typename F>
auto withCodec(DType t, F&& f) {
  switch (t) {
    case strataInt8: return f(PlainCodec<int8_t>{});
    case strataUint8: return f(PlainCodec<uint8_t>{});
    case strataInt32: return f(PlainCodec<int32_t>{});
    case strataUint32: return f(PlainCodec<uint32_t>{});
    case strataInt64: return f(PlainCodec<int64_t>{});
    case strataUint64: return f(PlainCodec<uint64_t>{});
    case strataFloat16: return f(PackedCodec<uint16_t, kernels::floatToHalf, kernels::halfToFloat>{});
    case strataBfloat16: return f(PackedCodec<uint16_t, kernels::floatToBf16, kernels::bf16ToFloat>{});
    case strataFloat32: return f(PlainCodec<float>{});
    case strataFloat64: return f(PlainCodec<double>{});
    case strataFloat8e4m3: return f(PackedCodec<uint8_t, kernels::floatToE4m3, kernels::e4m3ToFloat>{});
    default: return f(PackedCodec<uint8_t, kernels::floatToE5m2, kernels::e5m2ToFloat>{});
  }
}

/// p[0..n) = the next n values of s, in dtype t.
inline void fillValues(DType t, void* p, size_t n, Seq s) {
  withCodec(t, [&](auto codec) {
    using C = decltype(codec);
    auto* q = static_cast<typename C::Raw*>(p);
    for (size_t i = 0; i < n; ++i) q[i] = C::encode(s.next());
  });
}

/// Elements of p[0..n) that differ from the next n values of `expected` rounded to dtype t; with
/// relTol > 0, those further than relTol x |expected| from it (avg in floating types).
inline size_t countWrong(DType t, const void* p, size_t n, Seq expected, double relTol) {
  return withCodec(t, [&](auto codec) {
    using C = decltype(codec);
    const auto* q = static_cast<const typename C::Raw*>(p);
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) {
      const double e = expected.next(), got = C::decode(q[i]);
      const bool ok = relTol > 0 ? std::fabs(got - e) <= relTol * std::fabs(e) : got == C::decode(C::encode(e));
      wrong += ok ? 0 : 1;
    }
    return wrong;
  });
}

/// Writes one element of value v in dtype t to out (the scalar of a pre-multiplied sum).
inline void storeScalar(DType t, double v, void* out) {
  fillValues(t, out, 1, Seq(&v, 1, 0));
}

/// Relative tolerance of one rounding to t (0 for integers).
inline double roundingTolerance(DType t) { return kernels::roundingEpsilon(t); }

}  // namespace strata::perf
