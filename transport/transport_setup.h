// transport_setup.h: chooses a transport per peer and owns a communicator's connections.
// Same process and node -> local (pointer mode); same node -> local (shared memory); otherwise the
// network: tcp, striped over the rails both ranks share. Nodes come from the layout, so ranks on
// different virtual nodes of one machine use the network. STRATA_TRANSPORT=tcp forces tcp for
// every peer. Setup creates this rank's endpoint and finds or maps those of its local peers (a
// handful per node); connections are made on first use (lazy_connection.h), so a rank holds
// sockets and connection state only for the peers it talks to.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/bootstrap.h"
#include "transport/connection.h"
#include "transport/lazy_connection.h"
#include "transport/local_endpoint.h"
#include "transport/net_transport.h"
#include "topology/layout.h"

namespace strata {

/// None: a same-node peer of a network-only set of transports (it gets no connection).
enum class PeerKind : uint8_t { Self, Threads, Shm, Tcp, Net, None };

class CommTransports {
 public:
  ~CommTransports();
  /// The connection to `peer` (not this rank), made on first use. Never null (but for a None
  /// peer); a connection that could not be opened reports why from progress().
  Connection* conn(int peer) {
    Connection* c = open_[static_cast<size_t>(peer)];
    return c ? c : openSlow(peer);
  }
  Doorbell* bell() { return endpoint_ ? &endpoint_->header()->bell : &ownBell_; }
  /// Tells local peers this rank failed and breaks network connections so remote peers notice.
  void markFailed(const std::string& reason);
  /// How many connections this rank has made (opened or opening).
  int connectionCount() const;
  PeerKind kind(int peer) const { return kind_[static_cast<size_t>(peer)]; }
  /// The connection to `peer` if one was made already (open or opening), else null (never makes one).
  Connection* made(int peer) const {
    Connection* c = open_[static_cast<size_t>(peer)];
    return c ? c : lazy_[static_cast<size_t>(peer)].get();
  }

 private:
  friend Status setupTransports(Bootstrap& bs, const topology::CommLayout& layout, CommTransports* out,
                                bool networkOnly);
  Connection* openSlow(int peer);

  Bootstrap* bs_ = nullptr;
  const topology::CommLayout* layout_ = nullptr;
  std::vector<PeerKind> kind_;
  std::vector<std::unique_ptr<LazyConnection>> lazy_;  ///< indexed by peer; made on first use
  std::vector<Connection*> open_;                      ///< the real connection once open
  std::shared_ptr<Endpoint> endpoint_;                 ///< this rank's, if it has local peers
  std::vector<std::shared_ptr<Endpoint>> peerEndpoint_;  ///< local peers' (indexed by rank)
  std::unique_ptr<NetTransport> net_;                  ///< UCX / ibverbs, when chosen
  Doorbell ownBell_;                                   ///< used when there is no endpoint
  uint64_t commTag_ = 0;
  int rank_ = 0;
};

/// Classifies the peers and creates this rank's endpoint; a collective over `bs` (one barrier).
/// `bs` and `layout` must outlive `out`. `networkOnly`: only the peers this rank reaches over the
/// network get connections (the others are None): no endpoint, no barrier, nothing collective.
/// The device proxy uses such a set over a bootstrap of its own.
Status setupTransports(Bootstrap& bs, const topology::CommLayout& layout, CommTransports* out,
                       bool networkOnly = false);

}  // namespace strata
