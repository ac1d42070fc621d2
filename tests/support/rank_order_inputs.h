// rank_order_inputs.h: floating-point inputs whose sums over ranks depend on the summation order
// (widely spread magnitudes and signs), and the reference result of deterministic mode computed
// here, independently of the library's tree code: a balanced pairwise tree over the ranks in rank
// order, level by level ((x0+x1)+(x2+x3))+..., each pair combined by the host kernels (so fp16 and
// bf16 round after every addition, as every strata reduction does).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/element_value.h"
#include "kernels/host_reduce.h"
#include "strata/strata.h"

namespace strata::testing {

using Bytes = std::vector<unsigned char>;

/// Rank r's element i: +-(1 + f) * 2^e, with e spread as widely as the type allows (fp16: [-8, 8],
/// so that 8 ranks cannot overflow) and f with as many bits as the type holds.
inline double orderSensitiveValue(strataDataType_t t, int r, size_t i) {
  uint64_t h = (static_cast<uint64_t>(r) + 1) * 0x9e3779b97f4a7c15ULL ^ (i + 7) * 0xc2b2ae3d27d4eb4fULL;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 32;
  const uint64_t g = h * 0x94d049bb133111ebULL;
  const double f = t == strataFloat64 ? static_cast<double>(g >> 12) / 4503599627370496.0  // 52 bits
                                      : static_cast<double>(h & 0xffffff) / 16777216.0;    // 24 bits
  const int spread = t == strataFloat16 ? 8 : 24;
  const int e = static_cast<int>((h >> 24) % static_cast<uint64_t>(2 * spread + 1)) - spread;
  return std::ldexp(1.0 + f, e) * ((h >> 40) & 1 ? -1.0 : 1.0);
}

/// `count` elements of type t for rank r (element i is value i + first), with 16 bytes of slack.
inline Bytes orderSensitiveInput(strataDataType_t t, int r, size_t count, size_t first = 0) {
  Bytes b(count * kernels::dtypeSize(t) + 16);
  for (size_t i = 0; i < count; ++i) kernels::storeElement(t, b.data(), i, orderSensitiveValue(t, r, first + i));
  return b;
}

/// Deterministic mode's sum of inputs[0..n-1] over elements [first, first + count): each input
/// scaled first when `scalar` is given (pre-multiplied sum), the rank-order tree, then divided by n
/// for avg.
inline Bytes rankOrderTreeSum(strataDataType_t t, const std::vector<Bytes>& inputs, size_t first, size_t count,
                              bool avg = false, const void* scalar = nullptr) {
  const size_t es = kernels::dtypeSize(t);
  const int n = static_cast<int>(inputs.size());
  std::vector<Bytes> v(inputs.size(), Bytes(count * es + 16));
  for (int r = 0; r < n; ++r) {
    const unsigned char* src = inputs[static_cast<size_t>(r)].data() + first * es;
    if (scalar) kernels::scale(v[static_cast<size_t>(r)].data(), src, count, t, scalar);
    else std::memcpy(v[static_cast<size_t>(r)].data(), src, count * es);
  }
  for (int st = 1; st < n; st *= 2)
    for (int k = 0; k + st < n; k += 2 * st)
      kernels::reduce(v[static_cast<size_t>(k)].data(), v[static_cast<size_t>(k)].data(),
                      v[static_cast<size_t>(k + st)].data(), count, t, kernels::RedKind::Sum);
  if (avg) kernels::divide(v[0].data(), count, t, n);
  return v[0];
}

/// Elements of `got` (count elements) whose bits differ from `want`'s.
inline size_t bitMismatches(strataDataType_t t, const unsigned char* got, const unsigned char* want, size_t count) {
  const size_t es = kernels::dtypeSize(t);
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) bad += std::memcmp(got + i * es, want + i * es, es) != 0;
  return bad;
}

}  // namespace strata::testing
