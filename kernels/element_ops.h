// element_ops.h: the per-element math of every reduction, shared by the host kernels
// (reduce_loops.h) and the CUDA kernels (device/): codecs between a stored type and the type an op
// runs in, the op functors, and the scale (pre-multiplied sum) and divide (avg) steps. All of it
// is STRATA_HD, so the exhaustive host tests of kernels_test cover the device math too.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/float_convert.h"
#include "kernels/hd.h"
#include "kernels/red_kind.h"

namespace strata::kernels {

namespace detail {

// Codecs: S is the stored type, C the type the op runs in.
template <class T>
struct Plain {
  using S = T;
  using C = T;
  STRATA_HD static C dec(S v) { return v; }
  STRATA_HD static S enc(C v) { return v; }
};
struct Half {
  using S = uint16_t;
  using C = float;
  STRATA_HD static C dec(S v) { return fc::halfToFloat(v); }
  STRATA_HD static S enc(C v) { return fc::floatToHalf(v); }
};
struct Bf16 {
  using S = uint16_t;
  using C = float;
  STRATA_HD static C dec(S v) { return fc::bf16ToFloat(v); }
  STRATA_HD static S enc(C v) { return fc::floatToBf16(v); }
};
struct E4m3 {
  using S = uint8_t;
  using C = float;
  STRATA_HD static C dec(S v) { return fc::e4m3ToFloat(v); }
  STRATA_HD static S enc(C v) { return fc::floatToE4m3(v); }
};
struct E5m2 {
  using S = uint8_t;
  using C = float;
  STRATA_HD static C dec(S v) { return fc::e5m2ToFloat(v); }
  STRATA_HD static S enc(C v) { return fc::floatToE5m2(v); }
};

template <RedKind K>
struct Op {
  template <class T>
  STRATA_HD static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;  // no int promotion
      if constexpr (K == RedKind::Sum) return T(U(W(U(a)) + W(U(b))));
      if constexpr (K == RedKind::Prod) return T(U(W(U(a)) * W(U(b))));
      if constexpr (K == RedKind::Max) return a > b ? a : b;
      if constexpr (K == RedKind::Min) return a < b ? a : b;
    } else {
      if constexpr (K == RedKind::Sum) return a + b;
      if constexpr (K == RedKind::Prod) return a * b;
      if constexpr (K == RedKind::Max) return (a > b || a != a) ? a : b;
      if constexpr (K == RedKind::Min) return (a < b || a != a) ? a : b;
    }
  }
};

/// One stored element times a decoded scalar, rounded back to the stored type (pre-multiplied sum).
template <class Cd>
STRATA_HD typename Cd::S scaleOne(typename Cd::S v, typename Cd::C k) {
  return Cd::enc(Op<RedKind::Prod>::apply(Cd::dec(v), k));
}

/// Divisor of divideOne, converted once: integers divide in a type wide enough that n converts
/// exactly and INT_MIN / n cannot trap; fp32 divides in double; the others in their op type.
template <class Cd>
using DivisorT = std::conditional_t<
    std::is_integral_v<typename Cd::C>,
    std::conditional_t<std::is_signed_v<typename Cd::C>,
                       std::conditional_t<(sizeof(typename Cd::C) <= 4), int32_t, int64_t>,
                       std::conditional_t<(sizeof(typename Cd::C) <= 4), uint32_t, uint64_t>>,
    std::conditional_t<std::is_same_v<Cd, Plain<float>>, double, typename Cd::C>>;

/// One stored element divided by n (avg): integer division for integers, rounded for floats.
template <class Cd>
STRATA_HD typename Cd::S divideOne(typename Cd::S v, DivisorT<Cd> w) {
  using C = typename Cd::C;
  using W = DivisorT<Cd>;
  if constexpr (std::is_integral_v<C>) return typename Cd::S(W(v) / w);
  else return Cd::enc(C(W(Cd::dec(v)) / w));
}

}  // namespace detail
}  // namespace strata::kernels
