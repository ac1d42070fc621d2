// element_value.h: one element of any strata dtype read or written as a double, and the relative
// rounding of one conversion to that dtype. For checks and tools (tests, perf), not hot loops.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/host_reduce.h"

namespace strata::kernels {

inline void storeElement(strataDataType_t t, void* p, size_t i, double v) {
  switch (t) {
    case strataInt8: static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); break;
    case strataUint8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); break;
    case strataInt32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
    case strataUint32: static_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(v); break;
    case strataInt64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); break;
    case strataUint64: static_cast<uint64_t*>(p)[i] = static_cast<uint64_t>(v); break;
    case strataFloat16: static_cast<uint16_t*>(p)[i] = floatToHalf(static_cast<float>(v)); break;
    case strataBfloat16: static_cast<uint16_t*>(p)[i] = floatToBf16(static_cast<float>(v)); break;
    case strataFloat32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case strataFloat64: static_cast<double*>(p)[i] = v; break;
    case strataFloat8e4m3: static_cast<uint8_t*>(p)[i] = floatToE4m3(static_cast<float>(v)); break;
    case strataFloat8e5m2: static_cast<uint8_t*>(p)[i] = floatToE5m2(static_cast<float>(v)); break;
    default: break;
  }
}

inline double loadElement(strataDataType_t t, const void* p, size_t i) {
  switch (t) {
    case strataInt8: return static_cast<const int8_t*>(p)[i];
    case strataUint8: return static_cast<const uint8_t*>(p)[i];
    case strataInt32: return static_cast<const int32_t*>(p)[i];
    case strataUint32: return static_cast<const uint32_t*>(p)[i];
    case strataInt64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case strataUint64: return static_cast<double>(static_cast<const uint64_t*>(p)[i]);
    case strataFloat16: return halfToFloat(static_cast<const uint16_t*>(p)[i]);
    case strataBfloat16: return bf16ToFloat(static_cast<const uint16_t*>(p)[i]);
    case strataFloat32: return static_cast<const float*>(p)[i];
    case strataFloat64: return static_cast<const double*>(p)[i];
    case strataFloat8e4m3: return e4m3ToFloat(static_cast<const uint8_t*>(p)[i]);
    case strataFloat8e5m2: return e5m2ToFloat(static_cast<const uint8_t*>(p)[i]);
    default: return 0;
  }
}

/// Relative rounding of one conversion to the type (0 for integer types).
inline double roundingEpsilon(strataDataType_t t) {
  switch (t) {
    case strataFloat16: return 1.0 / 1024;
    case strataBfloat16: return 1.0 / 128;
    case strataFloat32: return 1.0 / (1 << 23);
    case strataFloat64: return 1e-15;
    case strataFloat8e4m3: return 1.0 / 8;
    case strataFloat8e5m2: return 1.0 / 4;
    default: return 0;
  }
}

}  // namespace strata::kernels
