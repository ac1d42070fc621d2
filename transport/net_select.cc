// net_select.cc: network transport capabilities, the per-pair choice, and the factories.
#include "transport/net_select.h"

#include <dirent.h>

#include "transport/config.h"
#ifdef STRATA_HAVE_UCX
#include "transport/ucx/ucx_transport.h"
#endif
#ifdef STRATA_HAVE_IBVERBS
#include "transport/ib/ib_transport.h"
#endif

namespace strata {
namespace {

bool hasRdmaDevice() {
  DIR* d = opendir("/sys/class/infiniband");
  if (!d) return false;
  bool any = false;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') any = true;
  closedir(d);
  return any;
}

}  // namespace

uint32_t localNetCaps() {
  static const uint32_t caps = [] {
    uint32_t c = hasRdmaDevice() ? uint32_t(kNetCapRdma) : 0u;
#ifdef STRATA_HAVE_UCX
    c |= kNetCapUcx;
#endif
#ifdef STRATA_HAVE_IBVERBS
    c |= kNetCapIb;
#endif
    return c;
  }();
  return caps;
}

const char* netChoiceName(NetChoice c) {
  switch (c) {
    case NetChoice::Ucx: return "ucx";
    case NetChoice::Ib: return "ib";
    default: return "tcp";
  }
}

Status chooseNet(const RankInfo& a, const RankInfo& b, NetChoice* out) {
  const std::string& t = config().transport;
  const auto lacks = [&](uint32_t cap) -> const RankInfo* {
    if (!(a.netCaps & cap)) return &a;
    if (!(b.netCaps & cap)) return &b;
    return nullptr;
  };
  if (t == "ucx") {
    if (const RankInfo* r = lacks(kNetCapUcx))
      return invalidUsage("STRATA_TRANSPORT=ucx, but rank {} ({}) runs a strata built without UCX", r->rank,
                          r->hostname);
    *out = NetChoice::Ucx;
  } else if (t == "ib") {
    if (const RankInfo* r = lacks(kNetCapIb))
      return invalidUsage("STRATA_TRANSPORT=ib, but rank {} ({}) runs a strata built without ibverbs", r->rank,
                          r->hostname);
    if (const RankInfo* r = lacks(kNetCapRdma))
      return invalidUsage("STRATA_TRANSPORT=ib, but rank {} ({}) has no RDMA device", r->rank, r->hostname);
    *out = NetChoice::Ib;
  } else if (t == "auto" || t == "local") {
    *out = lacks(kNetCapRdma) || lacks(kNetCapUcx) ? NetChoice::Tcp : NetChoice::Ucx;
  } else {
    *out = NetChoice::Tcp;
  }
  return OkStatus();
}

Status createNetTransport(NetChoice c, int rank, std::unique_ptr<NetTransport>* out) {
  switch (c) {
#ifdef STRATA_HAVE_UCX
    case NetChoice::Ucx: return createUcxTransport(rank, out);
#endif
#ifdef STRATA_HAVE_IBVERBS
    case NetChoice::Ib: return createIbTransport(rank, out);
#endif
    default:
      return internalError("rank {}: no {} transport in this build", rank, netChoiceName(c));
  }
}

}  // namespace strata
