// reg_cache.h: a bounded cache of memory registrations (ibv_reg_mr results) keyed by page-aligned
// address range. A lookup covered by a cached range reuses it; regions in use by a transfer are
// pinned by a reference count; beyond `maxEntries`, the least recently used unpinned regions are
// deregistered. A new registration drops the unpinned cached ranges it overlaps. Nothing tells the
// cache that memory was freed: a range unmapped and mapped again at the same address would hit the
// old registration, whose pinned pages are the old ones. So the transport keeps no entries by
// default (STRATA_IB_REG_CACHE_ENTRIES=0: registration per transfer); a larger bound is for callers
// whose buffers stay mapped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "transport/status.h"

namespace strata::ib {

class RegCache {
 public:
  struct Region {
    uintptr_t begin = 0, end = 0;
    void* mr = nullptr;
    uint32_t lkey = 0, rkey = 0;
    int refs = 0;
    uint64_t lastUse = 0;
  };
  /// Registers [addr, addr+len) and returns the handle and keys.
  using RegisterFn = std::function<Status(void* addr, size_t len, void** mr, uint32_t* lkey, uint32_t* rkey)>;
  using DeregisterFn = std::function<void(void* mr)>;

  RegCache(size_t maxEntries, RegisterFn reg, DeregisterFn dereg);
  ~RegCache();
  RegCache(const RegCache&) = delete;
  RegCache& operator=(const RegCache&) = delete;

  /// A registered region covering [addr, addr+len), pinned until release().
  Status acquire(const void* addr, size_t len, Region** out);
  void release(Region* r);

  size_t size() const { return regions_.size(); }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }
  uint64_t evictions() const { return evictions_; }

 private:
  void drop(size_t i);
  void trim();

  size_t max_;
  RegisterFn reg_;
  DeregisterFn dereg_;
  std::vector<std::unique_ptr<Region>> regions_;
  uint64_t clock_ = 0, hits_ = 0, misses_ = 0, evictions_ = 0;
};

}  // namespace strata::ib
