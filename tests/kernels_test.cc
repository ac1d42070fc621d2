// kernels_test.cc: the host kernels (kernels/host_reduce.h) against a plain scalar reference written
// here, independently of the kernels: narrow floats are decoded with ldexp and rounded with
// frexp/nearbyint in double, integers wrap by masking. Every dtype x op runs on each instruction-set
// variant (host_isa.h), for several counts, aliased and unaligned; conversions are checked
// exhaustively. Results are compared bit for bit, except that a NaN only has to be some NaN.
//
// Run: ./build/tests/kernels_test [--gtest_filter=Reduce*fp16*]
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/host_isa.h"
#include "kernels/host_reduce.h"

namespace sk = strata::kernels;
using sk::HostIsa;
using sk::RedKind;

namespace {

// ---------------------------------------------------------------------------------------------
// Reference formats
// ---------------------------------------------------------------------------------------------

/// A narrow float format: exponent bits, mantissa bits, and whether the top exponent is inf/NaN
/// (IEEE-like) or, as in OCP e4m3, only S.1111.111 is NaN and there is no inf.
struct Fmt {
  int exp, mant;
  bool ieee;
};
constexpr Fmt kHalfFmt{5, 10, true}, kBf16Fmt{8, 7, true}, kE4m3Fmt{4, 3, false}, kE5m2Fmt{5, 2, true};

int biasOf(Fmt f) { return (1 << (f.exp - 1)) - 1; }
uint32_t signBitOf(Fmt f) { return 1u << (f.exp + f.mant); }
uint32_t overflowCode(Fmt f) { return f.ieee ? ((1u << f.exp) - 1) << f.mant : signBitOf(f) - 1; }
uint32_t maxFiniteCode(Fmt f) { return f.ieee ? overflowCode(f) - 1 : signBitOf(f) - 2; }

double refDecode(uint32_t bits, Fmt f) {
  const uint32_t mantMask = (1u << f.mant) - 1, expMax = (1u << f.exp) - 1;
  const bool neg = (bits >> (f.exp + f.mant)) & 1;
  const uint32_t e = (bits >> f.mant) & expMax, m = bits & mantMask;
  double v;
  if (f.ieee && e == expMax)
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (!f.ieee && e == expMax && m == mantMask)
    v = std::numeric_limits<double>::quiet_NaN();
  else if (e == 0)
    v = std::ldexp(double(m), 1 - biasOf(f) - f.mant);
  else
    v = std::ldexp(double(m | (1u << f.mant)), int(e) - biasOf(f) - f.mant);
  return neg ? -v : v;
}

/// Round x to the format, nearest even; overflow to inf (IEEE-like) or NaN (e4m3).
uint32_t refEncode(double x, Fmt f) {
  if (std::isnan(x)) return overflowCode(f) | (f.ieee ? 1u << (f.mant - 1) : 0);
  const uint32_t sign = std::signbit(x) ? signBitOf(f) : 0;
  const double a = std::fabs(x);
  if (std::isinf(a)) return sign | overflowCode(f);
  if (a == 0) return sign;
  int ex;
  std::frexp(a, &ex);                                // a = fr * 2^ex, fr in [0.5, 1)
  int q = std::max(ex - 1, 1 - biasOf(f)) - f.mant;  // weight of the last kept bit
  double r = std::nearbyint(std::ldexp(a, -q));      // ties to even (default rounding mode)
  if (r == std::ldexp(1.0, f.mant + 1)) {
    r /= 2;
    ++q;
  }
  uint64_t code;
  if (r < std::ldexp(1.0, f.mant))
    code = uint64_t(r);  // subnormal or zero
  else
    code = (uint64_t(q + f.mant + biasOf(f)) << f.mant) | (uint64_t(r) - (1u << f.mant));
  if (code > maxFiniteCode(f)) code = overflowCode(f);
  return sign | uint32_t(code);
}

// ---------------------------------------------------------------------------------------------
// Reference element operations on raw bits (uint64_t holds one element of any type)
// ---------------------------------------------------------------------------------------------

enum class Kind { SInt, UInt, F32, F64, Narrow };
struct TypeInfo {
  strataDataType_t dt;
  size_t size;
  Kind kind;
  Fmt fmt;
  const char* name;
};
const TypeInfo kTypes[] = {
    {strataInt8, 1, Kind::SInt, {}, "int8"},
    {strataUint8, 1, Kind::UInt, {}, "uint8"},
    {strataInt32, 4, Kind::SInt, {}, "int32"},
    {strataUint32, 4, Kind::UInt, {}, "uint32"},
    {strataInt64, 8, Kind::SInt, {}, "int64"},
    {strataUint64, 8, Kind::UInt, {}, "uint64"},
    {strataFloat16, 2, Kind::Narrow, kHalfFmt, "fp16"},
    {strataFloat32, 4, Kind::F32, {}, "fp32"},
    {strataFloat64, 8, Kind::F64, {}, "fp64"},
    {strataBfloat16, 2, Kind::Narrow, kBf16Fmt, "bf16"},
    {strataFloat8e4m3, 1, Kind::Narrow, kE4m3Fmt, "fp8e4m3"},
    {strataFloat8e5m2, 1, Kind::Narrow, kE5m2Fmt, "fp8e5m2"},
};
constexpr RedKind kOps[] = {RedKind::Sum, RedKind::Prod, RedKind::Max, RedKind::Min};
const char* opName(RedKind op) {
  static const char* names[] = {"Sum", "Prod", "Max", "Min"};
  return names[int(op)];
}

uint64_t maskOf(const TypeInfo& t) { return t.size == 8 ? ~uint64_t(0) : (uint64_t(1) << (8 * t.size)) - 1; }
int64_t signExtend(const TypeInfo& t, uint64_t v) {
  const int shift = 64 - 8 * int(t.size);
  return int64_t(v << shift) >> shift;
}
bool isFloatKind(const TypeInfo& t) { return t.kind != Kind::SInt && t.kind != Kind::UInt; }

double toDouble(const TypeInfo& t, uint64_t v) {
  switch (t.kind) {
    case Kind::F32:
      return double(std::bit_cast<float>(uint32_t(v)));
    case Kind::F64:
      return std::bit_cast<double>(v);
    case Kind::Narrow:
      return refDecode(uint32_t(v), t.fmt);
    default:
      return 0;
  }
}
uint64_t fromDouble(const TypeInfo& t, double d) {
  switch (t.kind) {
    case Kind::F32:
      return std::bit_cast<uint32_t>(float(d));
    case Kind::F64:
      return std::bit_cast<uint64_t>(d);
    case Kind::Narrow:
      return refEncode(d, t.fmt);
    default:
      return 0;
  }
}
bool isNaNBits(const TypeInfo& t, uint64_t v) { return isFloatKind(t) && std::isnan(toDouble(t, v)); }

/// Documented semantics: Max(a, b) = (a > b || a is NaN) ? a : b, Min likewise.
uint64_t refOp(const TypeInfo& t, RedKind op, uint64_t x, uint64_t y) {
  if (!isFloatKind(t)) {
    const uint64_t m = maskOf(t);
    switch (op) {
      case RedKind::Sum:
        return (x + y) & m;
      case RedKind::Prod:
        return (x * y) & m;
      case RedKind::Max:
        if (t.kind == Kind::SInt) return signExtend(t, x) > signExtend(t, y) ? x : y;
        return x > y ? x : y;
      case RedKind::Min:
        if (t.kind == Kind::SInt) return signExtend(t, x) < signExtend(t, y) ? x : y;
        return x < y ? x : y;
    }
  }
  const double a = toDouble(t, x), b = toDouble(t, y);
  double r = 0;
  switch (op) {
    case RedKind::Sum:
      r = a + b;
      break;
    case RedKind::Prod:
      r = a * b;
      break;
    case RedKind::Max:
      r = (a > b || std::isnan(a)) ? a : b;
      break;
    case RedKind::Min:
      r = (a < b || std::isnan(a)) ? a : b;
      break;
  }
  return fromDouble(t, r);
}

uint64_t refDivide(const TypeInfo& t, uint64_t x, int n) {
  if (t.kind == Kind::SInt) return uint64_t(signExtend(t, x) / int64_t(n)) & maskOf(t);
  if (t.kind == Kind::UInt) return x / uint64_t(n);
  return fromDouble(t, toDouble(t, x) / n);
}

/// Exact bits, except that an expected NaN only needs a NaN.
bool sameResult(const TypeInfo& t, uint64_t got, uint64_t want) {
  if (isNaNBits(t, want)) return isNaNBits(t, got);
  return got == want;
}

uint64_t loadElem(const unsigned char* p, size_t size) {
  uint64_t v = 0;
  std::memcpy(&v, p, size);  // little endian
  return v;
}
void storeElem(unsigned char* p, size_t size, uint64_t v) { std::memcpy(p, &v, size); }

/// Random element: half raw bit patterns (every special value), half moderate values that round.
uint64_t randomElem(const TypeInfo& t, std::mt19937_64& rng) {
  const uint64_t raw = rng() & maskOf(t);
  if (!isFloatKind(t) || (rng() & 1)) return raw;
  std::uniform_real_distribution<double> dist(-8.0, 8.0);
  const double d = dist(rng) * ((rng() & 3) == 0 ? 1000.0 : 1.0);
  if (t.kind == Kind::F64) return std::bit_cast<uint64_t>(d);
  return fromDouble(t, d);
}

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

/// A byte buffer holding `count` elements at byte offset `offset`, with guard bytes around.
struct Buf {
  static constexpr unsigned char kGuard = 0xA5;
  std::vector<unsigned char> bytes;
  size_t offset, len;
  Buf(size_t count, size_t size, size_t off) : bytes(count * size + off + 64, kGuard), offset(off), len(count * size) {}
  unsigned char* data() { return bytes.data() + offset; }
  bool guardsIntact() const {
    for (size_t i = 0; i < bytes.size(); ++i)
      if ((i < offset || i >= offset + len) && bytes[i] != kGuard) return false;
    return true;
  }
};

// ---------------------------------------------------------------------------------------------
// Fixture: one instruction-set variant per test
// ---------------------------------------------------------------------------------------------

class IsaScope {
 public:
  explicit IsaScope(HostIsa isa) : saved_(sk::hostIsa()), ok_(sk::setHostIsa(isa)) {}
  ~IsaScope() { sk::setHostIsa(saved_); }
  bool ok() const { return ok_; }

