// net_select.h: which network transport carries a pair of ranks on different nodes.
//   STRATA_TRANSPORT=tcp: strata's tcp for every peer (even on one node).
//   STRATA_TRANSPORT=ucx | ib: UCX / raw verbs between nodes (shared memory stays inside a node);
//     a rank that cannot (built without it, no RDMA device) makes setup fail naming it.
//   auto (and local): UCX when both ranks have an RDMA device and UCX, else tcp. Over plain
//     Ethernet strata's tcp measured faster than UCX's tcp (docs/PERFORMANCE.md); on RDMA UCX is
//     the default because strata's own verbs transport has not yet run on a device.
// The choice uses only what both ranks advertised (RankInfo::netCaps), so both ends agree.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "transport/bootstrap.h"
#include "transport/net_transport.h"

namespace strata {

enum NetCaps : uint32_t {
  kNetCapUcx = 1,   ///< this library has the UCX transport
  kNetCapIb = 2,    ///< this library has the ibverbs transport
  kNetCapRdma = 4,  ///< the machine has an RDMA device (/sys/class/infiniband)
};
/// What this process can use (for RankInfo::netCaps).
uint32_t localNetCaps();

enum class NetChoice : uint8_t { Tcp, Ucx, Ib };
const char* netChoiceName(NetChoice c);
/// The transport for ranks `a` and `b` of different nodes under STRATA_TRANSPORT; fails naming
/// the rank that lacks a forced transport.
Status chooseNet(const RankInfo& a, const RankInfo& b, NetChoice* out);
/// Creates the NetTransport of a choice other than Tcp.
Status createNetTransport(NetChoice c, int rank, std::unique_ptr<NetTransport>* out);

}  // namespace strata
