// connection_openers.cc: the local, tcp and network-transport openers.
#include "transport/connection_openers.h"

#include <fmt/format.h>

#include "transport/config.h"
#include "transport/local_connection.h"
#include "transport/log.h"
#include "transport/shared_buffers.h"
#include "transport/socket.h"
#include "transport/tcp_connection.h"

namespace strata {
namespace {

class LocalOpener final : public ConnectionOpener {
 public:
  LocalOpener(int me, int peer, uint64_t tag, bool sameProcess, int pid, std::shared_ptr<Endpoint> mine)
      : me_(me), peer_(peer), tag_(tag), sameProcess_(sameProcess), pid_(pid), mine_(std::move(mine)) {}

  Status poll(std::unique_ptr<Connection>* out) override {
    const Config& cfg = config();
    std::shared_ptr<Endpoint> theirs;
    if (sameProcess_) {
      theirs = findLocalEndpoint(tag_, peer_);
      if (!theirs)
        return remoteError("rank {}: the endpoint of rank {} (same process) is gone: it destroyed its communicator",
                           me_, peer_);
    } else {
      Status st = Endpoint::open(endpointShmName(tag_, peer_, pid_), peer_, &theirs);
      if (!st.ok())
        return remoteError("rank {}: cannot map the endpoint of rank {} (exited or failed?): {}", me_, peer_,
                           st.message());
      // Tell the peer (through our channel for it) whether we can read its memory directly.
      if (cfg.localCma && probeCma(pid_, theirs->header()->probeAddr, theirs->header()->magic))
        mine_->channel(peer_)->cmaReadable.store(1, std::memory_order_release);
      // And whether we can map its strataMemAlloc regions (through /proc/<pid>/fd).
      if (cfg.sharedMinBytes > 0) {
        if (canMapPeerRegions(pid_)) mine_->channel(peer_)->sharedReadable.store(1, std::memory_order_release);
        else
          log::info("rank {}: cannot open /proc/{}/fd of rank {}: its strataMemAlloc buffers come through the "
                    "staging slots", me_, pid_, peer_);
      }
    }
    *out = std::make_unique<LocalConnection>(me_, peer_, mine_, std::move(theirs), sameProcess_, pid_);
    return OkStatus();
  }
  void addWaitSources(WaitSet*) override {}

 private:
  int me_, peer_;
  uint64_t tag_;
  bool sameProcess_;
  int pid_;
  std::shared_ptr<Endpoint> mine_;
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
  TcpOpener(Bootstrap& bs, int peer, std::vector<int> rails, size_t chunk) : bs_(bs), peer_(peer), chunk_(chunk) {
    started_ = sockets_.start(bs, peer, Bootstrap::kData, rails);
  }
  Status poll(std::unique_ptr<Connection>* out) override {
    STRATA_RETURN_IF_ERROR(started_);
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
  SocketSet sockets_;
  Status started_;
};

class NetOpener final : public ConnectionOpener {
 public:
  NetOpener(Bootstrap& bs, int peer, int rail, int rails, NetTransport* net)
      : bs_(bs), peer_(peer), rails_(rails), net_(net) {
    started_ = oob_.start(bs, peer, Bootstrap::kNetOob, {rail});
  }
  Status poll(std::unique_ptr<Connection>* out) override {
    STRATA_RETURN_IF_ERROR(started_);
    bool done = false;
    STRATA_RETURN_IF_ERROR(oob_.poll(&done));
    if (!done) return OkStatus();
    std::vector<int> fd = oob_.take();
    return net_->connect(bs_.rank(), peer_, fd[0], rails_, out);
  }
  void addWaitSources(WaitSet* ws) override { oob_.addWaitSources(ws); }

 private:
  Bootstrap& bs_;
  int peer_, rails_;
  NetTransport* net_;
  SocketSet oob_;
  Status started_;
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

std::unique_ptr<ConnectionOpener> localOpener(int me, int peer, uint64_t commTag, bool sameProcess, int peerPid,
                                              std::shared_ptr<Endpoint> mine) {
  return std::make_unique<LocalOpener>(me, peer, commTag, sameProcess, peerPid, std::move(mine));
}

std::unique_ptr<ConnectionOpener> tcpOpener(Bootstrap& bs, int peer, std::vector<int> rails, size_t chunkBytes) {
  return std::make_unique<TcpOpener>(bs, peer, std::move(rails), chunkBytes);
}

std::unique_ptr<ConnectionOpener> netOpener(Bootstrap& bs, int peer, int rail, int rails, NetTransport* net) {
  return std::make_unique<NetOpener>(bs, peer, rail, rails, net);
}

}  // namespace strata
