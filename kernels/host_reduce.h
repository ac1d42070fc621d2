// host_reduce.h: element-wise reduction, scaling and conversion kernels on host memory, for every
// strata data type (int8 .. uint64, fp16, bf16, fp32, fp64, fp8 e4m3 / e5m2).
//
// Low-precision types (fp16, bf16, fp8) are reduced by converting each element to float, applying
// the op and rounding back to nearest-even, per element and per call: the same result NCCL gives
// for one reduction step. Integer sums wrap (two's complement), as in NCCL.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/red_kind.h"
#include "strata/strata.h"

namespace strata::kernels {


/// Size in bytes of one element; 0 for an invalid type.
size_t dtypeSize(strataDataType_t dtype);
/// "int8", "fp16", ... ; "invalid" for an invalid type.
const char* dtypeName(strataDataType_t dtype);
bool dtypeIsFloat(strataDataType_t dtype);

/// dst[i] = a[i] op b[i] for i < count. dst may alias a or b (exactly, not partially).
void reduce(void* dst, const void* a, const void* b, size_t count, strataDataType_t dtype, RedKind op);

/// dst[i] = src[i] * scalar, where `scalar` points to one element of `dtype`. dst may alias src.
void scale(void* dst, const void* src, size_t count, strataDataType_t dtype, const void* scalar);

/// dst[i] = dst[i] / n (integer division for integer types, rounded division for floats).
void divide(void* dst, size_t count, strataDataType_t dtype, int n);

/// Plain memcpy-speed copy (a thin wrapper, here so that executors use one kernel set).
void copy(void* dst, const void* src, size_t bytes);

// Scalar conversions: exact where representable, round-to-nearest-even otherwise; NaN stays NaN.
// Overflow goes to inf for fp16, bf16 and e5m2, and to NaN for e4m3 (which has no inf), as the
// OCP FP8 specification's non-saturating conversion does.
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t b);
uint16_t floatToBf16(float f);
float e4m3ToFloat(uint8_t v);
uint8_t floatToE4m3(float f);
float e5m2ToFloat(uint8_t v);
uint8_t floatToE5m2(float f);

}  // namespace strata::kernels
