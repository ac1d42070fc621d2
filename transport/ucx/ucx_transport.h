// ucx_transport.h: the UCX NetTransport (per communicator one UCX context and worker per rail, see
// ucx_context.h; one UcxConnection per peer, striping large transfers over the rails both share,
// see ucx_connection.h). Built when UCX's development files are found (STRATA_HAVE_UCX).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/net_transport.h"
#include "transport/status.h"

namespace strata {

/// The UCX transport of rank `rank`; fails with a message naming the cause when UCX cannot start
/// (no usable network transport, bad STRATA_UCX_* / UCX_* settings).
Status createUcxTransport(int rank, std::unique_ptr<NetTransport>* out);

namespace ucx {
/// For tests: a transport with one rail per entry of `railDevices` (each a UCX_NET_DEVICES value,
/// e.g. {"lo", "lo"}: two rails over loopback), whatever the interfaces; rails have no subnet, so
/// they pair with the peer's by index.
Status createTransportOnRails(int rank, const std::vector<std::string>& railDevices,
                              std::unique_ptr<NetTransport>* out);
}  // namespace ucx

}  // namespace strata
