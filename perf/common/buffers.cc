// buffers.cc: page-aligned, pre-touched host buffers (malloc or the library's allocator).
#include "perf/common/buffers.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace strata::perf {
namespace {

void* allocate(size_t bytes, void* (*alloc)(size_t)) {
  constexpr size_t kAlign = 4096;
  const size_t size = (bytes + kAlign - 1) / kAlign * kAlign + kAlign;  // never 0
  void* p = alloc ? alloc(size) : std::aligned_alloc(kAlign, size);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, size);
  return p;
}

}  // namespace

void Buffers::Free::operator()(void* p) const {
  if (release)
    release(p);
  else
    std::free(p);
}

Buffers::Buffers(size_t bytes, void* (*alloc)(size_t), void (*release)(void*))
    : send_(allocate(bytes, alloc), Free{release}), recv_(allocate(bytes, alloc), Free{release}) {}

}  // namespace strata::perf
