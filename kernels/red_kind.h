// red_kind.h: the element-wise operation of a reduction (host and device kernels share it).
#pragma once

#include <cstdint>

namespace strata::kernels {

/// Avg and pre-multiplied sums are built from these by the executors (scale the inputs, sum,
/// divide the outputs).
enum class RedKind : uint8_t { Sum, Prod, Max, Min };

}  // namespace strata::kernels
