// buffers.cc: page-aligned, pre-touched host buffers.
#include "perf/common/buffers.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace strata::perf {
namespace {

void* allocate(size_t bytes) {
  constexpr size_t kAlign = 4096;
  const size_t size = (bytes + kAlign - 1) / kAlign * kAlign + kAlign;  // never 0
  void* p = std::aligned_alloc(kAlign, size);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, size);
  return p;
}

}  // namespace

void Buffers::Free::operator()(void* p) const { std::free(p); }

Buffers::Buffers(size_t bytes) : send_(allocate(bytes)), recv_(allocate(bytes)) {}

}  // namespace strata::perf