 private:
  HostIsa saved_;
  bool ok_;
};

#define REQUIRE_ISA(scope, isa) \
  if (!(scope).ok()) GTEST_SKIP() << "CPU lacks the " << sk::hostIsaName(isa) << " variant"

constexpr HostIsa kIsas[] = {HostIsa::Generic, HostIsa::Avx2, HostIsa::Avx512};
constexpr size_t kCounts[] = {0, 1, 3, 17, 1000, 4099};

// ---------------------------------------------------------------------------------------------
// reduce: every dtype x op x variant
// ---------------------------------------------------------------------------------------------

using ReduceParam = std::tuple<int, RedKind, HostIsa>;
class ReduceTest : public ::testing::TestWithParam<ReduceParam> {};

enum class Alias { None, DstA, DstB, DstAB };

TEST_P(ReduceTest, MatchesReference) {
  const auto [ti, op, isa] = GetParam();
  const TypeInfo& t = kTypes[ti];
  IsaScope scope(isa);
  REQUIRE_ISA(scope, isa);
  std::mt19937_64 rng(1234 + ti * 16 + int(op));
  struct Offsets {
    size_t d, a, b;
  };
  const Offsets offsets[] = {{0, 0, 0}, {1, 3, 5}, {7, 2, 0}};
  for (size_t count : kCounts) {
    for (const Offsets& off : offsets) {
      for (Alias alias : {Alias::None, Alias::DstA, Alias::DstB, Alias::DstAB}) {
        Buf A(count, t.size, off.a), B(count, t.size, off.b), D(count, t.size, off.d);
        std::vector<uint64_t> xs(count), ys(count), want(count);
        for (size_t i = 0; i < count; ++i) {
          xs[i] = randomElem(t, rng);
          ys[i] = alias == Alias::DstAB ? xs[i] : randomElem(t, rng);
          want[i] = refOp(t, op, xs[i], ys[i]);
          storeElem(A.data() + i * t.size, t.size, xs[i]);
          storeElem(B.data() + i * t.size, t.size, ys[i]);
        }
        unsigned char* a = A.data();
        unsigned char* b = B.data();
        unsigned char* d = D.data();
        Buf* out = &D;
        if (alias == Alias::DstA) d = a, out = &A;
        if (alias == Alias::DstB) d = b, out = &B;
        if (alias == Alias::DstAB) b = a, d = a, out = &A;
        sk::reduce(count ? d : nullptr, count ? a : nullptr, count ? b : nullptr, count, t.dt, op);
        ASSERT_TRUE(out->guardsIntact()) << "wrote outside dst, count " << count;
        for (size_t i = 0; i < count; ++i) {
          const uint64_t got = loadElem(d + i * t.size, t.size);
          ASSERT_TRUE(sameResult(t, got, want[i]))
              << t.name << " " << opName(op) << " count " << count << " alias " << int(alias) << " offset " << off.d
              << " elem " << i << ": " << hex(xs[i]) << " op " << hex(ys[i]) << " = " << hex(got) << ", want "
              << hex(want[i]);
        }
      }
    }
  }
}

std::string paramName(const ::testing::TestParamInfo<ReduceParam>& info) {
  const auto [ti, op, isa] = info.param;
  return std::string(kTypes[ti].name) + "_" + opName(op) + "_" + sk::hostIsaName(isa);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ReduceTest,
                         ::testing::Combine(::testing::Range(0, int(std::size(kTypes))), ::testing::ValuesIn(kOps),
                                            ::testing::ValuesIn(kIsas)),
                         paramName);

// ---------------------------------------------------------------------------------------------
// scale and divide: every dtype x variant
// ---------------------------------------------------------------------------------------------

using TypeIsaParam = std::tuple<int, HostIsa>;
class ScaleDivideTest : public ::testing::TestWithParam<TypeIsaParam> {};

TEST_P(ScaleDivideTest, ScaleMatchesReference) {
  const auto [ti, isa] = GetParam();
  const TypeInfo& t = kTypes[ti];
  IsaScope scope(isa);
  REQUIRE_ISA(scope, isa);
  std::mt19937_64 rng(99 + ti);
  std::vector<uint64_t> scalars = {randomElem(t, rng), randomElem(t, rng)};
  if (isFloatKind(t)) {
    for (double s : {0.5, 3.0, -1.25, 1.0 / 3.0}) scalars.push_back(fromDouble(t, s));
  } else {
    scalars.push_back(3);
    scalars.push_back(maskOf(t));  // -1 or the max unsigned
  }
  for (uint64_t scalar : scalars) {
    for (size_t count : kCounts) {
      for (bool inPlace : {false, true}) {
        Buf S(count, t.size, 3), D(count, t.size, 1), K(1, t.size, 5);
        storeElem(K.data(), t.size, scalar);
        std::vector<uint64_t> xs(count), want(count);
        for (size_t i = 0; i < count; ++i) {
          xs[i] = randomElem(t, rng);
          want[i] = refOp(t, RedKind::Prod, xs[i], scalar);
          storeElem(S.data() + i * t.size, t.size, xs[i]);
        }
        unsigned char* d = inPlace ? S.data() : D.data();
        sk::scale(d, S.data(), count, t.dt, K.data());
        ASSERT_TRUE((inPlace ? S : D).guardsIntact());
        for (size_t i = 0; i < count; ++i) {
          const uint64_t got = loadElem(d + i * t.size, t.size);
          ASSERT_TRUE(sameResult(t, got, want[i]))
              << t.name << " count " << count << " elem " << i << ": " << hex(xs[i]) << " * " << hex(scalar) << " = "
              << hex(got) << ", want " << hex(want[i]);
        }
      }
    }
  }
}

TEST_P(ScaleDivideTest, DivideMatchesReference) {
  const auto [ti, isa] = GetParam();
  const TypeInfo& t = kTypes[ti];
  IsaScope scope(isa);
  REQUIRE_ISA(scope, isa);
  std::mt19937_64 rng(7 + ti);
  for (int n : {1, 2, 3, 7, 8, 1000}) {
    for (size_t count : kCounts) {
      Buf D(count, t.size, 3);
      std::vector<uint64_t> xs(count);
      for (size_t i = 0; i < count; ++i) {
        xs[i] = randomElem(t, rng);
        storeElem(D.data() + i * t.size, t.size, xs[i]);
      }
      sk::divide(D.data(), count, t.dt, n);
      ASSERT_TRUE(D.guardsIntact());
      for (size_t i = 0; i < count; ++i) {
        const uint64_t got = loadElem(D.data() + i * t.size, t.size), want = refDivide(t, xs[i], n);
        ASSERT_TRUE(sameResult(t, got, want)) << t.name << " count " << count << " elem " << i << ": " << hex(xs[i])
                                              << " / " << n << " = " << hex(got) << ", want " << hex(want);
      }
    }
  }
  // n <= 0 is documented to leave dst unchanged.
  Buf D(5, t.size, 0);
  for (size_t i = 0; i < 5; ++i) storeElem(D.data() + i * t.size, t.size, randomElem(t, rng));
  const std::vector<unsigned char> before = D.bytes;
  sk::divide(D.data(), 5, t.dt, 0);
  sk::divide(D.data(), 5, t.dt, -3);
  EXPECT_EQ(before, D.bytes);
}

std::string typeIsaName(const ::testing::TestParamInfo<TypeIsaParam>& info) {
  return std::string(kTypes[std::get<0>(info.param)].name) + "_" + sk::hostIsaName(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ScaleDivideTest,
                         ::testing::Combine(::testing::Range(0, int(std::size(kTypes))), ::testing::ValuesIn(kIsas)),
                         typeIsaName);

// ---------------------------------------------------------------------------------------------
// Conversions
// ---------------------------------------------------------------------------------------------

struct Codec {
  const char* name;
  Fmt fmt;
  int bits;
  float (*dec)(uint32_t);
  uint32_t (*enc)(float);
};
const Codec kCodecs[] = {
    {"fp16", kHalfFmt, 16, [](uint32_t v) { return sk::halfToFloat(uint16_t(v)); },
     [](float f) -> uint32_t { return sk::floatToHalf(f); }},
    {"bf16", kBf16Fmt, 16, [](uint32_t v) { return sk::bf16ToFloat(uint16_t(v)); },
     [](float f) -> uint32_t { return sk::floatToBf16(f); }},
    {"fp8e4m3", kE4m3Fmt, 8, [](uint32_t v) { return sk::e4m3ToFloat(uint8_t(v)); },
     [](float f) -> uint32_t { return sk::floatToE4m3(f); }},
    {"fp8e5m2", kE5m2Fmt, 8, [](uint32_t v) { return sk::e5m2ToFloat(uint8_t(v)); },
     [](float f) -> uint32_t { return sk::floatToE5m2(f); }},
};

class ConvertTest : public ::testing::TestWithParam<int> {};

// Every bit pattern: decode matches the reference exactly; encode(decode(x)) == x; NaN stays NaN.
TEST_P(ConvertTest, ExhaustiveRoundTrip) {
  const Codec& c = kCodecs[GetParam()];
  int nans = 0;
  for (uint32_t v = 0; v < (1u << c.bits); ++v) {
    const float f = c.dec(v);
    const double want = refDecode(v, c.fmt);
    if (std::isnan(want)) {
      ++nans;
      ASSERT_TRUE(std::isnan(f)) << c.name << " " << hex(v);
      ASSERT_TRUE(std::isnan(refDecode(c.enc(f), c.fmt))) << c.name << " NaN " << hex(v) << " -> " << hex(c.enc(f));
      continue;
    }
    ASSERT_EQ(double(f), want) << c.name << " " << hex(v);
    ASSERT_EQ(std::signbit(f), std::signbit(want)) << c.name << " " << hex(v);
    ASSERT_EQ(c.enc(f), v) << c.name << " round trip of " << hex(v);
  }
  // NaN counts: fp16/bf16: 2 * (2^mant - 1); e5m2: 6; e4m3: 2.
  const int wantNans = c.fmt.ieee ? 2 * ((1 << c.fmt.mant) - 1) : 2;
  EXPECT_EQ(nans, wantNans);
}

// Each pair of neighbours: the midpoint ties to the even code; one float ulp either side goes to
// the nearer one. Same with the sign set. Past the largest finite value: inf, or NaN for e4m3.
TEST_P(ConvertTest, HalfwayCasesRoundToEven) {
  const Codec& c = kCodecs[GetParam()];
  const uint32_t maxFinite = maxFiniteCode(c.fmt), sign = signBitOf(c.fmt);
  for (uint32_t k = 0; k <= maxFinite; ++k) {
    const double v0 = refDecode(k, c.fmt);
    const double v1 = k < maxFinite ? refDecode(k + 1, c.fmt) : 2 * v0 - refDecode(k - 1, c.fmt);
    const float mid = float((v0 + v1) / 2);
    ASSERT_EQ(double(mid), (v0 + v1) / 2) << "midpoint not exact in float";
    const uint32_t up = k < maxFinite ? k + 1 : overflowCode(c.fmt);
    const uint32_t tie = (k & 1) ? up : k;
    for (uint32_t s : {0u, sign}) {
      const float m = s ? -mid : mid;
      ASSERT_EQ(c.enc(m), s | tie) << c.name << " tie above " << hex(k);
      ASSERT_EQ(c.enc(std::nextafter(m, 0.0f)), s | k) << c.name << " below tie above " << hex(k);
      ASSERT_EQ(c.enc(std::nextafter(m, s ? -INFINITY : INFINITY)), s | up) << c.name << " above tie " << hex(k);
    }
  }
}

// Random float bit patterns (all ranges, NaN, inf, subnormals) against the reference rounding.
TEST_P(ConvertTest, RandomFloatsMatchReference) {
  const Codec& c = kCodecs[GetParam()];
  std::mt19937 rng(42);
  for (int i = 0; i < 300000; ++i) {
    uint32_t bits = rng();
    if (i & 1) bits = (bits & 0x807fffffu) | ((100 + rng() % 50) << 23);  // near the narrow range
    const float f = std::bit_cast<float>(bits);
    const uint32_t got = c.enc(f), want = refEncode(f, c.fmt);
    if (std::isnan(f))
      ASSERT_TRUE(std::isnan(refDecode(got, c.fmt))) << c.name << " " << hex(bits);
    else
      ASSERT_EQ(got, want) << c.name << " " << f << " (" << hex(bits) << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(AllFormats, ConvertTest, ::testing::Range(0, int(std::size(kCodecs))),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(kCodecs[info.param].name);
                         });

// Hand-checked values (they also check the reference above).
TEST(ConvertKnown, Fp16) {
  EXPECT_EQ(sk::floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(sk::floatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(sk::floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(sk::floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(sk::floatToHalf(65519.99f), 0x7bff);
  EXPECT_EQ(sk::floatToHalf(65520.0f), 0x7c00);  // tie, max mantissa odd -> inf
  EXPECT_EQ(sk::floatToHalf(1e9f), 0x7c00);
  EXPECT_EQ(sk::floatToHalf(-INFINITY), 0xfc00);
  EXPECT_EQ(sk::floatToHalf(1.0f + 0x1p-11f), 0x3c00);      // tie -> even
  EXPECT_EQ(sk::floatToHalf(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(sk::floatToHalf(0x1p-24f), 0x0001);             // smallest subnormal
  EXPECT_EQ(sk::floatToHalf(0x1p-25f), 0x0000);             // tie -> 0
  EXPECT_EQ(sk::floatToHalf(0x1.000002p-25f), 0x0001);
  EXPECT_EQ(sk::floatToHalf(3 * 0x1p-25f), 0x0002);         // tie -> even
  EXPECT_EQ(sk::floatToHalf(0x1p-14f - 0x1p-25f), 0x0400);  // rounds up into the normals
  EXPECT_EQ(sk::floatToHalf(-0x1p-30f), 0x8000);
  EXPECT_TRUE(std::isnan(sk::halfToFloat(sk::floatToHalf(NAN))));
  EXPECT_EQ(sk::halfToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(sk::halfToFloat(0x3555), 0x1.554p-2f);
  EXPECT_EQ(sk::halfToFloat(0xfc00), -INFINITY);
}

TEST(ConvertKnown, Bf16) {
  EXPECT_EQ(sk::floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(sk::floatToBf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(sk::floatToBf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(sk::floatToBf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_EQ(sk::floatToBf16(std::numeric_limits<float>::max()), 0x7f80);  // overflow -> inf
  EXPECT_EQ(sk::floatToBf16(-0.0f), 0x8000);
  EXPECT_EQ(sk::floatToBf16(std::bit_cast<float>(0x00010000u)), 0x0001);  // subnormal
  EXPECT_EQ(sk::floatToBf16(std::bit_cast<float>(0x00008000u)), 0x0000);  // tie -> 0
  const uint16_t n = sk::floatToBf16(std::bit_cast<float>(0x7f800001u));  // NaN with low payload only
  EXPECT_EQ(n & 0x7f80, 0x7f80);
  EXPECT_NE(n & 0x7f, 0) << "NaN must not become inf";
  EXPECT_EQ(sk::bf16ToFloat(0xc040), -3.0f);
}

TEST(ConvertKnown, E4m3) {
  EXPECT_EQ(sk::floatToE4m3(448.0f), 0x7e);
  EXPECT_EQ(sk::floatToE4m3(464.0f), 0x7e);  // tie between 448 (even) and 480 (NaN code)
  EXPECT_EQ(sk::floatToE4m3(465.0f), 0x7f);  // overflow -> NaN
  EXPECT_EQ(sk::floatToE4m3(-1e6f), 0xff);
  EXPECT_EQ(sk::floatToE4m3(INFINITY), 0x7f);
  EXPECT_EQ(sk::floatToE4m3(0x1p-9f), 0x01);   // smallest subnormal
  EXPECT_EQ(sk::floatToE4m3(0x1p-10f), 0x00);  // tie -> 0
  EXPECT_EQ(sk::floatToE4m3(3 * 0x1p-10f), 0x02);
  EXPECT_EQ(sk::floatToE4m3(-0.0f), 0x80);
  EXPECT_EQ(sk::floatToE4m3(1.0f), 0x38);
  EXPECT_EQ(sk::e4m3ToFloat(0x7e), 448.0f);
  EXPECT_EQ(sk::e4m3ToFloat(0x78), 256.0f);  // S.1111.000 is a number in e4m3
  EXPECT_TRUE(std::isnan(sk::e4m3ToFloat(0x7f)));
  EXPECT_TRUE(std::isnan(sk::e4m3ToFloat(0xff)));
  EXPECT_EQ(sk::e4m3ToFloat(0x08), 0x1p-6f);
}

TEST(ConvertKnown, E5m2) {
  EXPECT_EQ(sk::floatToE5m2(57344.0f), 0x7b);
  EXPECT_EQ(sk::floatToE5m2(61439.0f), 0x7b);
  EXPECT_EQ(sk::floatToE5m2(61440.0f), 0x7c);  // tie, odd mantissa -> inf
  EXPECT_EQ(sk::floatToE5m2(-INFINITY), 0xfc);
  EXPECT_EQ(sk::floatToE5m2(0x1p-16f), 0x01);
  EXPECT_EQ(sk::floatToE5m2(0x1p-17f), 0x00);
  EXPECT_EQ(sk::floatToE5m2(1.25f), 0x3d);
  EXPECT_EQ(sk::floatToE5m2(1.125f), 0x3c);  // tie -> even
  EXPECT_EQ(sk::floatToE5m2(1.375f), 0x3e);  // tie -> even (up)
  EXPECT_EQ(sk::floatToE5m2(-0.0f), 0x80);
  EXPECT_TRUE(std::isnan(sk::e5m2ToFloat(sk::floatToE5m2(NAN))));
  EXPECT_EQ(sk::e5m2ToFloat(0x7c), INFINITY);
}

// ---------------------------------------------------------------------------------------------
// Every bit pattern through the reduce kernels of each variant (fp16 goes through F16C on AVX2):
// Max(x, x) and Prod(x, 1) return x exactly; fp16 sums that are exact halfway cases round to even.
// ---------------------------------------------------------------------------------------------

class PatternTest : public ::testing::TestWithParam<HostIsa> {};

TEST_P(PatternTest, EveryPatternThroughReduce) {
  IsaScope scope(GetParam());
  REQUIRE_ISA(scope, GetParam());
  for (const TypeInfo& t : kTypes) {
    if (t.kind != Kind::Narrow) continue;
    const size_t n = size_t(1) << (8 * t.size);
    std::vector<unsigned char> x(n * t.size), one(n * t.size), out(n * t.size);
    const uint64_t oneBits = refEncode(1.0, t.fmt);
    for (size_t i = 0; i < n; ++i) {
      storeElem(&x[i * t.size], t.size, i);
      storeElem(&one[i * t.size], t.size, oneBits);
    }
    for (RedKind op : {RedKind::Max, RedKind::Min, RedKind::Prod}) {
      sk::reduce(out.data(), x.data(), op == RedKind::Prod ? one.data() : x.data(), n, t.dt, op);
      for (size_t i = 0; i < n; ++i)
        ASSERT_TRUE(sameResult(t, loadElem(&out[i * t.size], t.size), i))
            << t.name << " " << opName(op) << " " << hex(i);
    }
  }
}

TEST_P(PatternTest, Fp16SumHalfwayCases) {
  IsaScope scope(GetParam());
  REQUIRE_ISA(scope, GetParam());
  struct Case {
    float a, b, want;
  };
  const Case cases[] = {
      {2048, 1, 2048},          {2050, 1, 2052},          {65504, 16, INFINITY}, {65504, 15, 65504},
      {-65504, -16, -INFINITY}, {0x1p-24f, -0x1p-24f, 0}, {1, 0x1p-11f, 1},      {1, 3 * 0x1p-11f, 1 + 0x1p-9f},
      {-0.0f, -0.0f, -0.0f}};
  const size_t n = 3 * std::size(cases);  // repeat so that both the vector body and the tail run
  std::vector<uint16_t> a(n), b(n), d(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = sk::floatToHalf(cases[i % std::size(cases)].a);
    b[i] = sk::floatToHalf(cases[i % std::size(cases)].b);
  }
  sk::reduce(d.data(), a.data(), b.data(), n, strataFloat16, RedKind::Sum);
  for (size_t i = 0; i < n; ++i) {
    const Case& c = cases[i % std::size(cases)];
    EXPECT_EQ(d[i], sk::floatToHalf(c.want)) << c.a << " + " << c.b;
  }
}

// fp8: every pair of operands (256 x 256, one call per op, so the vector body runs them) through
// reduce, and every value times every scalar through scale, against the reference, bit for bit.
TEST_P(PatternTest, Fp8EveryOperandPair) {
  IsaScope scope(GetParam());
  REQUIRE_ISA(scope, GetParam());
  constexpr size_t n = 256 * 256;
  for (const TypeInfo& t : kTypes) {
    if (t.kind != Kind::Narrow || t.size != 1) continue;
    std::vector<unsigned char> x(n), y(n), out(n);
    for (size_t i = 0; i < n; ++i) {
      x[i] = static_cast<unsigned char>(i & 0xff);
      y[i] = static_cast<unsigned char>(i >> 8);
    }
    for (RedKind op : kOps) {
      sk::reduce(out.data(), x.data(), y.data(), n, t.dt, op);
      for (size_t i = 0; i < n; ++i)
        ASSERT_TRUE(sameResult(t, out[i], refOp(t, op, x[i], y[i])))
            << t.name << " " << opName(op) << " " << hex(x[i]) << ", " << hex(y[i]) << " = " << hex(out[i])
            << ", want " << hex(refOp(t, op, x[i], y[i]));
    }
    for (unsigned scalar = 0; scalar < 256; ++scalar) {
      const unsigned char k = static_cast<unsigned char>(scalar);
      sk::scale(out.data(), x.data(), 256, t.dt, &k);
      for (size_t i = 0; i < 256; ++i)
        ASSERT_TRUE(sameResult(t, out[i], refOp(t, RedKind::Prod, x[i], k)))
            << t.name << " scale " << hex(x[i]) << " * " << hex(k) << " = " << hex(out[i]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, PatternTest, ::testing::ValuesIn(kIsas),
                         [](const ::testing::TestParamInfo<HostIsa>& info) {
                           return std::string(sk::hostIsaName(info.param));
                         });

// ---------------------------------------------------------------------------------------------
// Type queries, copy, invalid arguments
// ---------------------------------------------------------------------------------------------

TEST(DtypeInfo, SizesNamesAndFloatness) {
  for (const TypeInfo& t : kTypes) {
    EXPECT_EQ(sk::dtypeSize(t.dt), t.size) << t.name;
    EXPECT_STREQ(sk::dtypeName(t.dt), t.name);
    EXPECT_EQ(sk::dtypeIsFloat(t.dt), isFloatKind(t)) << t.name;
  }
  for (auto bad : {strataNumTypes, static_cast<strataDataType_t>(-1), static_cast<strataDataType_t>(99)}) {
    EXPECT_EQ(sk::dtypeSize(bad), 0u);
    EXPECT_STREQ(sk::dtypeName(bad), "invalid");
    EXPECT_FALSE(sk::dtypeIsFloat(bad));
  }
}

TEST(Copy, UnalignedAndEmpty) {
  std::vector<unsigned char> src(1003), dst(1010, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 1);
  sk::copy(dst.data() + 3, src.data() + 1, 1001);
  EXPECT_EQ(0, std::memcmp(dst.data() + 3, src.data() + 1, 1001));
  EXPECT_EQ(dst[2], 0);
  EXPECT_EQ(dst[1004], 0);
  sk::copy(nullptr, nullptr, 0);
  sk::copy(dst.data(), dst.data(), dst.size());  // same buffer: a no-op
}

TEST(InvalidArguments, AreNoOps) {
  int32_t a[4] = {1, 2, 3, 4}, d[4] = {9, 9, 9, 9};
  sk::reduce(d, a, a, 4, strataNumTypes, RedKind::Sum);
  sk::reduce(d, a, a, 4, strataInt32, static_cast<RedKind>(7));
  sk::scale(d, a, 4, static_cast<strataDataType_t>(-1), a);
  sk::reduce(nullptr, nullptr, nullptr, 0, strataFloat32, RedKind::Sum);
  sk::scale(nullptr, nullptr, 0, strataFloat32, nullptr);
  sk::divide(nullptr, 0, strataFloat32, 2);
  for (int v : d) EXPECT_EQ(v, 9);
}

TEST(HostIsaSelection, BestIsDefaultAndGenericAlwaysWorks) {
  EXPECT_EQ(sk::hostIsa(), sk::hostIsaBest());
  {
    IsaScope scope(HostIsa::Generic);
    EXPECT_TRUE(scope.ok());
    EXPECT_EQ(sk::hostIsa(), HostIsa::Generic);
  }
  EXPECT_EQ(sk::hostIsa(), sk::hostIsaBest());
}

}  // namespace
