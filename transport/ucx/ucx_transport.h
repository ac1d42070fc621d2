// ucx_transport.h: the UCX NetTransport (one UCX context and worker per communicator, see
// ucx_context.h; one UcxConnection per peer, see ucx_connection.h). Built when UCX's development
// files are found (STRATA_HAVE_UCX).
#pragma once

#include <memory>

#include "transport/net_transport.h"
#include "transport/status.h"

namespace strata {

/// The UCX transport of rank `rank`; fails with a message naming the cause when UCX cannot start
/// (no usable network transport, bad STRATA_UCX_* / UCX_* settings).
Status createUcxTransport(int rank, std::unique_ptr<NetTransport>* out);

}  // namespace strata
