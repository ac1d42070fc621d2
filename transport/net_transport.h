// net_transport.h: the contract of the transports between nodes beyond strata's own tcp (UCX,
// ibverbs). A communicator holds one NetTransport per kind it uses; the transport makes one
// Connection per remote peer, on the first transfer to that peer (connections are lazy, so a rank
// holds resources only for the peers it talks to). Setup data (UCX worker addresses, queue-pair
// numbers, GIDs) travels over an out-of-band socket: a connected, authenticated stream to the peer
// that the bootstrap made. The connection owns it, keeps it open for its life and watches it: EOF or
// an error there means the peer is gone, and a failing rank writes its reason there (sendFailure).
#pragma once

#include <memory>
#include <string>

#include "transport/connection.h"
#include "transport/status.h"

namespace strata {

class NetTransport {
 public:
  virtual ~NetTransport() = default;
  virtual const char* name() const = 0;
  /// The connection of rank `me` to `peer`, owning the non-blocking socket `oobFd`. Returns at
  /// once: the handshake runs inside the connection's progress(), and transfers posted before it
  /// ends wait in order. `rails` is how many rails (NICs) both ranks share, for striping.
  virtual Status connect(int me, int peer, int oobFd, int rails, std::unique_ptr<Connection>* out) = 0;
};

}  // namespace strata
