// tcp_connection.cc: non-blocking progress of framed chunks over the sockets of one peer pair.
#include "transport/tcp_connection.h"

#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "kernels/host_reduce.h"
#include "transport/socket.h"

namespace strata {

constexpr uint32_t kChunkMagic = 0x43484e4b;  // "CHNK"
constexpr uint32_t kFailMagic = 0x4641494c;   // "FAIL": the peer failed; payload is its reason

TcpConnection::TcpConnection(int myRank, int peer, std::vector<int> fds, size_t chunkBytes)
    : me_(myRank), peer_(peer), chunk_(chunkBytes), socks_(fds.size()) {
  for (size_t i = 0; i < fds.size(); ++i) {
    socks_[i].fd = fds[i];
    socks_[i].nextRecvSeq = i;  // chunk g travels on socket g % k
    net::setNonBlocking(fds[i]);
    net::setNoDelay(fds[i]);
    int buf = 4 << 20;
    setsockopt(fds[i], SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    setsockopt(fds[i], SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
  }
}

TcpConnection::~TcpConnection() {
  // Leaving (the communicator is destroyed): a peer that still expects data from us reads why
  // after the data we did send, even if our close then resets the connection.
  if (!noticeSent_ && broken_.ok()) sendNotice(fmt::format("rank {} left: it destroyed its communicator", me_));
  for (SockState& s : socks_) net::closeFd(&s.fd);
}

void TcpConnection::sendNotice(const std::string& reason) {
  noticeSent_ = true;
  for (SockState& s : socks_) {
    if (s.fd < 0 || s.sending) continue;
    // Best effort, never blocking: the peer learns why before it sees the connection close.
    Header h{kFailMagic, 0, 0, reason.size(), reason.size(), CallTag{}};
    iovec iov[2] = {{&h, sizeof(h)}, {const_cast<char*>(reason.data()), reason.size()}};
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = 2;
    (void)::sendmsg(s.fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
}

void TcpConnection::postSend(Transfer* t) {
  Posted p{t, sendSeq_, chunksOf(t->bytes)};
  sendSeq_ += p.nchunks;
  sends_.push_back(p);
}

void TcpConnection::postRecv(Transfer* t) {
  Posted p{t, recvSeq_, chunksOf(t->bytes)};
  recvSeq_ += p.nchunks;
  recvs_.push_back(p);
}

Status TcpConnection::fail(Status st) {
  if (broken_.ok()) broken_ = st;
  return broken_;
}

Status TcpConnection::failWithNotice(Status st) {
  if (!broken_.ok()) return broken_;
  for (SockState& s : socks_) {
    std::string why;
    if (s.fd >= 0 && findFailNotice(s, &why)) return fail(remoteError("rank {} failed: {}", peer_, why));
  }
  return fail(std::move(st));
}

bool TcpConnection::findFailNotice(SockState& s, std::string* why) {
  // Parse on from where the receive side stands (in a header, or in a chunk's payload), reading
  // only what already arrived; the connection is broken, so the chunks read past are dropped.
  Header h = s.recvHdr;
  size_t have = s.haveHdr ? 0 : s.recvDone;
  uint64_t skip = s.haveHdr ? s.recvHdr.chunkBytes - s.recvDone : 0;
  char buf[16384];
  for (size_t budget = size_t{64} << 20; budget > 0;) {
    ssize_t r;
    if (skip > 0) {
      r = ::recv(s.fd, buf, std::min<uint64_t>(skip, sizeof(buf)), MSG_DONTWAIT);
      if (r <= 0) return false;
      skip -= static_cast<uint64_t>(r);
    } else {
      r = ::recv(s.fd, reinterpret_cast<char*>(&h) + have, sizeof(Header) - have, MSG_DONTWAIT);
      if (r <= 0) return false;
      have += static_cast<size_t>(r);
      if (have == sizeof(Header)) {
        have = 0;
        if (h.magic == kFailMagic) {
          why->assign(std::min<uint64_t>(h.chunkBytes, 1024), '\0');
          (void)net::recvAll(s.fd, why->data(), why->size(), net::nowSec() + 1, nullptr, "peer");
          return true;
        }
        if (h.magic != kChunkMagic) return false;
        skip = h.chunkBytes;
      }
    }
    budget -= std::min(budget, static_cast<size_t>(r));
  }
  return false;
}

bool TcpConnection::locate(Fifo<Posted>& q, uint64_t seq, Transfer** t, size_t* off) {
  for (Posted& p : q) {
    if (seq >= p.firstSeq && seq < p.firstSeq + p.nchunks) {
      *t = p.t;
      *off = (seq - p.firstSeq) * chunk_;
      return true;
    }
  }
  return false;
}

Status TcpConnection::progressSend(SockState& s, bool* progressed) {
  while (s.sending) {
    const size_t hdr = sizeof(Header), total = hdr + s.sendHdr.chunkBytes;
    ssize_t w;
    if (s.sendDone < hdr) {
      iovec iov[2] = {{reinterpret_cast<char*>(&s.sendHdr) + s.sendDone, hdr - s.sendDone},
                      {const_cast<char*>(s.sendData), s.sendHdr.chunkBytes}};
      msghdr m{};
      m.msg_iov = iov;
      m.msg_iovlen = 2;
      w = ::sendmsg(s.fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    } else {
      w = ::send(s.fd, s.sendData + (s.sendDone - hdr), total - s.sendDone, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return OkStatus();
      // A peer that failed and exited resets the connection when our data reaches it; the notice
      // it sent first may wait in our receive queue, unread because we receive nothing from it now.
      return failWithNotice(remoteError("connection to rank {} broke while sending: {}", peer_, strerror(errno)));
    }
    s.sendDone += static_cast<size_t>(w);
    *progressed = true;
    if (s.sendDone == total) {
      s.sending = false;
      s.sendT->posted += s.sendHdr.chunkBytes;
    }
  }
  return OkStatus();
}

Status TcpConnection::progressRecv(SockState& s, bool* progressed) {
  while (true) {
    if (!s.haveHdr) {
      // Only read a header once the receive it belongs to is posted.
      if (!locate(recvs_, s.nextRecvSeq, &s.recvT, &s.recvOff)) return OkStatus();
      ssize_t r = ::recv(s.fd, reinterpret_cast<char*>(&s.recvHdr) + s.recvDone, sizeof(Header) - s.recvDone,
                         MSG_DONTWAIT);
      if (r == 0) return fail(remoteError("rank {} closed the connection (peer exited or failed)", peer_));
      if (r < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return OkStatus();
        return fail(remoteError("connection to rank {} broke while receiving: {}", peer_, strerror(errno)));
      }
      s.recvDone += static_cast<size_t>(r);
      *progressed = true;
      if (s.recvDone < sizeof(Header)) return OkStatus();
      Transfer* t = s.recvT;
      const size_t expect = std::min(chunk_, t->bytes - s.recvOff);
      const Header& h = s.recvHdr;
      if (h.magic == kFailMagic) {
        std::string why(std::min<uint64_t>(h.chunkBytes, 1024), '\0');
        (void)net::recvAll(s.fd, why.data(), why.size(), net::nowSec() + 1, nullptr, "peer");
        return fail(remoteError("rank {} failed: {}", peer_, why));
      }
      if (h.magic != kChunkMagic || h.seq != s.nextRecvSeq)
        return fail(remoteError("framing error from rank {}: chunk header magic {:#x} seq {} (expected seq {})",
                                peer_, h.magic, h.seq, s.nextRecvSeq));
      if (h.call != t->call) return fail(callMismatch(peer_, h.call, me_, t->call));
      if (h.msgBytes != t->bytes || h.chunkBytes != expect)
        return fail(invalidUsage("message size mismatch: rank {} sent {} bytes, rank {} expects {} bytes", peer_,
                                 h.msgBytes, me_, t->bytes));
      s.haveHdr = true;
      s.recvDone = 0;
      if (t->kind == Transfer::RecvReduce && s.bounce.size() < chunk_) s.bounce.resize(chunk_);
    }
    Transfer* t = s.recvT;
    const size_t len = s.recvHdr.chunkBytes;
    char* dst = t->kind == Transfer::Recv ? static_cast<char*>(t->dst) + s.recvOff : s.bounce.data();
    while (s.recvDone < len) {
      ssize_t r = ::recv(s.fd, dst + s.recvDone, len - s.recvDone, MSG_DONTWAIT);
      if (r == 0) return fail(remoteError("rank {} closed the connection (peer exited or failed)", peer_));
      if (r < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return OkStatus();
        return fail(remoteError("connection to rank {} broke while receiving: {}", peer_, strerror(errno)));
      }
      s.recvDone += static_cast<size_t>(r);
      *progressed = true;
    }
    if (t->kind == Transfer::RecvReduce) {
      const size_t es = kernels::dtypeSize(t->dtype);
      kernels::reduce(static_cast<char*>(t->dst) + s.recvOff, static_cast<const char*>(t->src) + s.recvOff,
                      s.bounce.data(), len / es, t->dtype, t->op);
    }
    t->posted += len;
    s.haveHdr = false;
    s.recvDone = 0;
    s.nextRecvSeq += socks_.size();
  }
}

Status TcpConnection::progress(bool* progressed) {
  if (!broken_.ok()) return broken_;
  const size_t k = socks_.size();
  // Hand out send chunks in sequence order, each to its socket once that socket is free.
  while (nextAssign_ < sendSeq_) {
    SockState& s = socks_[nextAssign_ % k];
    if (s.sending) break;
    Transfer* t = nullptr;
    size_t off = 0;
    locate(sends_, nextAssign_, &t, &off);
    s.sendHdr = Header{kChunkMagic, 0, nextAssign_, t->bytes, std::min(chunk_, t->bytes - off), t->call};
    s.sendData = static_cast<const char*>(t->src) + off;
    s.sendDone = 0;
    s.sendT = t;
    s.sending = true;
    ++nextAssign_;
  }
  for (SockState& s : socks_) STRATA_RETURN_IF_ERROR(progressSend(s, progressed));
  for (SockState& s : socks_) STRATA_RETURN_IF_ERROR(progressRecv(s, progressed));
  while (!sends_.empty() && sends_.front().t->posted == sends_.front().t->bytes) {
    sends_.front().t->complete = true;
    sends_.pop_front();
    *progressed = true;
  }
  while (!recvs_.empty() && recvs_.front().t->posted == recvs_.front().t->bytes) {
    recvs_.front().t->complete = true;
    recvs_.pop_front();
    *progressed = true;
  }
  return OkStatus();
}

// Whether data the kernel still holds for this socket waits on the network rather than on the
// peer: unsent bytes while the peer's receive window is open (a slow or dead link; a peer that
// does not read closes its window instead).
static bool stuckOnTheLink(int fd) {
  int outq = 0, unsent = 0;
  if (ioctl(fd, SIOCOUTQ, &outq) != 0 || ioctl(fd, SIOCOUTQNSD, &unsent) != 0 || unsent <= 0) return false;
  // struct tcp_info is append-only kernel ABI; glibc's copy stops before tcpi_snd_wnd (the peer's
  // advertised window, bytes), which sits at offset 228 (Linux 5.19 and later).
  constexpr size_t kSndWndOffset = 228;
  unsigned char info[256] = {};
  socklen_t len = sizeof(info);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, info, &len) != 0 || len < kSndWndOffset + sizeof(uint32_t))
    return false;  // an older kernel: keep the orderly close
  uint32_t sndWnd = 0, mss = 0;
  std::memcpy(&sndWnd, info + kSndWndOffset, sizeof(sndWnd));
  std::memcpy(&mss, info + offsetof(tcp_info, tcpi_snd_mss), sizeof(mss));
  const uint64_t inFlight = static_cast<uint64_t>(outq - unsent);
  return sndWnd > inFlight + 2ull * mss;
}

void TcpConnection::sendFailure(const std::string& reason) {
  sendNotice(reason);
  for (SockState& s : socks_) {
    if (s.fd < 0) continue;
    ::shutdown(s.fd, SHUT_WR);  // not SHUT_RD: data that still arrives would make the kernel reset
                                 // the connection, and the peer lose the notice
    // Data (and the notice behind it) held back by a crawling link would trickle on to the peer
    // for minutes after we close, the peer "progressing" instead of failing: then our close
    // resets the connection (what already arrived stays readable to the peer; the reset follows
    // it). Data a peer has not read yet leaves as soon as it reads: that close stays orderly.
    if (stuckOnTheLink(s.fd)) {
      linger l{1, 0};
      setsockopt(s.fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    }
  }
}

Status TcpConnection::peerFailed() {
  if (!broken_.ok() || !recvs_.empty()) return broken_;  // with receives posted, progress() reads the notice
  for (SockState& s : socks_) {
    if (s.fd < 0 || s.haveHdr || s.recvDone) continue;
    Header h;
    if (::recv(s.fd, &h, sizeof(h), MSG_PEEK | MSG_DONTWAIT) != static_cast<ssize_t>(sizeof(h)) || h.magic != kFailMagic)
      continue;
    std::string why;
    if (findFailNotice(s, &why)) return fail(remoteError("rank {} failed: {}", peer_, why));
  }
  return OkStatus();
}

bool TcpConnection::peekCallTag(CallTag* tag) {
  if (!recvs_.empty() || !broken_.ok()) return false;
  SockState& s = socks_[recvSeq_ % socks_.size()];  // the next chunk to arrive
  if (s.haveHdr || s.recvDone || s.nextRecvSeq != recvSeq_) return false;
  Header h;
  if (::recv(s.fd, &h, sizeof(h), MSG_PEEK | MSG_DONTWAIT) != static_cast<ssize_t>(sizeof(h))) return false;
  if (h.magic != kChunkMagic) return false;
  *tag = h.call;
  return true;
}

void TcpConnection::addWaitSources(WaitSet* ws) {
  for (SockState& s : socks_) {
    short ev = 0;
    if (!recvs_.empty()) ev |= POLLIN;
    if (s.sending) ev |= POLLOUT;
    if (ev) ws->fds.push_back(pollfd{s.fd, ev, 0});
  }
}

}  // namespace strata
