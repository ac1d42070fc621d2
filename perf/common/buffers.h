// buffers.h: a rank's send and receive buffers, allocated once at the largest size and touched so
// that no page fault or allocation happens inside a timed loop. From malloc, or from the measured
// library's allocator (--alloc).
#pragma once

#include <cstddef>
#include <memory>

namespace strata::perf {

class Buffers {
 public:
  /// `alloc` / `release`: the library's allocator (null: malloc).
  explicit Buffers(size_t bytes, void* (*alloc)(size_t) = nullptr, void (*release)(void*) = nullptr);
  void* send() const { return send_.get(); }
  void* recv() const { return recv_.get(); }

 private:
  struct Free {
    void (*release)(void*) = nullptr;
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> send_, recv_;
};

}  // namespace strata::perf
