// gloo_ops.h: Gloo's reduction functions and C++ element types for strata's dtypes and ops.
#pragma once

#include <gloo/algorithm.h>
#include <gloo/math.h>
#include <gloo/types.h>

#include <cstdint>

#include "perf/common/types.h"

namespace strata::perf::gloo_ops {

/// The element-wise function of the options-style API (AllreduceOptions, ReduceOptions).
using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <typename T>
ReduceFn reduceFn(Op op) {
  switch (op) {
    case Op::Prod: return &gloo::product<T>;
    case Op::Max: return &gloo::max<T>;
    case Op::Min: return &gloo::min<T>;
    default: return &gloo::sum<T>;
  }
}

/// The function object of the classic algorithm classes (halving-doubling, ...).
template <typename T>
const gloo::ReductionFunction<T>* reductionFunction(Op op) {
  switch (op) {
    case Op::Prod: return gloo::ReductionFunction<T>::product;
    case Op::Max: return gloo::ReductionFunction<T>::max;
    case Op::Min: return gloo::ReductionFunction<T>::min;
    default: return gloo::ReductionFunction<T>::sum;
  }
}

/// Calls f(T{}) with the C++ type Gloo reduces for dtype t.
template <typename F>
auto withGlooType(DType t, F&& f) {
  switch (t) {
    case strataInt8: return f(int8_t{});
    case strataUint8: return f(uint8_t{});
    case strataInt32: return f(int32_t{});
    case strataUint32: return f(uint32_t{});
    case strataInt64: return f(int64_t{});
    case strataUint64: return f(uint64_t{});
    case strataFloat16: return f(gloo::float16{});
    case strataFloat32: return f(float{});
    default: return f(double{});
  }
}

/// A Gloo buffer pointer (Gloo takes non-const pointers even for inputs).
template <typename T>
T* typed(const void* p) {
  return static_cast<T*>(const_cast<void*>(p));
}

}  // namespace strata::perf::gloo_ops
