// allreduce_floor_bench.cc: the memory work of one rank of a 2-rank fp32 all-reduce, without any
// communication: what the all-reduce could reach on this machine if synchronisation and transport
// were free. Rank r of 2 reads its input half and the peer's, writes their sum into its output
// half, then copies the peer's reduced half into its other output half. Run two copies at once,
// one per core, to load memory as two ranks do:
//
//   for c in 0 1; do taskset -c $c build/perf/bench/allreduce_floor_bench --benchmark_repetitions=5 & done; wait
//
// Variants: in place (the output is the input), out of place (a third buffer, whose lines each
// store first reads for ownership), and out of place with non-temporal stores (no such read).
// Counter "busbw" is N / time, the busbw a 2-rank all-reduce of N bytes would show.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/host_reduce.h"

namespace {

struct Buffers {
  explicit Buffers(size_t bytes) : n(bytes / sizeof(float)) {
    for (float** p : {&in, &peer, &peerSum, &out}) {
      *p = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
      for (size_t i = 0; i < n; ++i) (*p)[i] = static_cast<float>(i % 97);  // resident, not zero pages
    }
  }
  ~Buffers() {
    for (float* p : {in, peer, peerSum, out}) std::free(p);
  }
  size_t n;
  float *in = nullptr, *peer = nullptr, *peerSum = nullptr, *out = nullptr;
};

// dst = a + b (fp32) with streaming stores; count a multiple of 8, dst 32-byte aligned.
void sumStream(float* dst, const float* a, const float* b, size_t count) {
  for (size_t i = 0; i < count; i += 8)
    _mm256_stream_ps(dst + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
}

void copyStream(float* dst, const float* src, size_t count) {
  for (size_t i = 0; i < count; i += 8) _mm256_stream_ps(dst + i, _mm256_loadu_ps(src + i));
}

enum Mode { kInPlace, kOutOfPlace, kOutOfPlaceStream };

void BM_Floor(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const Mode mode = static_cast<Mode>(state.range(1));
  Buffers b(bytes);
  const size_t half = b.n / 2;
  for (auto _ : state) {
    float* dst = mode == kInPlace ? b.in : b.out;
    if (mode == kOutOfPlaceStream) {
      sumStream(dst, b.in, b.peer, half);
      copyStream(dst + half, b.peerSum + half, b.n - half);
      _mm_sfence();
    } else {
      strata::kernels::reduce(dst, b.in, b.peer, half, strataFloat32, strata::kernels::RedKind::Sum);
      strata::kernels::copy(dst + half, b.peerSum + half, (b.n - half) * sizeof(float));
    }
    benchmark::DoNotOptimize(dst);
    benchmark::ClobberMemory();
  }
  state.counters["busbw"] =
      benchmark::Counter(static_cast<double>(bytes) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(mode == kInPlace ? "in place" : mode == kOutOfPlace ? "out of place" : "out of place, streaming stores");
}

BENCHMARK(BM_Floor)
    ->ArgsProduct({{32 << 20, 128 << 20}, {kInPlace, kOutOfPlace, kOutOfPlaceStream}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
