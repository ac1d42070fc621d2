// connection_openers.h: how each kind of connection is opened on first use (lazy_connection.h).
//   local: the peer's endpoint, found (same process) or mapped (shared memory) at setup: a peer
//          may finish its side of a transfer and destroy its communicator before this rank first
//          touches the pair, so endpoints cannot be looked up late. Never waits on the peer.
//   tcp:   k sockets through the bootstrap listener, the lower rank connecting; socket i runs on
//          rail i mod R of the R rails both ranks share, so large transfers stripe over every
//          rail (chunk g travels on socket g mod k).
//   net:   one out-of-band socket, then a NetTransport (UCX, ibverbs) makes the connection over it.
#pragma once

#include <memory>
#include <vector>

#include "transport/bootstrap.h"
#include "transport/lazy_connection.h"
#include "transport/local_endpoint.h"
#include "transport/net_transport.h"

namespace strata {

/// `myChannel` / `peerChannel`: the local ranks of the two (channel indices in the endpoints).
std::unique_ptr<ConnectionOpener> localOpener(int me, int peer, int myChannel, int peerChannel, bool sameProcess,
                                              int peerPid, std::shared_ptr<Endpoint> mine,
                                              std::shared_ptr<Endpoint> theirs);
/// `rails`: the initiator's rail (interface index) of each socket; the acceptor passes as many -1s.
std::unique_ptr<ConnectionOpener> tcpOpener(Bootstrap& bs, int peer, std::vector<int> rails, size_t chunkBytes);
std::unique_ptr<ConnectionOpener> netOpener(Bootstrap& bs, int peer, int rail, int sharedRails, NetTransport* net);

/// The rails (indices of rank a's interfaces) on which a and b have an interface in one subnet.
std::vector<int> sharedRails(const RankInfo& a, const RankInfo& b);

}  // namespace strata
