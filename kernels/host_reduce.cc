// host_reduce.cc: the host reduction, scaling and conversion kernels declared in host_reduce.h.
//
// Shape: one plain loop per (data type x op) (reduce_loops.h), written over a codec (stored type <->
// compute type) and an op functor, instantiated twice: generic (baseline x86-64, or any CPU) and,
// on x86, AVX2+F16C (the same C++ compiled with target("avx2,f16c"), plus the F16C loops of
// reduce_avx2.h for fp16 and of reduce_fp8_avx2.h for fp8 sum/prod/scale; fp8 max/min compare the
// bytes, fp8_minmax.h), and a third, AVX-512 variant: the AVX2 one with the fp8 sums of
// reduce_fp8_avx512.h. A table of function pointers per variant is chosen once per process
// (host_isa.h), so a call costs one indexed load and no switch runs per element. Loops access
// memory through memcpy, so any byte alignment works, and GCC vectorises them with unaligned loads.
// dst == a or dst == b is allowed: every element is read before it is written, and GCC's runtime
// alias check accepts equal pointers.
//
// Semantics (plain reference: tests/kernels_test.cc):
//   - integers: Sum and Prod wrap (computed in the unsigned type); Max/Min compare as the type.
//   - floats: Max(a, b) = (a > b || a is NaN) ? a : b; Min likewise with <. So a NaN in either input
//     gives NaN (its payload and quiet bit are not specified), and for equal values (+0 vs -0) b is
//     returned.
//   - fp16/bf16/fp8: decode to float, op in float, round to nearest even back. Two float results
//     rounded once more are still correctly rounded (float has > 2p+2 bits), so Sum/Prod/scale/
//     divide give the correctly rounded result of the exact operation.
//   - divide(n): integers truncate toward zero; fp32/fp64 divide in double, narrow floats in float
//     (exact for n < 2^24). n <= 0 leaves dst unchanged.
//   - an invalid dtype or op is a no-op (the executor validates arguments before calling).
#include "kernels/host_reduce.h"

#include <atomic>
#include <cstring>
#include <type_traits>

#include "kernels/float_convert.h"
#include "kernels/host_isa.h"
#include "kernels/reduce_avx2.h"
#include "kernels/reduce_fp8_avx2.h"
#include "kernels/reduce_fp8_avx512.h"
#include "kernels/reduce_loops.h"

#ifndef STRATA_KERNELS_X86  // -DSTRATA_KERNELS_X86=0: the portable kernels only (the fuzz build, tests/fuzz)
#if defined(__x86_64__) || defined(__i386__)
#define STRATA_KERNELS_X86 1
#else
#define STRATA_KERNELS_X86 0
#endif
#endif

namespace strata::kernels {
namespace {

using namespace detail;
constexpr int kNumTypes = strataNumTypes;
constexpr int kNumOps = 4;

// ---- variants ----

using ReduceFn = void (*)(void*, const void*, const void*, size_t);
using ScaleFn = void (*)(void*, const void*, size_t, const void*);
using DivideFn = void (*)(void*, size_t, int);

struct KernelTable {
  ReduceFn reduce[kNumTypes][kNumOps];
  ScaleFn scale[kNumTypes];
  DivideFn divide[kNumTypes];
};

#define STRATA_DEFINE_VARIANT(NAME, ATTR)                                                                  \
  template <class Cd, RedKind K>                                                                           \
  ATTR void reduce##NAME(void* d, const void* a, const void* b, size_t n) {                                \
    reduceBody<Cd, K>(static_cast<Byte*>(d), static_cast<const Byte*>(a), static_cast<const Byte*>(b), n); \
  }                                                                                                        \
  template <class Cd>                                                                                      \
  ATTR void scale##NAME(void* d, const void* s, size_t n, const void* k) {                                 \
    scaleBody<Cd>(static_cast<Byte*>(d), static_cast<const Byte*>(s), n, static_cast<const Byte*>(k));     \
  }                                                                                                        \
  template <class Cd>                                                                                      \
  ATTR void divide##NAME(void* d, size_t n, int div) {                                                     \
    divideBody<Cd>(static_cast<Byte*>(d), n, div);                                                         \
  }

