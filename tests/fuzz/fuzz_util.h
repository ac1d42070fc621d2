// fuzz_util.h: small helpers shared by the fuzz targets: a check that aborts (libFuzzer reports it
// as a crash, with the input), and a reader that takes bytes off the front of the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#define FUZZ_CHECK(cond, ...)                                                   \
  do {                                                                          \
    if (!(cond)) {                                                              \
      std::fprintf(stderr, "fuzz check failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, "  " __VA_ARGS__);                                   \
      std::fprintf(stderr, "\n");                                               \
      std::abort();                                                             \
    }                                                                           \
  } while (0)

namespace fuzz {

/// Takes fixed-size values and strings off the front of the input; past the end it yields zeros.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  size_t left() const { return n_; }
  template <typename T>
  T take() {
    T v{};
    const size_t k = n_ < sizeof(T) ? n_ : sizeof(T);
    std::memcpy(&v, p_, k);
    p_ += k;
    n_ -= k;
    return v;
  }
  /// `k` bytes (fewer at the end).
  std::string bytes(size_t k) {
    if (k > n_) k = n_;
    std::string s(reinterpret_cast<const char*>(p_), k);
    p_ += k;
    n_ -= k;
    return s;
  }
  /// Up to the next '\n' (consumed, not returned), or the rest.
  std::string line() {
    const void* nl = std::memchr(p_, '\n', n_);
    const size_t k = nl ? static_cast<size_t>(static_cast<const uint8_t*>(nl) - p_) : n_;
    std::string s = bytes(k);
    if (nl) bytes(1);
    return s;
  }
  std::string rest() { return bytes(n_); }

 private:
  const uint8_t* p_;
  size_t n_;
};

}  // namespace fuzz
