// ib_handshake.cc: framing, non-blocking socket I/O and the state transitions of the oob handshake.
#include "transport/ib/ib_handshake.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "transport/socket.h"

namespace strata::ib {
namespace {
constexpr uint32_t kFrameMagic = 0x5349424f;  // "SIBO"
constexpr uint32_t kMaxFrame = 64 << 10;
struct FrameHeader {
  uint32_t magic, type, len;
};
}  // namespace

Handshake::Handshake(int me, int peer, int fd, const Hello& mine, Hooks* hooks)
    : me_(me), peer_(peer), fd_(fd), hooks_(hooks) {
  net::setNonBlocking(fd_);
  queue(kHello, &mine, sizeof(mine));
}

Handshake::~Handshake() { net::closeFd(&fd_); }

void Handshake::queue(uint32_t type, const void* p, size_t n) {
  FrameHeader h{kFrameMagic, type, static_cast<uint32_t>(n)};
  out_.append(reinterpret_cast<const char*>(&h), sizeof(h));
  out_.append(static_cast<const char*>(p), n);
}

Status Handshake::fail(Status st) {
  if (status_.ok()) status_ = st;
  state_ = State::Failed;
  return status_;
}

Status Handshake::closedError() const {
  if (state_ == State::Connected) return remoteError("rank {} closed the connection (peer exited or failed)", peer_);
  return remoteError("rank {} closed the connection during the ibverbs handshake (peer exited or failed)", peer_);
}

Status Handshake::handle(uint32_t type, const std::string& payload, bool* progressed) {
  *progressed = true;
  if (type == kFail)
    return fail(remoteError("rank {} failed: {}", peer_, payload));
  switch (state_) {
    case State::AwaitHello: {
      Hello h{};
      if (type != kHello || payload.size() != sizeof(Hello))
        return fail(remoteError("ibverbs handshake with rank {}: expected HELLO, got frame type {} ({} bytes)", peer_,
                                type, payload.size()));
      memcpy(&h, payload.data(), sizeof(h));
      if (h.version != kVersion || h.rank != peer_)
        return fail(remoteError("ibverbs handshake: expected rank {} (protocol {}), got rank {} (protocol {})", peer_,
                                kVersion, h.rank, h.version));
      Info mine;
      if (Status st = hooks_->onHello(h, &mine); !st.ok()) return fail(st);
      queue(kInfo, &mine, sizeof(mine));
      state_ = State::AwaitInfo;
      return OkStatus();
    }
    case State::AwaitInfo: {
      Info info;
      if (type != kInfo || payload.size() != sizeof(Info))
        return fail(remoteError("ibverbs handshake with rank {}: expected INFO, got frame type {} ({} bytes)", peer_,
                                type, payload.size()));
      memcpy(&info, payload.data(), sizeof(info));
      if (Status st = hooks_->onInfo(info); !st.ok()) return fail(st);
      queue(kReady, nullptr, 0);
      state_ = State::AwaitReady;
      return OkStatus();
    }
    case State::AwaitReady:
      if (type != kReady)
        return fail(remoteError("ibverbs handshake with rank {}: expected READY, got frame type {}", peer_, type));
      state_ = State::Connected;
      return OkStatus();
    default:
      return fail(remoteError("ibverbs: unexpected frame type {} from rank {} after the handshake", type, peer_));
  }
}

Status Handshake::progress(bool* progressed) {
  if (state_ == State::Failed) return status_;
  if (shut_) return fail(remoteError("ibverbs connection to rank {} was shut down after a local failure", peer_));
  while (!out_.empty()) {
    ssize_t w = ::send(fd_, out_.data(), out_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      if (errno == EPIPE || errno == ECONNRESET) return fail(closedError());
      return fail(remoteError("oob socket to rank {} broke: {}", peer_, strerror(errno)));
    }
    out_.erase(0, static_cast<size_t>(w));
    *progressed = true;
  }
  bool eof = false;
  char buf[4096];
  while (true) {
    ssize_t r = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (r == 0) {
      eof = true;
      break;
    }
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      if (errno == ECONNRESET) {
        eof = true;
        break;
      }
      return fail(remoteError("oob socket to rank {} broke: {}", peer_, strerror(errno)));
    }
    in_.append(buf, static_cast<size_t>(r));
    *progressed = true;
  }
  // Whole frames first: a failing peer writes FAIL just before it closes.
  while (in_.size() >= sizeof(FrameHeader)) {
    FrameHeader h;
    memcpy(&h, in_.data(), sizeof(h));
    if (h.magic != kFrameMagic || h.len > kMaxFrame)
      return fail(remoteError("ibverbs: garbled oob frame from rank {} (magic {:#x}, length {})", peer_, h.magic, h.len));
    if (in_.size() < sizeof(h) + h.len) break;
    std::string payload = in_.substr(sizeof(h), h.len);
    in_.erase(0, sizeof(h) + h.len);
    STRATA_RETURN_IF_ERROR(handle(h.type, payload, progressed));
    // The frames queued by handle() go out on the next call (or now, to save a round).
    while (!out_.empty()) {
      ssize_t w = ::send(fd_, out_.data(), out_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w <= 0) break;
      out_.erase(0, static_cast<size_t>(w));
    }
  }
  if (eof) return fail(closedError());
  return OkStatus();
}

void Handshake::addWaitSources(WaitSet* ws) const {
  if (fd_ < 0 || state_ == State::Failed) return;
  short ev = POLLIN;
  if (!out_.empty()) ev |= POLLOUT;
  ws->fds.push_back(pollfd{fd_, ev, 0});
}

void Handshake::sendFailure(const std::string& reason) {
  if (fd_ < 0 || shut_) return;
  std::string r = reason.substr(0, kMaxFrame);
  if (out_.empty()) {  // never interleave with a partly written frame
    FrameHeader h{kFrameMagic, kFail, static_cast<uint32_t>(r.size())};
    std::string frame(reinterpret_cast<const char*>(&h), sizeof(h));
    frame += r;
    (void)::send(fd_, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  ::shutdown(fd_, SHUT_RDWR);
  shut_ = true;
}

}  // namespace strata::ib
