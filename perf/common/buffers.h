// buffers.h: a rank's send and receive buffers, allocated once at the largest size and touched so
// that no page fault or allocation happens inside a timed loop.
#pragma once

#include <cstddef>
#include <memory>

namespace strata::perf {

class Buffers {
 public:
  explicit Buffers(size_t bytes);
  void* send() const { return send_.get(); }
  void* recv() const { return recv_.get(); }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> send_, recv_;
};

}  // namespace strata::perf