STRATA_DEFINE_VARIANT(Generic, )

#if STRATA_KERNELS_X86
STRATA_DEFINE_VARIANT(Avx2, STRATA_AVX2)
#endif

template <class Cd, bool kAvx2>
constexpr void fillRow(KernelTable& t, strataDataType_t dt) {
#if STRATA_KERNELS_X86
  if constexpr (kAvx2 && std::is_same_v<Cd, Half>) {
    t.reduce[dt][0] = reduceHalfF16c<RedKind::Sum>;
    t.reduce[dt][1] = reduceHalfF16c<RedKind::Prod>;
    t.reduce[dt][2] = reduceHalfF16c<RedKind::Max>;
    t.reduce[dt][3] = reduceHalfF16c<RedKind::Min>;
    t.scale[dt] = scaleHalfF16c;
    t.divide[dt] = divideHalfF16c;
    return;
  } else if constexpr (kAvx2 && (std::is_same_v<Cd, E4m3> || std::is_same_v<Cd, E5m2>)) {
    t.reduce[dt][0] = reduceFp8F16c<Cd, RedKind::Sum>;
    t.reduce[dt][1] = reduceFp8F16c<Cd, RedKind::Prod>;
    t.reduce[dt][2] = reduceAvx2<Cd, RedKind::Max>;  // on the bytes (fp8_minmax.h)
    t.reduce[dt][3] = reduceAvx2<Cd, RedKind::Min>;
    t.scale[dt] = scaleFp8F16c<Cd>;
    t.divide[dt] = divideAvx2<Cd>;
    return;
  } else if constexpr (kAvx2) {
    t.reduce[dt][0] = reduceAvx2<Cd, RedKind::Sum>;
    t.reduce[dt][1] = reduceAvx2<Cd, RedKind::Prod>;
    t.reduce[dt][2] = reduceAvx2<Cd, RedKind::Max>;
    t.reduce[dt][3] = reduceAvx2<Cd, RedKind::Min>;
    t.scale[dt] = scaleAvx2<Cd>;
    t.divide[dt] = divideAvx2<Cd>;
    return;
  }
#endif
  t.reduce[dt][0] = reduceGeneric<Cd, RedKind::Sum>;
  t.reduce[dt][1] = reduceGeneric<Cd, RedKind::Prod>;
  t.reduce[dt][2] = reduceGeneric<Cd, RedKind::Max>;
  t.reduce[dt][3] = reduceGeneric<Cd, RedKind::Min>;
  t.scale[dt] = scaleGeneric<Cd>;
  t.divide[dt] = divideGeneric<Cd>;
}

enum class Variant { Generic, Avx2, Avx512 };

template <Variant V>
constexpr KernelTable makeTable() {
  constexpr bool kAvx2 = V != Variant::Generic;
  KernelTable t{};
  fillRow<Plain<int8_t>, kAvx2>(t, strataInt8);
  fillRow<Plain<uint8_t>, kAvx2>(t, strataUint8);
  fillRow<Plain<int32_t>, kAvx2>(t, strataInt32);
  fillRow<Plain<uint32_t>, kAvx2>(t, strataUint32);
  fillRow<Plain<int64_t>, kAvx2>(t, strataInt64);
  fillRow<Plain<uint64_t>, kAvx2>(t, strataUint64);
  fillRow<Half, kAvx2>(t, strataFloat16);
  fillRow<Plain<float>, kAvx2>(t, strataFloat32);
  fillRow<Plain<double>, kAvx2>(t, strataFloat64);
  fillRow<Bf16, kAvx2>(t, strataBfloat16);
  fillRow<E4m3, kAvx2>(t, strataFloat8e4m3);
  fillRow<E5m2, kAvx2>(t, strataFloat8e5m2);
#if STRATA_KERNELS_X86
  if constexpr (V == Variant::Avx512) {
    t.reduce[strataFloat8e4m3][0] = reduceFp8SumAvx512<E4m3>;
    t.reduce[strataFloat8e5m2][0] = reduceFp8SumAvx512<E5m2>;
  }
#endif
  return t;
}

