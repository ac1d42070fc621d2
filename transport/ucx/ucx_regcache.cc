// ucx_regcache.cc: lookup, pinning and LRU eviction of cached registrations.
#include "transport/ucx/ucx_regcache.h"

namespace strata::ucx {

RegCache::RegCache(Registrar* registrar, size_t maxBytes, size_t maxEntries)
    : reg_(registrar), maxBytes_(maxBytes), maxEntries_(maxEntries) {}

RegCache::~RegCache() {
  // Entries still pinned belong to operations the owner failed to finish; unmap them too.
  for (auto& e : lru_) reg_->unmap(e->handle);
}

void RegCache::drop(std::list<std::unique_ptr<Entry>>::iterator it) {
  bytes_ -= (*it)->end - (*it)->begin;
  reg_->unmap((*it)->handle);
  lru_.erase(it);
}

void RegCache::evictUntilFits(size_t newBytes) {
  auto fits = [&] { return bytes_ + newBytes <= maxBytes_ && lru_.size() + 1 <= maxEntries_; };
  auto it = lru_.end();  // walk from the least recently used end
  while (!fits() && it != lru_.begin()) {
    auto cur = std::prev(it);
    if ((*cur)->refs == 0) drop(cur);  // `it` stays valid: list iterators survive erasure of others
    else it = cur;
  }
}

Status RegCache::acquire(const void* addr, size_t bytes, Entry** out) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr), z = a + bytes;
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    Entry* e = it->get();
    if (e->begin <= a && z <= e->end) {
      ++hits_;
      ++e->refs;
      lru_.splice(lru_.begin(), lru_, it);  // most recently used first
      *out = e;
      return OkStatus();
    }
  }
  ++misses_;
  auto e = std::make_unique<Entry>();
  e->begin = a & ~(kPage - 1);
  e->end = (z + kPage - 1) & ~(kPage - 1);
  const size_t len = e->end - e->begin;
  STRATA_RETURN_IF_ERROR(reg_->map(reinterpret_cast<void*>(e->begin), len, &e->handle));
  e->refs = 1;
  evictUntilFits(len);
  if (bytes_ + len <= maxBytes_ && lru_.size() + 1 <= maxEntries_) {
    e->cached = true;
    bytes_ += len;
    *out = e.get();
    lru_.push_front(std::move(e));
  } else {
    *out = e.release();  // uncached: freed by release()
  }
  return OkStatus();
}

void RegCache::release(Entry* e) {
  if (e == nullptr) return;
  if (--e->refs > 0 || e->cached) return;
  reg_->unmap(e->handle);
  delete e;
}

void RegCache::invalidate(const void* addr, size_t bytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr), z = a + bytes;
  for (auto it = lru_.begin(); it != lru_.end();) {
    auto next = std::next(it);
    if ((*it)->begin < z && a < (*it)->end && (*it)->refs == 0) drop(it);
    it = next;
  }
}

}  // namespace strata::ucx
