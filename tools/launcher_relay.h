// launcher_relay.h: relays one rank stream (stdout or stderr) to the launcher's own, line by line,
// each line prefixed with "[R] ". Whole lines go out in one write, so lines of different ranks
// never interleave mid-line.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

namespace strata::launcher {

/// A destination (the launcher's stdout or stderr). Once it fails (EPIPE: the reader went away)
/// further output to it is dropped; the ranks keep running.
class Sink {
 public:
  explicit Sink(int fd) : fd_(fd) {}
  void write(const std::string& data);
  int fd() const { return fd_; }

 private:
  int fd_;
  bool broken_ = false;
};

class LineRelay {
 public:
  /// A line longer than this is passed on in pieces (a prefix only before the first piece).
  static constexpr size_t kMaxLine = 64 << 10;

  /// `prefix` is "" for --no-prefix; then the bytes pass through unchanged.
  LineRelay(Sink* sink, std::string prefix) : sink_(sink), prefix_(std::move(prefix)) {}

  /// One non-blocking read of `fd` (at most 64 KiB, so one busy rank cannot starve the others),
  /// relaying the complete lines. Returns false at end of file or on a read error.
  bool readOnce(int fd);
  /// Reads `fd` until it would block or ends (or 8 MiB came). Returns false at end of file or error.
  bool drain(int fd);
  /// Passes on a partial last line; with a prefix, ends it with a newline so the next line of
  /// another rank starts on its own line.
  void flush();

  /// Relays `data` as if read from the rank (exposed for tests of the splitting).
  void feed(const char* data, size_t n);

 private:
  Sink* sink_;
  std::string prefix_;
  std::string buf_;  ///< the incomplete line so far
  bool atLineStart_ = true;
};

}  // namespace strata::launcher