constexpr KernelTable kGenericTable = makeTable<Variant::Generic>();
constexpr KernelTable kAvx2Table = makeTable<Variant::Avx2>();
constexpr KernelTable kAvx512Table = makeTable<Variant::Avx512>();

const KernelTable* tableFor(HostIsa isa) {
  if (isa == HostIsa::Avx512) return &kAvx512Table;
  return isa == HostIsa::Avx2 ? &kAvx2Table : &kGenericTable;
}

std::atomic<const KernelTable*>& activeTable() {
  static std::atomic<const KernelTable*> table{tableFor(hostIsaBest())};
  return table;
}

bool validType(strataDataType_t t) { return int(t) >= 0 && int(t) < kNumTypes; }

}  // namespace

HostIsa hostIsaBest() {
#if STRATA_KERNELS_X86
  static const HostIsa best = [] {
    __builtin_cpu_init();  // in case we run before libgcc's constructor (static initialisers)
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("f16c")) return HostIsa::Generic;
    // libgcc checks that the OS saves the AVX-512 state too.
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bf16");
    return avx512 ? HostIsa::Avx512 : HostIsa::Avx2;
  }();
  return best;
#else
  return HostIsa::Generic;
#endif
}

HostIsa hostIsa() {
  const KernelTable* t = activeTable().load(std::memory_order_relaxed);
  if (t == &kAvx512Table) return HostIsa::Avx512;
  return t == &kAvx2Table ? HostIsa::Avx2 : HostIsa::Generic;
}

bool setHostIsa(HostIsa isa) {
  if (int(isa) > int(hostIsaBest())) return false;  // each variant needs what the one before needs
  activeTable().store(tableFor(isa), std::memory_order_relaxed);
  return true;
}

const char* hostIsaName(HostIsa isa) {
  if (isa == HostIsa::Avx512) return "avx512";
  return isa == HostIsa::Avx2 ? "avx2" : "generic";
}

size_t dtypeSize(strataDataType_t dtype) {
  static constexpr size_t kSizes[kNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return validType(dtype) ? kSizes[dtype] : 0;
}

const char* dtypeName(strataDataType_t dtype) {
  static constexpr const char* kNames[kNumTypes] = {"int8", "uint8", "int32", "uint32", "int64",   "uint64",
                                                    "fp16", "fp32",  "fp64",  "bf16",   "fp8e4m3", "fp8e5m2"};
  return validType(dtype) ? kNames[dtype] : "invalid";
}

bool dtypeIsFloat(strataDataType_t dtype) { return validType(dtype) && dtype >= strataFloat16; }

void reduce(void* dst, const void* a, const void* b, size_t count, strataDataType_t dtype, RedKind op) {
  if (count == 0 || !validType(dtype) || int(op) >= kNumOps) return;
  activeTable().load(std::memory_order_relaxed)->reduce[dtype][int(op)](dst, a, b, count);
}

void scale(void* dst, const void* src, size_t count, strataDataType_t dtype, const void* scalar) {
  if (count == 0 || !validType(dtype)) return;
  activeTable().load(std::memory_order_relaxed)->scale[dtype](dst, src, count, scalar);
}

void divide(void* dst, size_t count, strataDataType_t dtype, int n) {
  if (count == 0 || !validType(dtype) || n <= 0) return;
  activeTable().load(std::memory_order_relaxed)->divide[dtype](dst, count, n);
}

void copy(void* dst, const void* src, size_t bytes) {
  if (bytes != 0 && dst != src) std::memcpy(dst, src, bytes);
}

float halfToFloat(uint16_t h) { return fc::halfToFloat(h); }
uint16_t floatToHalf(float f) { return fc::floatToHalf(f); }
float bf16ToFloat(uint16_t b) { return fc::bf16ToFloat(b); }
uint16_t floatToBf16(float f) { return fc::floatToBf16(f); }
float e4m3ToFloat(uint8_t v) { return fc::e4m3ToFloat(v); }
uint8_t floatToE4m3(float f) { return fc::floatToE4m3(f); }
float e5m2ToFloat(uint8_t v) { return fc::e5m2ToFloat(v); }
uint8_t floatToE5m2(float f) { return fc::floatToE5m2(f); }

}  // namespace strata::kernels
