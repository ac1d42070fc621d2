// dev_sync.h: the memory operations of the connection FIFOs, for CUDA device code and for the host
// emulation of the kernels: acquire/release counters, system-scope fences, and the LL protocol's
// 16-byte lines (two 8-byte halves of {4 data bytes, 4 flag bytes}; each half is one atomic
// store, so a reader that sees the flag in both halves sees both data words).
#pragma once

#include <cstdint>

#include "kernels/hd.h"

namespace strata::dev {

STRATA_HD_INLINE uint64_t loadAcquire(const uint64_t* p) {
#if defined(__CUDA_ARCH__)
  uint64_t v;
  asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

STRATA_HD_INLINE void storeRelease(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

/// Orders this thread's earlier writes (to peer memory too) before its later ones, system-wide.
STRATA_HD_INLINE void fenceSystem() {
#if defined(__CUDA_ARCH__)
  __threadfence_system();
#else
  __atomic_thread_fence(__ATOMIC_RELEASE);
#endif
}

/// Reads a flag another agent raises (the abort flag: the host's watchdog or proxy). On the host an
/// atomic load, as the writers' (__atomic_store_n): a plain volatile read there is a data race.
STRATA_HD_INLINE uint32_t loadVolatile32(const volatile uint32_t* p) {
  if (!p) return 0u;
#if defined(__CUDA_ARCH__)
  return *p;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

/// Writes 8 data bytes with `flag` into one 16-byte LL line.
STRATA_HD_INLINE void storeLL(uint64_t* line, uint64_t data, uint32_t flag) {
  const uint32_t lo = uint32_t(data), hi = uint32_t(data >> 32);
#if defined(__CUDA_ARCH__)
  asm volatile("st.volatile.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(line), "r"(lo), "r"(flag), "r"(hi), "r"(flag)
               : "memory");
#else
  __atomic_store_n(&line[0], uint64_t(lo) | (uint64_t(flag) << 32), __ATOMIC_RELAXED);
  __atomic_store_n(&line[1], uint64_t(hi) | (uint64_t(flag) << 32), __ATOMIC_RELAXED);
#endif
}

/// Reads one LL line; true (and *data set) once both halves carry `flag`.
STRATA_HD_INLINE bool loadLL(const uint64_t* line, uint32_t flag, uint64_t* data) {
  uint32_t d0, f0, d1, f1;
#if defined(__CUDA_ARCH__)
  asm volatile("ld.volatile.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(d0), "=r"(f0), "=r"(d1), "=r"(f1) : "l"(line)
               : "memory");
#else
  const uint64_t a = __atomic_load_n(&line[0], __ATOMIC_RELAXED), b = __atomic_load_n(&line[1], __ATOMIC_RELAXED);
  d0 = uint32_t(a), f0 = uint32_t(a >> 32), d1 = uint32_t(b), f1 = uint32_t(b >> 32);
#endif
  if (f0 != flag || f1 != flag) return false;
  *data = uint64_t(d0) | (uint64_t(d1) << 32);
  return true;
}

/// The LL flag of pipeline step `step` (never 0, so a zeroed arena matches no step).
STRATA_HD_INLINE uint32_t llFlag(uint64_t step) { return uint32_t(step) + 1u; }

}  // namespace strata::dev
