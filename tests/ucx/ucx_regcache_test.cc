// ucx_regcache_test.cc: the UCX registration cache's logic over a fake registrar: containment hits,
// page alignment, LRU eviction under byte and entry bounds, pinning, uncached overflow, invalidation.
#include <gtest/gtest.h>

#include <map>

#include "transport/ucx/ucx_regcache.h"

using namespace strata;
using namespace strata::ucx;

namespace {

struct FakeRegistrar : Registrar {
  std::map<int, std::pair<uintptr_t, size_t>> live;  // handle id -> range
  int next = 1, maps = 0, unmaps = 0;
  bool failNext = false;
  Status map(void* addr, size_t bytes, void** handle) override {
    if (failNext) {
      failNext = false;
      return systemError("fake registration failure");
    }
    ++maps;
    live[next] = {reinterpret_cast<uintptr_t>(addr), bytes};
    *handle = reinterpret_cast<void*>(static_cast<uintptr_t>(next++));
    return OkStatus();
  }
  void unmap(void* handle) override {
    ++unmaps;
    ASSERT_EQ(live.erase(static_cast<int>(reinterpret_cast<uintptr_t>(handle))), 1u) << "double unmap";
  }
};

const void* at(uintptr_t a) { return reinterpret_cast<const void*>(a); }
constexpr uintptr_t P = RegCache::kPage;

TEST(UcxRegCache, HitsContainedRangesAndAlignsToPages) {
  FakeRegistrar fr;
  {
    RegCache rc(&fr, 1 << 20, 16);
    RegCache::Entry* e = nullptr;
    ASSERT_TRUE(rc.acquire(at(10 * P + 100), 3 * P, &e).ok());
    EXPECT_EQ(e->begin, 10 * P);
    EXPECT_EQ(e->end, 14 * P);  // 10P+100 .. 13P+100 rounds out to 14P
    EXPECT_EQ(fr.live.begin()->second, std::make_pair(10 * P, size_t{4 * P}));
    rc.release(e);
    RegCache::Entry* e2 = nullptr;
    ASSERT_TRUE(rc.acquire(at(11 * P), 2 * P, &e2).ok());  // inside: hit
    EXPECT_EQ(e2, e);
    rc.release(e2);
    ASSERT_TRUE(rc.acquire(at(13 * P), 2 * P, &e2).ok());  // crosses the end: miss
    EXPECT_NE(e2, e);
    rc.release(e2);
    EXPECT_EQ(rc.hits(), 1u);
    EXPECT_EQ(rc.misses(), 2u);
    EXPECT_EQ(fr.maps, 2);
    EXPECT_EQ(rc.cachedEntries(), 2u);
    EXPECT_EQ(rc.cachedBytes(), 4 * P + 2 * P);  // [10P,14P) and [13P,15P)
  }
  EXPECT_TRUE(fr.live.empty()) << "destruction unmaps everything";
}

TEST(UcxRegCache, EvictsLeastRecentlyUsedUnderByteBound) {
  FakeRegistrar fr;
  RegCache rc(&fr, 3 * P, 100);
  RegCache::Entry *a, *b, *c;
  ASSERT_TRUE(rc.acquire(at(1 * P), P, &a).ok());
  ASSERT_TRUE(rc.acquire(at(5 * P), P, &b).ok());
  ASSERT_TRUE(rc.acquire(at(9 * P), P, &c).ok());
  rc.release(a);
  rc.release(b);
  rc.release(c);
  RegCache::Entry* again;
  ASSERT_TRUE(rc.acquire(at(1 * P), P, &again).ok());  // touch a: b is now the oldest
  rc.release(again);
  RegCache::Entry* d;
  ASSERT_TRUE(rc.acquire(at(20 * P), P, &d).ok());
  rc.release(d);
  EXPECT_EQ(rc.cachedEntries(), 3u);
  EXPECT_EQ(rc.cachedBytes(), 3 * P);
  EXPECT_EQ(fr.unmaps, 1);
  for (auto& [id, r] : fr.live) EXPECT_NE(r.first, 5 * P) << "b (least recently used) should be gone";
}

TEST(UcxRegCache, EntryBoundAndPinnedEntriesSurvive) {
  FakeRegistrar fr;
  RegCache rc(&fr, 1 << 30, 2);
  RegCache::Entry *a, *b, *c;
  ASSERT_TRUE(rc.acquire(at(1 * P), P, &a).ok());  // stays pinned
  ASSERT_TRUE(rc.acquire(at(5 * P), P, &b).ok());
  rc.release(b);
  ASSERT_TRUE(rc.acquire(at(9 * P), P, &c).ok());  // evicts b, not pinned a
  EXPECT_EQ(rc.cachedEntries(), 2u);
  EXPECT_EQ(fr.live.count(1), 1u);
  EXPECT_EQ(fr.live.count(2), 0u);
  // Everything pinned and full: the next registration stays uncached and goes on release.
  RegCache::Entry* d;
  ASSERT_TRUE(rc.acquire(at(30 * P), P, &d).ok());
  EXPECT_FALSE(d->cached);
  EXPECT_EQ(fr.live.size(), 3u);
  rc.release(d);
  EXPECT_EQ(fr.live.size(), 2u);
  rc.release(a);
  rc.release(c);
  EXPECT_EQ(rc.cachedEntries(), 2u);
}

TEST(UcxRegCache, OversizedRangeIsUncachedAndFailuresPropagate) {
  FakeRegistrar fr;
  RegCache rc(&fr, 2 * P, 8);
  RegCache::Entry* big;
  ASSERT_TRUE(rc.acquire(at(100 * P), 10 * P, &big).ok());
  EXPECT_FALSE(big->cached);
  EXPECT_EQ(rc.cachedBytes(), 0u);
  rc.release(big);
  EXPECT_TRUE(fr.live.empty());
  fr.failNext = true;
  RegCache::Entry* e = nullptr;
  Status st = rc.acquire(at(P), P, &e);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("fake registration failure"), std::string::npos);
  EXPECT_EQ(rc.cachedEntries(), 0u);
}

TEST(UcxRegCache, InvalidateDropsOverlappingUnpinnedEntries) {
  FakeRegistrar fr;
  RegCache rc(&fr, 1 << 20, 16);
  RegCache::Entry *a, *b, *c;
  ASSERT_TRUE(rc.acquire(at(1 * P), 2 * P, &a).ok());
  ASSERT_TRUE(rc.acquire(at(4 * P), 2 * P, &b).ok());
  ASSERT_TRUE(rc.acquire(at(8 * P), 2 * P, &c).ok());
  rc.release(a);
  rc.release(c);  // b stays pinned
  rc.invalidate(at(2 * P), 7 * P);  // overlaps a, b and c
  EXPECT_EQ(rc.cachedEntries(), 1u);
  EXPECT_EQ(fr.live.size(), 1u);
  EXPECT_EQ(fr.live.begin()->second.first, 4 * P);
  rc.release(b);
  RegCache::Entry* again;
  ASSERT_TRUE(rc.acquire(at(1 * P), P, &again).ok());  // a was dropped: a fresh registration
  EXPECT_EQ(fr.maps, 4);
  rc.release(again);
}

}  // namespace
