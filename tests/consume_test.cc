// consume_test.cc: the consuming kernels (kernels/consume.h). consumeCopy and consumeReduce must give
// exactly what memcpy and reduce() give, for every size class (empty, under a line, whole lines,
// ragged tails, several 4 KiB blocks), unaligned pointers and each instruction-set variant, and
// must write nothing outside the source range they consume (guard bytes on both sides).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/consume.h"
#include "kernels/host_isa.h"
#include "kernels/host_reduce.h"

namespace sk = strata::kernels;

namespace {

constexpr size_t kGuard = 128;
constexpr unsigned char kGuardByte = 0xA5;

std::vector<unsigned char> pattern(size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<unsigned char>(x >> 24);
  }
  return v;
}

/// A buffer with guard bytes before and after `n` payload bytes starting `skew` bytes off a
/// 64-byte boundary.
struct Guarded {
  Guarded(size_t n, size_t skew) : n(n), skew(skew), mem(n + 2 * kGuard + 64, kGuardByte) {}
  unsigned char* data() { return alignedBase() + kGuard + skew; }
  bool guardsIntact() {
    unsigned char* base = alignedBase();
    for (size_t i = 0; i < kGuard + skew; ++i)
      if (base[i] != kGuardByte) return false;
    for (size_t i = 0; i < kGuard - skew; ++i)
      if (data()[n + i] != kGuardByte) return false;
    return true;
  }
  unsigned char* alignedBase() {
    auto p = reinterpret_cast<uintptr_t>(mem.data());
    return reinterpret_cast<unsigned char*>((p + 63) & ~uintptr_t(63));
  }
  size_t n, skew;
  std::vector<unsigned char> mem;
};

// memcpy and memcmp must not get a null pointer, even for 0 bytes (an empty vector's data() may be).
void copyBytes(void* dst, const void* src, size_t n) {
  if (n) std::memcpy(dst, src, n);
}
bool sameBytes(const void* a, const void* b, size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }

std::vector<sk::HostIsa> variants() {
  std::vector<sk::HostIsa> v{sk::HostIsa::Generic};
  if (sk::hostIsaBest() != sk::HostIsa::Generic) v.push_back(sk::HostIsa::Avx2);  // AVX-512 machines have AVX2
  if (sk::hostIsaBest() == sk::HostIsa::Avx512) v.push_back(sk::HostIsa::Avx512);
  return v;
}

struct IsaGuard {
  explicit IsaGuard(sk::HostIsa isa) { EXPECT_TRUE(sk::setHostIsa(isa)); }
  ~IsaGuard() { sk::setHostIsa(sk::hostIsaBest()); }
};

const size_t kSizes[] = {0, 1, 7, 8, 9, 63, 64, 65, 127, 128, 129, 200, 4095, 4096, 4097, 3 * 4096 + 72, 65536 + 13};

TEST(ConsumeCopy, EqualsMemcpyAndStaysInsideItsSource) {
  for (sk::HostIsa isa : variants()) {
    IsaGuard scope(isa);
    for (size_t n : kSizes)
      for (size_t skew : {size_t(0), size_t(1), size_t(8), size_t(37)}) {
        SCOPED_TRACE(testing::Message() << sk::hostIsaName(isa) << " bytes " << n << " skew " << skew);
        const std::vector<unsigned char> want = pattern(n, static_cast<unsigned>(n + skew));
        Guarded src(n, skew), dst(n, (skew * 3) % 64);
        copyBytes(src.data(), want.data(), n);
        sk::consumeCopy(dst.data(), src.data(), n);
        EXPECT_TRUE(sameBytes(dst.data(), want.data(), n));
        EXPECT_TRUE(dst.guardsIntact());
        EXPECT_TRUE(src.guardsIntact()) << "wrote outside the consumed source";
      }
  }
}

TEST(ConsumeReduce, EqualsReduceForEveryTypeClass) {
  const strataDataType_t types[] = {strataInt8, strataInt32, strataUint64, strataFloat16,
                                    strataBfloat16, strataFloat32, strataFloat64, strataFloat8e4m3};
  for (sk::HostIsa isa : variants()) {
    IsaGuard scope(isa);
    for (strataDataType_t t : types)
      for (sk::RedKind op : {sk::RedKind::Sum, sk::RedKind::Max})
        for (size_t count : {size_t(0), size_t(1), size_t(31), size_t(1000), size_t(5000), size_t(20011)})
          for (bool aliasA : {false, true}) {
            const size_t es = sk::dtypeSize(t), n = count * es;
            SCOPED_TRACE(testing::Message() << sk::hostIsaName(isa) << " " << sk::dtypeName(t) << " op "
                                            << int(op) << " count " << count << (aliasA ? " dst=a" : ""));
            // Small values so that narrow floats stay finite and sums are exact enough to be
            // compared bit for bit with reduce() anyway (same rounding by construction).
            std::vector<unsigned char> a = pattern(n, unsigned(count + 1)), b = pattern(n, unsigned(count + 2));
            if (sk::dtypeIsFloat(t))
              for (size_t i = 0; i < n; ++i) {
                a[i] &= 0x3f;
                b[i] &= 0x3f;
              }
            std::vector<unsigned char> want(n);
            sk::reduce(want.data(), a.data(), b.data(), count, t, op);
            Guarded src(n, es % 64), dst(n, 0);
            copyBytes(src.data(), b.data(), n);
            copyBytes(dst.data(), a.data(), n);
            const void* opA = aliasA ? static_cast<const void*>(dst.data()) : a.data();
            sk::consumeReduce(dst.data(), opA, src.data(), count, t, op);
            EXPECT_TRUE(sameBytes(dst.data(), want.data(), n));
            EXPECT_TRUE(dst.guardsIntact());
            EXPECT_TRUE(src.guardsIntact()) << "wrote outside the consumed source";
          }
  }
}

TEST(ConsumeReduce, InvalidTypeIsANoOp) {
  int32_t a[4] = {1, 2, 3, 4}, s[4] = {5, 6, 7, 8}, d[4] = {9, 9, 9, 9};
  sk::consumeReduce(d, a, s, 4, strataNumTypes, sk::RedKind::Sum);
  for (int v : d) EXPECT_EQ(v, 9);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(s[i], 5 + i);
}

}  // namespace
