// transport_setup.h: chooses a transport per peer and builds the connections of one communicator.
// Same process and node -> local (pointer mode); same node -> local (shared memory); otherwise tcp,
// connected on the pair's rail (CommLayout::messageRail). Nodes come from the layout, so ranks on
// different virtual nodes of one machine use tcp. STRATA_TRANSPORT=tcp forces tcp for every peer.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/bootstrap.h"
#include "transport/connection.h"
#include "transport/local_endpoint.h"
#include "topology/layout.h"

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

Status setupTransports(Bootstrap& bs, const topology::CommLayout& layout, CommTransports* out);

}  // namespace strata
