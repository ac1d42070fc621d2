// kernel_bench.cc: Google Benchmark micro-benchmarks of strata's host kernels (kernels/host_reduce.h)
// against a memcpy baseline measured in the same run.
//
//   build/perf/bench/kernel_bench          # everything, ~15 s of CPU time (longer on a busy machine)
//   build/perf/bench/kernel_bench --benchmark_filter='reduce/sum/(fp32|bf16)/64MiB'
//   build/perf/bench/kernel_bench --isa=generic                 # force the portable variant
//   build/perf/bench/kernel_bench --isa=avx2                    # or AVX2 where AVX-512 is best
//
// What is measured, per size (64 KiB: cache-resident; 64 MiB: memory-bound):
//   memcpy/<size>                       std::memcpy(dst, src)        bytes = 2 x size (read + write)
//   copy/<size>                         kernels::copy                bytes = 2 x size
//   reduce/<op>/<dtype>/<size>/<place>  kernels::reduce(dst, a, b)   bytes = 3 x size (2 reads + write)
//                                       op: sum for every dtype; max too for fp32 and the fp8 types
//                                       in_place: dst == a; out_of_place: dst, a, b distinct
//   scale/<dtype>/<size>                kernels::scale, in place     bytes = 2 x size
//   divide/<dtype>/<size>               kernels::divide by 1         bytes = 2 x size
//                                       (n is a runtime value, so the same work as any n; n = 1
//                                       keeps values fixed, where n > 1 would reach float subnormals)
// `size` is the byte size of one buffer. bytes_per_second counts every byte read and written, so it
// is comparable across kernels; `ratio_vs_memcpy` is that rate divided by the memcpy rate at the same
// size (measured by memcpy/<size> earlier in the run, or on the spot when a filter skipped it).
// Reading the 64 MiB ratios: a store to a line not in cache first reads it (write-allocate), so
// memcpy moves 3 bytes of DRAM traffic per 2 counted, an out-of-place reduce 4 per 3 and an in-place
// one 3 per 3. A kernel streaming at memcpy's DRAM rate therefore shows ~1.1 out of place and ~1.5
// in place (and scale/divide, in place, ~1.5); below that it is compute-bound.
//
// In-place sums alternate between b and -b, so values stay bounded (no overflow to inf/NaN) however
// many iterations run. Rates and ratios use the thread's CPU time (the machines here are shared).
// Nothing is pinned: run on a quiet machine, or compare ratios, not rates.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "kernels/host_isa.h"
#include "kernels/host_reduce.h"

namespace {

namespace k = strata::kernels;

/// This thread's CPU time: the machines here are shared, and time spent descheduled is not the
/// kernel's. Google Benchmark's own rates (bytes_per_second) use CPU time too.
struct Clock {
  using time_point = double;
  static double now() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  }
};

constexpr size_t kSmall = size_t{64} << 10;  // 64 KiB: fits L2 (three buffers)
constexpr size_t kLarge = size_t{64} << 20;  // 64 MiB: far past the last-level cache

std::string sizeName(size_t bytes) {
  if (bytes >= (size_t{1} << 20)) return std::to_string(bytes >> 20) + "MiB";
  return std::to_string(bytes >> 10) + "KiB";
}

// ---- buffers: allocated once per size, first touched at allocation, refilled per dtype ----

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<std::byte, FreeDeleter>;

Buffer allocBuffer(size_t bytes) {
  auto* p = static_cast<std::byte*>(std::aligned_alloc(4096, bytes));
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, bytes);  // fault every page in before timing
  return Buffer(p);
}

/// Four buffers of one size: a (and dst when in place), b, -b, dst (out of place).
struct BufferSet {
  Buffer a, b, negB, dst;
  int filledAs = -1;  // the dtype the contents were written for
};

BufferSet& buffers(size_t bytes) {
  static std::map<size_t, BufferSet> sets;
  auto [it, fresh] = sets.try_emplace(bytes);
  if (fresh) {
    it->second.a = allocBuffer(bytes);
    it->second.b = allocBuffer(bytes);
    it->second.negB = allocBuffer(bytes);
    it->second.dst = allocBuffer(bytes);
  }
  return it->second;
}

/// The stored representation of float `v` as `dtype` (esize bytes, written to out).
void encode(float v, strataDataType_t dtype, std::byte* out) {
  switch (dtype) {
    case strataInt8: { auto x = static_cast<int8_t>(v); std::memcpy(out, &x, 1); break; }
    case strataInt32: { auto x = static_cast<int32_t>(v); std::memcpy(out, &x, 4); break; }
    case strataFloat16: { auto x = k::floatToHalf(v); std::memcpy(out, &x, 2); break; }
    case strataBfloat16: { auto x = k::floatToBf16(v); std::memcpy(out, &x, 2); break; }
    case strataFloat8e4m3: { auto x = k::floatToE4m3(v); std::memcpy(out, &x, 1); break; }
    case strataFloat8e5m2: { auto x = k::floatToE5m2(v); std::memcpy(out, &x, 1); break; }
    case strataFloat64: { double x = v; std::memcpy(out, &x, 8); break; }
    default: std::memcpy(out, &v, 4); break;  // fp32
  }
}

