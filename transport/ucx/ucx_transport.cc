// ucx_transport.cc: the UCX NetTransport: one context and worker per rail (one in all when the
// process has a single rail, see planRails), a connection per peer.
#include "transport/ucx/ucx_transport.h"

#include "transport/config.h"
#include "transport/log.h"
#include "transport/socket.h"
#include "transport/ucx/ucx_connection.h"
#include "transport/ucx/ucx_context.h"

namespace strata {
namespace {

class UcxTransport final : public NetTransport {
 public:
  UcxTransport(std::vector<std::shared_ptr<ucx::UcxContext>> ctxs, ucx::UcxTuning tuning)
      : ctxs_(std::move(ctxs)), tune_(tuning) {}
  const char* name() const override { return "ucx"; }
  Status connect(int me, int peer, int oobFd, int rails, std::unique_ptr<Connection>* out) override {
    if (me != ctxs_.front()->rank()) {
      net::closeFd(&oobFd);
      return internalError("UCX transport of rank {} asked to connect rank {}", ctxs_.front()->rank(), me);
    }
    if (peer < 0 || peer >= ucx::kMaxRanks || peer == me) {
      net::closeFd(&oobFd);
      return invalidArgument("UCX transport: rank {} cannot connect to rank {} (at most {} ranks)", me, peer,
                             ucx::kMaxRanks);
    }
    *out = std::make_unique<ucx::UcxConnection>(ctxs_, me, peer, oobFd, rails, tune_);
    return OkStatus();
  }

 private:
  std::vector<std::shared_ptr<ucx::UcxContext>> ctxs_;  ///< shared with the connections, which may outlive us
  ucx::UcxTuning tune_;
};

Status tuning(ucx::UcxTuning* out) {
  const Config& cfg = config();
  *out = ucx::UcxTuning{cfg.ucxChunkBytes, cfg.ucxInlineBytes, cfg.ucxWindow};
  if (out->chunkBytes % 16 != 0)
    return invalidArgument("STRATA_UCX_CHUNK_BYTES={} is not a multiple of 16 (reductions cut chunks at elements)",
                           out->chunkBytes);
  return OkStatus();
}

Status checkRank(int rank) {
  if (rank < 0 || rank >= ucx::kMaxRanks)
    return invalidArgument("UCX transport: rank {} is out of range (at most {} ranks)", rank, ucx::kMaxRanks);
  return OkStatus();
}

}  // namespace

Status createUcxTransport(int rank, std::unique_ptr<NetTransport>* out) {
  STRATA_RETURN_IF_ERROR(checkRank(rank));
  ucx::UcxTuning tune;
  STRATA_RETURN_IF_ERROR(tuning(&tune));
  std::vector<std::shared_ptr<ucx::UcxContext>> ctxs;
  const std::vector<ucx::RailSpec> rails = ucx::planRails(rank);
  for (const ucx::RailSpec& r : rails) {
    std::shared_ptr<ucx::UcxContext> ctx;
    Status st = ucx::UcxContext::create(rank, r, &ctx);
    if (!st.ok()) {
      // A rail UCX cannot use alone: one context over UCX's own devices, as without rails.
      log::info("ucx: rank {}: no UCX context on rail device(s) {} ({}); not striping", rank, r.devices,
                st.message());
      ctxs.clear();
      break;
    }
    ctxs.push_back(std::move(ctx));
  }
  if (ctxs.empty()) {
    std::shared_ptr<ucx::UcxContext> ctx;
    STRATA_RETURN_IF_ERROR(ucx::UcxContext::create(rank, ucx::RailSpec{}, &ctx));
    ctxs.push_back(std::move(ctx));
  } else {
    std::string names;
    for (const ucx::RailSpec& r : rails) names += (names.empty() ? "" : " | ") + r.devices;
    log::debug("ucx: rank {}: {} rails: {}", rank, ctxs.size(), names);
  }
  *out = std::make_unique<UcxTransport>(std::move(ctxs), tune);
  return OkStatus();
}

namespace ucx {

Status createTransportOnRails(int rank, const std::vector<std::string>& railDevices,
                              std::unique_ptr<NetTransport>* out) {
  STRATA_RETURN_IF_ERROR(checkRank(rank));
  if (railDevices.empty() || railDevices.size() > static_cast<size_t>(kMaxRails))
    return invalidArgument("UCX transport: {} rails (1..{})", railDevices.size(), kMaxRails);
  UcxTuning tune;
  STRATA_RETURN_IF_ERROR(tuning(&tune));
  std::vector<std::shared_ptr<UcxContext>> ctxs;
  for (const std::string& d : railDevices) {
    std::shared_ptr<UcxContext> ctx;
    STRATA_RETURN_IF_ERROR(UcxContext::create(rank, RailSpec{d, 0, 0}, &ctx));
    ctxs.push_back(std::move(ctx));
  }
  *out = std::make_unique<UcxTransport>(std::move(ctxs), tune);
  return OkStatus();
}

}  // namespace ucx
}  // namespace strata
