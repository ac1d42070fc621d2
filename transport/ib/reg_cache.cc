// reg_cache.cc: lookup, pinning and LRU eviction of cached memory registrations.
#include "transport/ib/reg_cache.h"

#include <unistd.h>

namespace strata::ib {

RegCache::RegCache(size_t maxEntries, RegisterFn reg, DeregisterFn dereg)
    : max_(maxEntries), reg_(std::move(reg)), dereg_(std::move(dereg)) {}

RegCache::~RegCache() {
  for (auto& r : regions_) dereg_(r->mr);
}

void RegCache::drop(size_t i) {
  dereg_(regions_[i]->mr);
  regions_.erase(regions_.begin() + static_cast<long>(i));
  ++evictions_;
}

void RegCache::trim() {
  while (regions_.size() > max_) {
    size_t victim = regions_.size();
    for (size_t i = 0; i < regions_.size(); ++i)
      if (regions_[i]->refs == 0 && (victim == regions_.size() || regions_[i]->lastUse < regions_[victim]->lastUse))
        victim = i;
    if (victim == regions_.size()) return;  // everything is pinned: shrink on later releases
    drop(victim);
  }
}

Status RegCache::acquire(const void* addr, size_t len, Region** out) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t begin = a & ~(page - 1), end = (a + (len ? len : 1) + page - 1) & ~(page - 1);
  for (auto& r : regions_) {
    if (r->begin <= begin && end <= r->end) {
      ++r->refs;
      r->lastUse = ++clock_;
      ++hits_;
      *out = r.get();
      return OkStatus();
    }
  }
  ++misses_;
  for (size_t i = regions_.size(); i-- > 0;)
    if (regions_[i]->refs == 0 && regions_[i]->begin < end && begin < regions_[i]->end) drop(i);
  auto r = std::make_unique<Region>();
  r->begin = begin;
  r->end = end;
  STRATA_RETURN_IF_ERROR(reg_(reinterpret_cast<void*>(begin), end - begin, &r->mr, &r->lkey, &r->rkey));
  r->refs = 1;
  r->lastUse = ++clock_;
  *out = r.get();
  regions_.push_back(std::move(r));
  trim();
  return OkStatus();
}

void RegCache::release(Region* r) {
  if (r->refs > 0) --r->refs;
  trim();
}

}  // namespace strata::ib
