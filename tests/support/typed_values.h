// typed_values.h: test-side names for the element helpers of kernels/element_value.h.
#pragma once

#include "kernels/element_value.h"

namespace strata::testing {

using kernels::loadElement;
using kernels::storeElement;
inline void storeValue(strataDataType_t t, void* p, size_t i, double v) { storeElement(t, p, i, v); }
inline double loadValue(strataDataType_t t, const void* p, size_t i) { return loadElement(t, p, i); }
inline double typeEpsilon(strataDataType_t t) { return kernels::roundingEpsilon(t); }

}  // namespace strata::testing
