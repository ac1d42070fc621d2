// shared_buffers_test.cc: the registry of shareable host regions (transport/shared_buffers.h):
// alloc / find / free, strataMemAlloc's host branch, mapping a region back through
// /proc/self/fd, and the inode check that remaps a reused fd number.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "strata/strata.h"
#include "transport/shared_buffers.h"

namespace strata {
namespace {

TEST(SharedBuffers, AllocFindFree) {
  const size_t before = sharedRegionCount();
  void* p = nullptr;
  ASSERT_TRUE(allocShared(&p, 10000).ok());
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  EXPECT_EQ(sharedRegionCount(), before + 1);
  std::memset(p, 7, 10000);
  int fd = -1;
  uint64_t off = 0, ino = 0;
  EXPECT_TRUE(findShared(static_cast<char*>(p) + 100, 500, &fd, &off, &ino));
  EXPECT_GE(fd, 0);
  EXPECT_EQ(off, 100u);
  EXPECT_NE(ino, 0u);
  EXPECT_TRUE(findShared(p, 12288, &fd, &off, &ino));      // the whole rounded-up region
  EXPECT_FALSE(findShared(p, 12289, &fd, &off, &ino));     // past its end
  int x = 0;
  EXPECT_FALSE(findShared(&x, sizeof(x), &fd, &off, &ino));  // not ours
  EXPECT_FALSE(freeShared(&x));
  EXPECT_FALSE(freeShared(static_cast<char*>(p) + 4096));  // not a base
  EXPECT_TRUE(freeShared(p));
  EXPECT_EQ(sharedRegionCount(), before);
  EXPECT_FALSE(findShared(p, 1, &fd, &off, &ino));
}

TEST(SharedBuffers, MemAllocHostIsShared) {
  int devices = 0;
  strataCudaDeviceCount(&devices);
  if (devices > 0) GTEST_SKIP() << "strataMemAlloc gives device memory here";
  void* p = nullptr;
  ASSERT_EQ(strataMemAlloc(&p, 1 << 20), strataSuccess);
  int fd = -1;
  uint64_t off = 0, ino = 0;
  EXPECT_TRUE(findShared(p, 1 << 20, &fd, &off, &ino));
  EXPECT_EQ(strataMemFree(p), strataSuccess);
  EXPECT_FALSE(findShared(p, 1, &fd, &off, &ino));
}

TEST(SharedBuffers, MapThroughProcSelfAndRemapOnInodeChange) {
  void* p = nullptr;
  ASSERT_TRUE(allocShared(&p, 8192).ok());
  std::strcpy(static_cast<char*>(p) + 4100, "first");
  int fd = -1;
  uint64_t off = 0, ino = 0;
  ASSERT_TRUE(findShared(p, 1, &fd, &off, &ino));
  std::string why;
  size_t size = 0;
  const char* m = mapPeerRegion(getpid(), fd, ino, 8192, &size, &why);
  ASSERT_NE(m, nullptr) << why;
  EXPECT_EQ(size, 8192u);
  EXPECT_STREQ(m + 4100, "first");
  std::strcpy(static_cast<char*>(p) + 4100, "later");  // one memory: the mapping sees writes
  EXPECT_STREQ(m + 4100, "later");
  EXPECT_EQ(mapPeerRegion(getpid(), fd, ino, 1, &size, &why), m);  // cached
  // A wrong inode for the fd is refused, not mapped.
  EXPECT_EQ(mapPeerRegion(getpid(), fd, ino + 1, 1, &size, &why), nullptr);
  EXPECT_FALSE(why.empty());

  // Free and allocate again: the fd number is reused with a new inode; the old mapping stays
  // valid and the new region is mapped afresh.
  ASSERT_TRUE(freeShared(p));
  EXPECT_STREQ(m + 4100, "later");
  void* q = nullptr;
  ASSERT_TRUE(allocShared(&q, 8192).ok());
  std::strcpy(static_cast<char*>(q) + 4100, "second");
  int fd2 = -1;
  uint64_t ino2 = 0;
  ASSERT_TRUE(findShared(q, 1, &fd2, &off, &ino2));
  EXPECT_NE(ino2, ino);
  const char* m2 = mapPeerRegion(getpid(), fd2, ino2, 8192, &size, &why);
  ASSERT_NE(m2, nullptr) << why;
  EXPECT_STREQ(m2 + 4100, "second");
  if (fd2 == fd) {
    EXPECT_EQ(mapPeerRegion(getpid(), fd, ino2, 1, &size, &why), m2);
  }
  EXPECT_TRUE(freeShared(q));
}

TEST(SharedBuffers, ProbeOwnProcess) { EXPECT_TRUE(canMapPeerRegions(getpid())); }

}  // namespace
}  // namespace strata
