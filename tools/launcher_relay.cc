// launcher_relay.cc: line splitting and prefixing of rank output.
#include "tools/launcher_relay.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace strata::launcher {

void Sink::write(const std::string& data) {
  size_t off = 0;
  while (!broken_ && off < data.size()) {
    ssize_t n = ::write(fd_, data.data() + off, data.size() - off);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // Our stdout was handed to us non-blocking: wait until it drains.
      struct pollfd p = {fd_, POLLOUT, 0};
      poll(&p, 1, 1000);
    } else {
      broken_ = true;  // EPIPE and friends: nobody reads our output any more
    }
  }
}

void LineRelay::feed(const char* data, size_t n) {
  buf_.append(data, n);
  std::string out;
  size_t start = 0;
  for (size_t nl; (nl = buf_.find('\n', start)) != std::string::npos; start = nl + 1) {
    if (atLineStart_) out += prefix_;
    out.append(buf_, start, nl + 1 - start);
    atLineStart_ = true;
  }
  buf_.erase(0, start);
  if (buf_.size() >= kMaxLine) {
    if (atLineStart_) out += prefix_;
    out += buf_;
    buf_.clear();
    atLineStart_ = false;
  }
  if (!out.empty()) sink_->write(out);
}

bool LineRelay::readOnce(int fd) {
  char chunk[64 << 10];
  for (;;) {
    ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n > 0) {
      feed(chunk, static_cast<size_t>(n));
      return true;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;  // end of file, or an error we cannot recover from
  }
}

bool LineRelay::drain(int fd) {
  char chunk[64 << 10];
  // What a dead rank left in its pipe is at most the pipe's capacity (1 MiB at most by default);
  // the budget stops a surviving child of the rank that keeps writing from holding us here.
  size_t budget = 8u << 20;
  for (;;) {
    ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n > 0) {
      feed(chunk, static_cast<size_t>(n));
      if (static_cast<size_t>(n) >= budget) return true;
      budget -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

void LineRelay::flush() {
  std::string out;
  if (!buf_.empty()) {
    if (atLineStart_) out += prefix_;
    out += buf_;
    buf_.clear();
    atLineStart_ = false;
  }
  if (!atLineStart_ && !prefix_.empty()) out += '\n';
  atLineStart_ = true;
  if (!out.empty()) sink_->write(out);
}

}  // namespace strata::launcher
