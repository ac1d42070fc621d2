// hot_path_alloc_test.cc: after warm-up, collectives allocate nothing. Global operator new is
// replaced to count allocations while a window is open; ranks are threads, over the local
// transport and over tcp.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // malloc/free behind a replaced new is fine
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "strata/strata.h"
#include "support/thread_ranks.h"

namespace {
std::atomic<bool> gCounting{false};
std::atomic<long> gAllocs{0};
}  // namespace

void* operator new(size_t n) {
  if (gCounting.load(std::memory_order_relaxed)) gAllocs.fetch_add(1, std::memory_order_relaxed);
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}
// The nothrow form too (std::stable_sort's buffer uses it): AddressSanitizer's runtime brings its
// own, which does not call the new above, and its blocks would come back through the free() below.
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  if (gCounting.load(std::memory_order_relaxed)) gAllocs.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }

using namespace strata::testing;

namespace {

// One round of the calls a training step makes: large and small all-reduce, reduce-scatter,
// all-gather, broadcast, all-to-all and a grouped send/recv exchange.
void round(strataComm_t comm, int rank, int n, std::vector<float>& big, std::vector<float>& small,
           std::vector<float>& out) {
  ASSERT_EQ(strataAllReduce(big.data(), big.data(), big.size(), strataFloat32, strataSum, comm), strataSuccess);
  ASSERT_EQ(strataAllReduce(small.data(), small.data(), small.size(), strataFloat32, strataAvg, comm), strataSuccess);
  ASSERT_EQ(strataReduceScatter(big.data(), out.data(), big.size() / n, strataFloat32, strataSum, comm), strataSuccess);
  ASSERT_EQ(strataAllGather(out.data(), big.data(), big.size() / n, strataFloat32, comm), strataSuccess);
  ASSERT_EQ(strataBroadcast(small.data(), small.data(), small.size(), strataFloat32, 0, comm), strataSuccess);
  ASSERT_EQ(strataAllToAll(big.data(), out.data() , small.size() / n, strataFloat32, comm), strataSuccess);
  strataGroupStart();
  strataSend(small.data(), small.size(), strataFloat32, (rank + 1) % n, comm);
  strataRecv(out.data(), small.size(), strataFloat32, (rank + n - 1) % n, comm);
  ASSERT_EQ(strataGroupEnd(), strataSuccess);
}

class HotPath : public ::testing::TestWithParam<const char*> {};

TEST_P(HotPath, SteadyStateCollectivesDoNotAllocate) {
  ScopedEnv transport("STRATA_TRANSPORT", GetParam());
  const int n = 3;
  std::vector<long> counts(n, -1);
  runThreadRanks(n, [&](strataComm_t comm, int rank) {
    std::vector<float> big(3 << 18, 1.0f), small(96, 1.0f), out(3 << 18, 0.0f);
    for (int i = 0; i < 3; ++i) round(comm, rank, n, big, small, out);  // warm-up
    ASSERT_EQ(strataBarrier(comm), strataSuccess);
    if (rank == 0) {
      gAllocs = 0;
      gCounting = true;
    }
    ASSERT_EQ(strataBarrier(comm), strataSuccess);
    for (int i = 0; i < 10; ++i) round(comm, rank, n, big, small, out);
    ASSERT_EQ(strataBarrier(comm), strataSuccess);
    if (rank == 0) {
      gCounting = false;
      counts[0] = gAllocs.load();
    }
  });
  EXPECT_EQ(counts[0], 0) << "allocations during 10 steady-state rounds on " << n << " ranks";
}

INSTANTIATE_TEST_SUITE_P(Transport, HotPath, ::testing::Values("local", "tcp"));

}  // namespace
