// values.cc: the input patterns per op, sized so that no reduction leaves the type's exact range.
#include "perf/common/values.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace strata::perf {
namespace {

// Largest integer up to which every integer is exact in the type (capped: no test needs more).
double maxExactInt(DType t) {
  switch (t) {
    case strataInt8: return 127;
    case strataUint8: return 255;
    case strataFloat16: return 2048;
    case strataBfloat16: return 256;
    case strataFloat8e4m3: return 16;
    case strataFloat8e5m2: return 8;
    default: return 1 << 24;
  }
}

// Largest k such that 2^k is exact and in range.
int maxPow2(DType t) {
  switch (t) {
    case strataInt8: return 6;
    case strataUint8: return 7;
    case strataFloat8e4m3: return 8;
    case strataFloat8e5m2:
    case strataFloat16: return 15;
    default: return 24;
  }
}

// Data movement: value = (r * stride + i) mod modulus, all exact in the type.
struct MoveParams {
  size_t modulus, stride;
};
MoveParams moveParams(DType t) {
  switch (t) {
    case strataInt8: return {127, 13};
    case strataUint8: return {251, 13};
    case strataFloat16: return {2048, 1021};
    case strataBfloat16: return {256, 37};
    case strataFloat8e4m3: return {17, 5};
    case strataFloat8e5m2: return {9, 4};
    default: return {1u << 24, 100003};
  }
}

}  // namespace

Values::Values(DType dtype, Op op, int nranks) : dtype_(dtype) {
  const size_t n = static_cast<size_t>(nranks);
  // input(r, i) as a function of k = i mod period.
  std::function<double(size_t r, size_t k)> input;
  switch (op) {
    case Op::Max:
    case Op::Min:
      period_ = 5;
      input = [](size_t r, size_t k) { return static_cast<double>((k * 7 + r * 3) % 5); };
      break;
    case Op::Prod: {
      const size_t twos = static_cast<size_t>(maxPow2(dtype));
      if ((n + 2) / 3 <= twos) {  // a 2 on every third (rank, element): at most ceil(n/3) factors of 2
        period_ = 3;
        input = [](size_t r, size_t k) { return (k + r) % 3 == 0 ? 2.0 : 1.0; };
      } else {  // exactly `twos` ranks contribute a 2 to each element
        period_ = n;
        input = [n, twos](size_t r, size_t k) { return (k + r) % n < twos ? 2.0 : 1.0; };
      }
      break;
    }
    default: {  // sum, avg, mulsum (2 x sum)
      const size_t budget = static_cast<size_t>(maxExactInt(dtype)) / (op == Op::MulSum ? 2 : 1);
      const size_t m = std::min<size_t>(4, budget / n + 1);  // values 0..m-1: sums stay <= budget
      if (m >= 2) {
        period_ = m;
        input = [m](size_t r, size_t k) { return static_cast<double>((k + r) % m); };
      } else {  // more ranks than the budget: exactly `budget` ranks contribute a 1
        period_ = n;
        input = [n, budget](size_t r, size_t k) { return (k + r) % n < budget ? 1.0 : 0.0; };
      }
      break;
    }
  }
  inputs_.assign(n, std::vector<double>(period_));
  reduced_.assign(period_, 0);
  for (size_t k = 0; k < period_; ++k) {
    double acc = input(0, k);
    for (size_t r = 0; r < n; ++r) {
      double v = input(r, k);
      inputs_[r][k] = v;
      if (r == 0) continue;
      switch (op) {
        case Op::Prod: acc *= v; break;
        case Op::Max: acc = std::max(acc, v); break;
        case Op::Min: acc = std::min(acc, v); break;
        default: acc += v; break;
      }
    }
    if (op == Op::MulSum) acc *= 2;
    if (op == Op::Avg) acc = dtypeIsFloat(dtype) ? acc / nranks : std::trunc(acc / nranks);
    reduced_[k] = acc;
  }
}

Seq Values::moveInput(int r, size_t i) const {
  const MoveParams p = moveParams(dtype_);
  return Seq(nullptr, p.modulus, static_cast<size_t>(r) * p.stride + i);
}

}  // namespace strata::perf
