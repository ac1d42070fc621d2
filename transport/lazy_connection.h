// lazy_connection.h: a Connection made on first use. Until its opener yields the real connection
// (sockets connected and introduced, a peer's endpoint mapped, a UCX/verbs handshake done),
// transfers posted to it wait in order; they are handed over the moment it opens, and from then on
// the communicator talks to the real connection directly (CommTransports::conn), so the steady
// state pays nothing for the laziness.
#pragma once

#include <memory>
#include <vector>

#include "transport/connection.h"

namespace strata {

/// Opens one connection without blocking.
class ConnectionOpener {
 public:
  virtual ~ConnectionOpener() = default;
  /// Moves the opening on; sets *out once the connection exists. Fails naming the peer.
  virtual Status poll(std::unique_ptr<Connection>* out) = 0;
  /// What an unfinished opening waits on.
  virtual void addWaitSources(WaitSet* ws) = 0;
};

class LazyConnection final : public Connection {
 public:
  LazyConnection(int peer, const char* kind, std::unique_ptr<ConnectionOpener> opener);
  /// The real connection once open, else null.
  Connection* open() const { return inner_.get(); }

  int peer() const override { return peer_; }
  const char* kindName() const override { return inner_ ? inner_->kindName() : kind_; }
  void postSend(Transfer* t) override;
  void postRecv(Transfer* t) override;
  Status progress(bool* progressed) override;
  void addWaitSources(WaitSet* ws) override;
  Status checkPeer() override { return inner_ ? inner_->checkPeer() : failed_; }
  Status peerFailed() override { return inner_ ? inner_->peerFailed() : failed_; }
  bool idle() const override { return inner_ ? inner_->idle() : queued_.empty(); }
  void sendFailure(const std::string& reason) override;
  void abandonTransfers() override {
    if (inner_) inner_->abandonTransfers();
  }
  bool peekCallTag(CallTag* tag) override { return inner_ && inner_->peekCallTag(tag); }

 private:
  int peer_;
  const char* kind_;
  std::unique_ptr<ConnectionOpener> opener_;
  std::unique_ptr<Connection> inner_;
  std::vector<Transfer*> queued_;  ///< posted while opening, in order (kind tells send or receive)
  Status failed_;
};

}  // namespace strata
