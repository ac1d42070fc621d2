// connection_openers.cc: the local, tcp and network-transport openers.
#include "transport/connection_openers.h"

#include <fmt/format.h>

#include "transport/local_connection.h"
#include "transport/socket.h"
#include "transport/tcp_connection.h"

namespace strata {
namespace {

class LocalOpener final : public ConnectionOpener {
 public:
  LocalOpener(int me, int peer, int myChannel, int peerChannel, bool sameProcess, int pid,
              std::shared_ptr<Endpoint> mine, std::shared_ptr<Endpoint> theirs)
      : me_(me), peer_(peer), myChannel_(myChannel), peerChannel_(peerChannel), sameProcess_(sameProcess), pid_(pid),
        mine_(std::move(mine)), theirs_(std::move(theirs)) {}

  Status poll(std::unique_ptr<Connection>* out) override {
    *out = std::make_unique<LocalConnection>(me_, peer_, myChannel_, peerChannel_, mine_, theirs_, sameProcess_, pid_);
    return OkStatus();
  }
  void addWaitSources(WaitSet*) override {}

 private:
  int me_, peer_, myChannel_, peerChannel_;
  bool sameProcess_;
  int pid_;
  std::shared_ptr<Endpoint> mine_, theirs_;
};

// Opens `count` sockets of one kind to a peer (all at once, without blocking).
class SocketSet {
 public:
  Status start(Bootstrap& bs, int peer, Bootstrap::Kind kind, const std::vector<int>& rails) {
    bs_ = &bs;
    const bool initiator = bs.rank() < peer;
    open_.resize(rails.size());
    fds_.assign(rails.size(), -1);
    for (size_t i = 0; i < rails.size(); ++i)
      STRATA_RETURN_IF_ERROR(bs.startOpen(peer, kind, static_cast<int>(i), rails[i], initiator, &open_[i]));
    return OkStatus();
  }
  /// True once every socket is open.
  Status poll(bool* done) {
    *done = true;
    for (size_t i = 0; i < open_.size(); ++i) {
      if (fds_[i] < 0) STRATA_RETURN_IF_ERROR(bs_->pollOpen(&open_[i], &fds_[i]));
      *done = *done && fds_[i] >= 0;
    }
    return OkStatus();
  }
  void addWaitSources(WaitSet* ws) const {
    for (size_t i = 0; i < open_.size(); ++i)
      if (fds_[i] < 0) bs_->addOpenWaitSources(open_[i], ws);
  }
  std::vector<int> take() { return std::move(fds_); }
  ~SocketSet() {
    for (int& fd : fds_) net::closeFd(&fd);
    for (Bootstrap::Opening& o : open_) net::closeFd(&o.fd);
  }

 private:
  Bootstrap* bs_ = nullptr;
  std::vector<Bootstrap::Opening> open_;
  std::vector<int> fds_;
};

class TcpOpener final : public ConnectionOpener {
 public:
  TcpOpener(Bootstrap& bs, int peer, std::vector<int> rails, size_t chunk)
      : bs_(bs), peer_(peer), chunk_(chunk), rails_(std::move(rails)) {}
  Status poll(std::unique_ptr<Connection>* out) override {
    // Connect on the first poll, not when the connection object is made (asking a peer's kind
    // makes it): the peer drops a connection whose hello does not follow within seconds, and
    // from here on this opening is polled until its hello is out.
    if (!started_) {
      started_ = true;
      STRATA_RETURN_IF_ERROR(sockets_.start(bs_, peer_, Bootstrap::kData, rails_));
    }
    bool done = false;
    STRATA_RETURN_IF_ERROR(sockets_.poll(&done));
    if (done) *out = std::make_unique<TcpConnection>(bs_.rank(), peer_, sockets_.take(), chunk_);
    return OkStatus();
  }
  void addWaitSources(WaitSet* ws) override { sockets_.addWaitSources(ws); }

 private:
  Bootstrap& bs_;
  int peer_;
  size_t chunk_;
  std::vector<int> rails_;
  SocketSet sockets_;
  bool started_ = false;
};

class NetOpener final : public ConnectionOpener {
 public:
  NetOpener(Bootstrap& bs, int peer, int rail, int rails, NetTransport* net)
      : bs_(bs), peer_(peer), rail_(rail), rails_(rails), net_(net) {}
  Status poll(std::unique_ptr<Connection>* out) override {
    if (!started_) {  // on the first poll, as TcpOpener
      started_ = true;
      STRATA_RETURN_IF_ERROR(oob_.start(bs_, peer_, Bootstrap::kNetOob, {rail_}));
    }
    bool done = false;
    STRATA_RETURN_IF_ERROR(oob_.poll(&done));
    if (!done) return OkStatus();
    std::vector<int> fd = oob_.take();
    return net_->connect(bs_.rank(), peer_, fd[0], rails_, out);
  }
  void addWaitSources(WaitSet* ws) override { oob_.addWaitSources(ws); }

 private:
  Bootstrap& bs_;
  int peer_, rail_, rails_;
  NetTransport* net_;
  SocketSet oob_;
  bool started_ = false;
};

}  // namespace

std::vector<int> sharedRails(const RankInfo& a, const RankInfo& b) {
  std::vector<int> rails;
  for (uint32_t i = 0; i < a.nifs && i < RankInfo::kMaxIfs; ++i)
    for (uint32_t j = 0; j < b.nifs && j < RankInfo::kMaxIfs; ++j)
      if (a.ifMask[i] == b.ifMask[j] && (a.ifAddr[i] & a.ifMask[i]) == (b.ifAddr[j] & b.ifMask[j])) {
        rails.push_back(static_cast<int>(i));
        break;
      }
  return rails;
}

std::unique_ptr<ConnectionOpener> localOpener(int me, int peer, int myChannel, int peerChannel, bool sameProcess,
                                              int peerPid, std::shared_ptr<Endpoint> mine,
                                              std::shared_ptr<Endpoint> theirs) {
  return std::make_unique<LocalOpener>(me, peer, myChannel, peerChannel, sameProcess, peerPid, std::move(mine),
                                       std::move(theirs));
}

std::unique_ptr<ConnectionOpener> tcpOpener(Bootstrap& bs, int peer, std::vector<int> rails, size_t chunkBytes) {
  return std::make_unique<TcpOpener>(bs, peer, std::move(rails), chunkBytes);
}

std::unique_ptr<ConnectionOpener> netOpener(Bootstrap& bs, int peer, int rail, int rails, NetTransport* net) {
  return std::make_unique<NetOpener>(bs, peer, rail, rails, net);
}

}  // namespace strata
