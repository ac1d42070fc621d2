// transport_setup.cc: peer classification, this rank's endpoint, and connections on first use.
#include "transport/transport_setup.h"

#include <sys/prctl.h>

#include <algorithm>
#include <cstring>

#include "transport/config.h"
#include "transport/connection_openers.h"
#include "transport/local_connection.h"
#include "transport/log.h"
#include "transport/net_select.h"
#include "transport/shared_buffers.h"

namespace strata {

CommTransports::~CommTransports() {
  if (endpoint_) {
    // Local peers still waiting on this rank (it destroyed its communicator in the middle of their
    // collective) fail naming it rather than time out; a failure already recorded stays.
    uint32_t none = 0;
    EndpointHeader* h = endpoint_->header();
    if (h->failed.compare_exchange_strong(none, kEndpointLeft, std::memory_order_acq_rel)) h->bell.ring();
  }
  lazy_.clear();
  net_.reset();
  if (endpoint_) {
    if (kind_.end() != std::find(kind_.begin(), kind_.end(), PeerKind::Threads))
      unregisterLocalEndpoint(commTag_, rank_);
  }
}

void CommTransports::markFailed(const std::string& reason) {
  if (endpoint_) {
    EndpointHeader* h = endpoint_->header();
    size_t n = std::min(reason.size(), sizeof(h->failReason) - 1);
    memcpy(h->failReason, reason.data(), n);
    h->failReason[n] = '\0';
    h->failed.store(kEndpointFailed, std::memory_order_release);
    h->bell.ring();
  }
  for (auto& c : lazy_)
    if (c) c->sendFailure(reason);
}

int CommTransports::connectionCount() const {
  return static_cast<int>(std::count_if(lazy_.begin(), lazy_.end(), [](const auto& c) { return c != nullptr; }));
}

Connection* CommTransports::openSlow(int peer) {
  auto& lazy = lazy_[static_cast<size_t>(peer)];
  if (!lazy) {
    const Config& cfg = config();
    const auto& infos = bs_->infos();
    const RankInfo& self = infos[static_cast<size_t>(rank_)];
    const RankInfo& them = infos[static_cast<size_t>(peer)];
    std::unique_ptr<ConnectionOpener> opener;
    const char* name = "tcp";
    switch (kind_[static_cast<size_t>(peer)]) {
      case PeerKind::Threads:
      case PeerKind::Shm: {
        const bool threads = kind_[static_cast<size_t>(peer)] == PeerKind::Threads;
        name = threads ? "local(threads)" : "local(shm)";
        opener = localOpener(rank_, peer, layout_->localRank(rank_), layout_->localRank(peer), threads, them.pid,
                             endpoint_, peerEndpoint_[static_cast<size_t>(peer)]);
        break;
      }
      case PeerKind::Tcp: {
        // The lower rank connects: socket i on rail (its pair rail + i) of the shared rails.
        const bool initiator = rank_ < peer;
        const RankInfo& low = initiator ? self : them;
        const RankInfo& high = initiator ? them : self;
        const std::vector<int> shared = sharedRails(low, high);
        const bool remote = layout_->node(peer) != layout_->node(rank_);
        const int k = std::max<int>(cfg.tcpSockets, remote ? static_cast<int>(shared.size()) : 0);
        std::vector<int> rails(static_cast<size_t>(k), -1);
        if (initiator && remote && !shared.empty()) {
          const int pairRail = layout_->messageRail(rank_, peer);
          const auto at = std::find(shared.begin(), shared.end(), pairRail);
          const size_t start = at == shared.end() ? 0 : static_cast<size_t>(at - shared.begin());
          for (int i = 0; i < k; ++i) rails[static_cast<size_t>(i)] = shared[(start + static_cast<size_t>(i)) % shared.size()];
        } else if (initiator && remote) {
          rails.assign(static_cast<size_t>(k), layout_->messageRail(rank_, peer));
        }
        opener = tcpOpener(*bs_, peer, std::move(rails), cfg.tcpChunkBytes);
        break;
      }
      case PeerKind::Net: {
        name = net_->name();
        const int shared = static_cast<int>(sharedRails(self, them).size());
        opener = netOpener(*bs_, peer, layout_->messageRail(rank_, peer), std::max(shared, 1), net_.get());
        break;
      }
      case PeerKind::Self:
      case PeerKind::None:
        return nullptr;
    }
    lazy = std::make_unique<LazyConnection>(peer, name, std::move(opener));
  }
  if (Connection* c = lazy->open()) {
    open_[static_cast<size_t>(peer)] = c;
    return c;
  }
  return lazy.get();
}

Status setupTransports(Bootstrap& bs, const topology::CommLayout& layout, CommTransports* out, bool networkOnly) {
  const Config& cfg = config();
  const int me = bs.rank(), n = bs.nranks();
  const auto& infos = bs.infos();
  out->bs_ = &bs;
  out->layout_ = &layout;
  out->rank_ = me;
  out->commTag_ = bs.commTag();
  out->kind_.assign(static_cast<size_t>(n), PeerKind::Tcp);
  out->lazy_.resize(static_cast<size_t>(n));
  out->open_.assign(static_cast<size_t>(n), nullptr);
  bool anyThreads = false, anyShm = false;
  int local = 0, remote = 0;
  NetChoice netChoice = NetChoice::Tcp;
  for (int p = 0; p < n; ++p) {
    PeerKind& k = out->kind_[static_cast<size_t>(p)];
    if (p == me) k = PeerKind::Self;
    else if (cfg.transport == "tcp") k = PeerKind::Tcp;
    else if (layout.node(p) != layout.node(me)) {
      NetChoice c = NetChoice::Tcp;
      STRATA_RETURN_IF_ERROR(chooseNet(infos[me], infos[p], &c));
      k = c == NetChoice::Tcp ? PeerKind::Tcp : PeerKind::Net;
      if (c != NetChoice::Tcp) netChoice = c;
    }
    else if (networkOnly) k = PeerKind::None;
    else if (infos[p].processHash == infos[me].processHash) k = PeerKind::Threads;
    else k = PeerKind::Shm;
    anyThreads |= k == PeerKind::Threads;
    anyShm |= k == PeerKind::Shm;
    local += k == PeerKind::Threads || k == PeerKind::Shm;
    remote += k == PeerKind::Tcp || k == PeerKind::Net;
  }
  if (std::count(out->kind_.begin(), out->kind_.end(), PeerKind::Net) > 0) {
    STRATA_RETURN_IF_ERROR(createNetTransport(netChoice, me, &out->net_));
    if (me == 0 && !networkOnly)
      log::info("rank {}: {} between nodes ({})", me, netChoiceName(netChoice),
                cfg.transport == "auto" ? "auto: RDMA devices and UCX on both ends" : "STRATA_TRANSPORT");
  } else if (remote > 0 && me == 0 && !networkOnly) {
    log::info("rank 0: tcp between nodes ({})", cfg.transport == "tcp" ? "STRATA_TRANSPORT=tcp"
                                                  : "no RDMA device on both ends: strata's tcp measured faster "
                                                    "than UCX's tcp");
  }
  if (networkOnly) return OkStatus();
  // Let same-machine peers read our buffers under Yama's ptrace restrictions (scope 1).
  if (anyShm && cfg.localCma) prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  if (anyThreads || anyShm) {
    if (anyShm) {
      int stale = removeStaleSegments();
      if (stale) log::info("rank {}: removed {} shared-memory segment(s) of dead processes", me, stale);
    }
    std::string name = anyShm ? endpointShmName(out->commTag_, me, infos[me].pid) : std::string();
    STRATA_RETURN_IF_ERROR(
        Endpoint::create(name, me, layout.localSize(layout.node(me)), cfg.localSlots, cfg.localSlotBytes, anyShm,
                         &out->endpoint_));
    if (anyThreads) registerLocalEndpoint(out->commTag_, me, out->endpoint_);
  }
  STRATA_RETURN_IF_ERROR(bs.barrier());  // every endpoint exists now
  out->peerEndpoint_.resize(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    const PeerKind k = out->kind_[static_cast<size_t>(p)];
    std::shared_ptr<Endpoint>& theirs = out->peerEndpoint_[static_cast<size_t>(p)];
    if (k == PeerKind::Threads) {
      theirs = findLocalEndpoint(out->commTag_, p);
      if (!theirs) return internalError("rank {}: endpoint of same-process rank {} not found", me, p);
    } else if (k == PeerKind::Shm) {
      STRATA_RETURN_IF_ERROR(Endpoint::open(endpointShmName(out->commTag_, p, infos[p].pid), p, &theirs));
      // Tell p (through our channel for it) whether we can read its memory directly.
      if (cfg.localCma && probeCma(infos[p].pid, theirs->header()->probeAddr, theirs->header()->magic))
        out->endpoint_->channel(layout.localRank(p))->cmaReadable.store(1, std::memory_order_release);
      // And whether we can map its strataMemAlloc regions (through /proc/<pid>/fd).
      if (cfg.sharedMinBytes > 0) {
        if (canMapPeerRegions(infos[p].pid))
          out->endpoint_->channel(layout.localRank(p))->sharedReadable.store(1, std::memory_order_release);
        else
          log::info("rank {}: cannot open /proc/{}/fd of rank {}: its strataMemAlloc buffers come through the "
                    "staging slots", me, infos[p].pid, p);
      }
    }
  }
  STRATA_RETURN_IF_ERROR(bs.barrier());  // every peer mapped our segment: its name can go
  if (out->endpoint_) out->endpoint_->unlink();
  log::debug("rank {}: transports ready ({} local, {} network peers; connections made on first use)", me, local,
             remote);
  return OkStatus();
}

}  // namespace strata