/// Fills `buf` with a 4 KiB pattern of finite, normal values scaled by `sign`, replicated by memcpy.
void fill(std::byte* buf, size_t bytes, strataDataType_t dtype, float sign) {
  const size_t esize = k::dtypeSize(dtype);
  const size_t pattern = std::min<size_t>(4096, bytes);
  for (size_t off = 0, i = 0; off + esize <= pattern; off += esize, ++i)
    encode(sign * (1.0f + 0.25f * static_cast<float>(i % 8)), dtype, buf + off);
  for (size_t off = pattern; off < bytes; off += pattern)
    std::memcpy(buf + off, buf, std::min(pattern, bytes - off));
}

BufferSet& filledBuffers(size_t bytes, strataDataType_t dtype) {
  BufferSet& s = buffers(bytes);
  if (s.filledAs != static_cast<int>(dtype)) {
    fill(s.a.get(), bytes, dtype, 1.0f);
    fill(s.b.get(), bytes, dtype, 1.0f);
    fill(s.negB.get(), bytes, dtype, -1.0f);
    fill(s.dst.get(), bytes, dtype, 1.0f);
    s.filledAs = static_cast<int>(dtype);
  }
  return s;
}

// ---- the memcpy baseline ----

std::map<size_t, double>& memcpyRates() {  // buffer size -> bytes moved per second
  static std::map<size_t, double> rates;
  return rates;
}

double secondsSince(Clock::time_point t0) { return Clock::now() - t0; }

/// The memcpy rate at `bytes`: the one memcpy/<size> recorded, or measured now (~50 ms).
double memcpyRate(size_t bytes) {
  auto it = memcpyRates().find(bytes);
  if (it != memcpyRates().end()) return it->second;
  BufferSet& s = buffers(bytes);
  std::memcpy(s.dst.get(), s.a.get(), bytes);  // warm up
  const auto t0 = Clock::now();
  size_t reps = 0;
  do {
    std::memcpy(s.dst.get(), s.a.get(), bytes);
    benchmark::ClobberMemory();
    ++reps;
  } while (secondsSince(t0) < 0.05);
  const double rate = 2.0 * static_cast<double>(bytes) * static_cast<double>(reps) / secondsSince(t0);
  memcpyRates()[bytes] = rate;
  return rate;
}

/// Sets bytes_per_second and ratio_vs_memcpy from the loop's own timing (the final, reported call
/// of a benchmark function overwrites what the shorter probing calls set).
void report(benchmark::State& state, size_t bytesPerIter, Clock::time_point t0, double baseline) {
  const double seconds = secondsSince(t0);
  const double moved = static_cast<double>(bytesPerIter) * static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(moved));
  if (baseline > 0 && seconds > 0) state.counters["ratio_vs_memcpy"] = moved / seconds / baseline;
}

// ---- benchmarks ----

void BM_memcpy(benchmark::State& state, size_t bytes) {
  BufferSet& s = buffers(bytes);
  const auto t0 = Clock::now();
  for (auto _ : state) {
    std::memcpy(s.dst.get(), s.a.get(), bytes);
    benchmark::DoNotOptimize(s.dst.get());
    benchmark::ClobberMemory();
  }
  const double seconds = secondsSince(t0);
  if (seconds > 0)
    memcpyRates()[bytes] = 2.0 * static_cast<double>(bytes) * static_cast<double>(state.iterations()) / seconds;
  report(state, 2 * bytes, t0, memcpyRates()[bytes]);
}

void BM_copy(benchmark::State& state, size_t bytes) {
  const double baseline = memcpyRate(bytes);
  BufferSet& s = buffers(bytes);
  const auto t0 = Clock::now();
  for (auto _ : state) {
    k::copy(s.dst.get(), s.a.get(), bytes);
    benchmark::DoNotOptimize(s.dst.get());
    benchmark::ClobberMemory();
  }
  report(state, 2 * bytes, t0, baseline);
}

