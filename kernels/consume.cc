// consume.cc: the consuming copy and reduce of consume.h. Copy: one pass that loads each source
// line, stores it to dst and stores 8 bytes back into the source line (AVX2 where the host kernels
// use it, 4 KiB blocks of memcpy and then the line stores otherwise). Reduce: 4 KiB blocks of the
// reduce() kernel, each followed by its line stores while the block is still in L1.
#include "kernels/consume.h"

#include <cstdint>
#include <cstring>

#include "kernels/host_isa.h"
#include "kernels/host_reduce.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define STRATA_CONSUME_X86 1
#else
#define STRATA_CONSUME_X86 0
#endif

namespace strata::kernels {
namespace {

constexpr size_t kLine = 64;
constexpr size_t kBlock = 4096;  // a multiple of every element size

// One store per line that starts an 8-byte word inside [p, p + bytes).
void claimLines(char* p, size_t bytes) {
  const uint64_t zero = 0;
  for (size_t k = 0; k + sizeof(zero) <= bytes; k += kLine) std::memcpy(p + k, &zero, sizeof(zero));
}

void copyBlocks(char* d, char* s, size_t n) {
  for (size_t o = 0; o < n; o += kBlock) {
    const size_t len = n - o < kBlock ? n - o : kBlock;
    std::memcpy(d + o, s + o, len);
    claimLines(s + o, len);
  }
}

#if STRATA_CONSUME_X86
[[gnu::target("avx2")]] void copyFusedAvx2(char* d, char* s, size_t n) {
  size_t i = 0;
  for (; i + 2 * kLine <= n; i += 2 * kLine) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 64));
    const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 96));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i + 32), b);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i + 64), c);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i + 96), e);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(s + i), _mm_setzero_si128());
    _mm_storel_epi64(reinterpret_cast<__m128i*>(s + i + 64), _mm_setzero_si128());
  }
  if (i < n) copyBlocks(d + i, s + i, n - i);
}
#endif

}  // namespace

void consumeCopy(void* dst, void* src, size_t bytes) {
  if (bytes == 0) return;
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<char*>(src);
#if STRATA_CONSUME_X86
  if (hostIsa() != HostIsa::Generic) return copyFusedAvx2(d, s, bytes);  // Avx2 or Avx512
#endif
  copyBlocks(d, s, bytes);
}

void consumeReduce(void* dst, const void* a, void* src, size_t count, strataDataType_t dtype, RedKind op) {
  const size_t es = dtypeSize(dtype);
  if (count == 0 || es == 0) return;
  auto* d = static_cast<char*>(dst);
  auto* x = static_cast<const char*>(a);
  auto* s = static_cast<char*>(src);
  const size_t bytes = count * es;
  for (size_t o = 0; o < bytes; o += kBlock) {
    const size_t len = bytes - o < kBlock ? bytes - o : kBlock;
    reduce(d + o, x + o, s + o, len / es, dtype, op);
    claimLines(s + o, len);
  }
}

}  // namespace strata::kernels
