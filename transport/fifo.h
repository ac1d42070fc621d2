// fifo.h: a queue over a vector that reuses its storage: push at the back, pop at the front, and
// once drained it rewinds, so steady-state use never allocates (std::deque frees and reallocates
// blocks as it moves).
#pragma once

#include <cstddef>
#include <vector>

namespace strata {

template <typename T>
class Fifo {
 public:
  void push_back(const T& v) { items_.push_back(v); }
  T& front() { return items_[head_]; }
  const T& front() const { return items_[head_]; }
  void pop_front() {
    if (++head_ == items_.size()) {
      items_.clear();
      head_ = 0;
    }
  }
  bool empty() const { return head_ == items_.size(); }
  size_t size() const { return items_.size() - head_; }
  T* begin() { return items_.data() + head_; }
  T* end() { return items_.data() + items_.size(); }

 private:
  std::vector<T> items_;
  size_t head_ = 0;
};

}  // namespace strata
