// ucx_transport.cc: the UCX NetTransport: one context and worker, a connection per peer.
#include "transport/ucx/ucx_transport.h"

#include "transport/config.h"
#include "transport/socket.h"
#include "transport/ucx/ucx_connection.h"
#include "transport/ucx/ucx_context.h"

namespace strata {
namespace {

class UcxTransport final : public NetTransport {
 public:
  UcxTransport(std::shared_ptr<ucx::UcxContext> ctx, ucx::UcxTuning tuning) : ctx_(std::move(ctx)), tune_(tuning) {}
  const char* name() const override { return "ucx"; }
  Status connect(int me, int peer, int oobFd, int rails, std::unique_ptr<Connection>* out) override {
    if (me != ctx_->rank()) {
      net::closeFd(&oobFd);
      return internalError("UCX transport of rank {} asked to connect rank {}", ctx_->rank(), me);
    }
    if (peer < 0 || peer >= ucx::kMaxRanks || peer == me) {
      net::closeFd(&oobFd);
      return invalidArgument("UCX transport: rank {} cannot connect to rank {} (at most {} ranks)", me, peer,
                             ucx::kMaxRanks);
    }
    // UCX stripes over the rails it finds itself (multi-lane endpoints); `rails` is not needed.
    *out = std::make_unique<ucx::UcxConnection>(ctx_, me, peer, oobFd, tune_);
    return OkStatus();
  }

 private:
  std::shared_ptr<ucx::UcxContext> ctx_;  ///< shared with the connections, which may outlive us
  ucx::UcxTuning tune_;
};

}  // namespace

Status createUcxTransport(int rank, std::unique_ptr<NetTransport>* out) {
  if (rank < 0 || rank >= ucx::kMaxRanks)
    return invalidArgument("UCX transport: rank {} is out of range (at most {} ranks)", rank, ucx::kMaxRanks);
  const Config& cfg = config();
  ucx::UcxTuning tune{cfg.ucxChunkBytes, cfg.ucxInlineBytes, cfg.ucxWindow};
  if (tune.chunkBytes % 16 != 0)
    return invalidArgument("STRATA_UCX_CHUNK_BYTES={} is not a multiple of 16 (reductions cut chunks at elements)",
                           tune.chunkBytes);
  std::shared_ptr<ucx::UcxContext> ctx;
  STRATA_RETURN_IF_ERROR(ucx::UcxContext::create(rank, &ctx));
  *out = std::make_unique<UcxTransport>(std::move(ctx), tune);
  return OkStatus();
}

}  // namespace strata
