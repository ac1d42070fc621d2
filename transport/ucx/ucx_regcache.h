// ucx_regcache.h: a bounded cache of memory registrations for user buffers, keyed by address range.
// A lookup reuses any cached registration that contains the requested range, else registers the
// page-aligned range. Entries in use by in-flight operations are pinned (reference counted); when
// the cache is over its byte or entry bound, the least recently used unpinned entries are unmapped,
// and a registration that cannot fit stays uncached (unmapped when its last user releases it).
// The registrar is an interface so the cache logic is unit-tested without UCX.
//
// Caveat: nothing tells the cache that user memory was freed (strata keeps UCX's memory hooks off),
// so an entry may outlive its buffer. On tcp that is harmless (a handle names addresses only); with
// RDMA memory domains a freed-and-reused range keeps the old pages pinned (seen on soft-RoCE: wrong
// reductions, docs/RDMA.md). So the cache is off by default (STRATA_UCX_REG_CACHE_BYTES=0);
// invalidate() drops overlapping entries for callers that know.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>

#include "transport/status.h"

namespace strata::ucx {

class Registrar {
 public:
  virtual ~Registrar() = default;
  virtual Status map(void* addr, size_t bytes, void** handle) = 0;
  virtual void unmap(void* handle) = 0;
};

class RegCache {
 public:
  struct Entry {
    uintptr_t begin = 0, end = 0;  ///< registered range [begin, end)
    void* handle = nullptr;
    int refs = 0;
    bool cached = false;
  };

  RegCache(Registrar* registrar, size_t maxBytes, size_t maxEntries);
  ~RegCache();
  RegCache(const RegCache&) = delete;
  RegCache& operator=(const RegCache&) = delete;

  /// A pinned registration covering [addr, addr + bytes); release it when the operation ends.
  Status acquire(const void* addr, size_t bytes, Entry** out);
  void release(Entry* e);
  /// Drops the unpinned entries overlapping [addr, addr + bytes) (the memory was freed).
  void invalidate(const void* addr, size_t bytes);

  size_t cachedBytes() const { return bytes_; }
  size_t cachedEntries() const { return lru_.size(); }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

  static constexpr uintptr_t kPage = 4096;

 private:
  void evictUntilFits(size_t newBytes);
  void drop(std::list<std::unique_ptr<Entry>>::iterator it);

  Registrar* reg_;
  size_t maxBytes_, maxEntries_;
  std::list<std::unique_ptr<Entry>> lru_;  ///< cached entries, most recently used first
  size_t bytes_ = 0;
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace strata::ucx
