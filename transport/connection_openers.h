// connection_openers.h: how each kind of connection is opened on first use (lazy_connection.h).
//   local: a same-process peer's endpoint from the registry, or another process's shared-memory
//          endpoint mapped (plus the single-copy probes); never waits on the peer.
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

std::unique_ptr<ConnectionOpener> localOpener(int me, int peer, uint64_t commTag, bool sameProcess, int peerPid,
                                              std::shared_ptr<Endpoint> mine);
/// `rails`: the initiator's rail (interface index) of each socket; the acceptor passes as many -1s.
std::unique_ptr<ConnectionOpener> tcpOpener(Bootstrap& bs, int peer, std::vector<int> rails, size_t chunkBytes);
std::unique_ptr<ConnectionOpener> netOpener(Bootstrap& bs, int peer, int rail, int sharedRails, NetTransport* net);

/// The rails (indices of rank a's interfaces) on which a and b have an interface in one subnet.
std::vector<int> sharedRails(const RankInfo& a, const RankInfo& b);

}  // namespace strata
