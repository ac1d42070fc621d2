// transport_setup.h: chooses a transport per peer and builds the connections of one communicator.
// Same process -> local (pointer mode); same machine -> local (shared memory); otherwise tcp.
// STRATA_TRANSPORT=tcp forces tcp for every peer (virtual clusters, testing the network path).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/bootstrap.h"
#include "transport/connection.h"
#include "transport/local_endpoint.h"

namespace strata {

struct CommTransports {
  std::vector<std::unique_ptr<Connection>> conns;  ///< indexed by peer rank; null for self
  std::shared_ptr<Endpoint> endpoint;              ///< this rank's, if it has local peers
  Doorbell ownBell;                                ///< used when there is no endpoint
  uint64_t commTag = 0;
  int rank = 0;

  Doorbell* bell() { return endpoint ? &endpoint->header()->bell : &ownBell; }
  /// Tells local peers this rank failed and breaks network connections so remote peers notice.
  void markFailed(const std::string& reason);
  ~CommTransports();
};

Status setupTransports(Bootstrap& bs, CommTransports* out);

}  // namespace strata
