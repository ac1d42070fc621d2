// host_isa.h: which instruction-set variant of the host kernels (host_reduce.h) runs. The best one
// the CPU supports is picked at first use; tests and micro-benchmarks may force another to check
// or measure each variant. Internal to strata.
#pragma once

#include <cstdint>

namespace strata::kernels {

enum class HostIsa : uint8_t {
  Generic,  ///< portable C++ (SSE2 on x86-64), auto-vectorised
  Avx2,     ///< AVX2 + F16C (fp16 through the hardware converters)
  Avx512,   ///< Avx2, plus AVX-512 (BW, VBMI, BF16) for fp8 sums (reduce_fp8_avx512.h)
};

/// The best variant this CPU supports.
HostIsa hostIsaBest();
/// The variant in use (hostIsaBest() unless forced).
HostIsa hostIsa();
/// Forces a variant for the whole process; false (and no change) if the CPU lacks it.
bool setHostIsa(HostIsa isa);
/// "generic", "avx2" or "avx512".
const char* hostIsaName(HostIsa isa);

}  // namespace strata::kernels