void BM_reduce(benchmark::State& state, strataDataType_t dtype, k::RedKind op, size_t bytes, bool inPlace) {
  const double baseline = memcpyRate(bytes);
  BufferSet& s = filledBuffers(bytes, dtype);
  const size_t count = bytes / k::dtypeSize(dtype);
  std::byte* a = s.a.get();
  std::byte* dst = inPlace ? a : s.dst.get();
  const std::byte* b[2] = {s.b.get(), op == k::RedKind::Sum && inPlace ? s.negB.get() : s.b.get()};
  size_t i = 0;
  const auto t0 = Clock::now();
  for (auto _ : state) {
    k::reduce(dst, a, b[i++ & 1], count, dtype, op);
    benchmark::DoNotOptimize(dst);
    benchmark::ClobberMemory();
  }
  report(state, 3 * bytes, t0, baseline);
}

void BM_scale(benchmark::State& state, strataDataType_t dtype, size_t bytes) {
  const double baseline = memcpyRate(bytes);
  BufferSet& s = filledBuffers(bytes, dtype);
  const size_t count = bytes / k::dtypeSize(dtype);
  // x2 then x0.5 (exact for every type), so values stay bounded in place.
  std::byte factors[2][8];
  encode(2.0f, dtype, factors[0]);
  encode(dtype == strataInt8 || dtype == strataInt32 ? 1.0f : 0.5f, dtype, factors[1]);
  size_t i = 0;
  const auto t0 = Clock::now();
  for (auto _ : state) {
    k::scale(s.a.get(), s.a.get(), count, dtype, factors[i++ & 1]);
    benchmark::DoNotOptimize(s.a.get());
    benchmark::ClobberMemory();
  }
  report(state, 2 * bytes, t0, baseline);
  s.filledAs = -1;  // integer scaling by 2 grows values; refill before the next user
}

void BM_divide(benchmark::State& state, strataDataType_t dtype, size_t bytes) {
  const double baseline = memcpyRate(bytes);
  BufferSet& s = filledBuffers(bytes, dtype);
  const size_t count = bytes / k::dtypeSize(dtype);
  const auto t0 = Clock::now();
  for (auto _ : state) {
    k::divide(s.dst.get(), count, dtype, 1);
    benchmark::DoNotOptimize(s.dst.get());
    benchmark::ClobberMemory();
  }
  report(state, 2 * bytes, t0, baseline);
}

constexpr strataDataType_t kTypes[] = {strataFloat32, strataBfloat16, strataFloat16, strataFloat64,
                                       strataInt32,   strataInt8,     strataFloat8e4m3, strataFloat8e5m2};
void registerAll() {
  for (size_t bytes : {kSmall, kLarge}) {
    const std::string sz = sizeName(bytes);
    benchmark::RegisterBenchmark(("memcpy/" + sz).c_str(), BM_memcpy, bytes);
    benchmark::RegisterBenchmark(("copy/" + sz).c_str(), BM_copy, bytes);
    for (strataDataType_t t : kTypes) {
      std::vector<std::pair<const char*, k::RedKind>> ops = {{"sum", k::RedKind::Sum}};
      if (t == strataFloat32 || (k::dtypeSize(t) == 1 && k::dtypeIsFloat(t))) ops.emplace_back("max", k::RedKind::Max);
      for (auto [opName, op] : ops)
        for (bool inPlace : {true, false}) {
          const std::string name = std::string("reduce/") + opName + "/" + k::dtypeName(t) + "/" + sz + "/" +
                                   (inPlace ? "in_place" : "out_of_place");
          benchmark::RegisterBenchmark(name.c_str(), BM_reduce, t, op, bytes, inPlace);
        }
    }
    for (strataDataType_t t : kTypes) {
      const std::string suffix = std::string(k::dtypeName(t)) + "/" + sz;
      benchmark::RegisterBenchmark(("scale/" + suffix).c_str(), BM_scale, t, bytes);
      benchmark::RegisterBenchmark(("divide/" + suffix).c_str(), BM_divide, t, bytes);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  // One flag of our own, --isa=generic|avx2|avx512, taken out before Google Benchmark sees argv.
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--isa=", 0) == 0) {
      const std::string want = arg.substr(6);
      const auto isa = want == "generic" ? k::HostIsa::Generic : want == "avx2" ? k::HostIsa::Avx2 : k::HostIsa::Avx512;
      if ((want != "generic" && want != "avx2" && want != "avx512") || !k::setHostIsa(isa)) {
        std::fprintf(stderr, "kernel_bench: --isa=%s: not 'generic', 'avx2' or 'avx512', or not supported here\n",
                     want.c_str());
        return 2;
      }
      continue;
    }
    args.push_back(argv[i]);
  }
  // Default --benchmark_min_time=0.1 (the whole run takes ~15 s); a --benchmark_min_time given on
  // the command line comes later in argv and wins. (Benchmark::MinTime() would override the flag.)
  static char defaultMinTime[] = "--benchmark_min_time=0.1";
  args.insert(args.begin() + 1, defaultMinTime);
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  benchmark::AddCustomContext("strata_isa", k::hostIsaName(k::hostIsa()));
  registerAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
