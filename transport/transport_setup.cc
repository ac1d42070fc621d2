// transport_setup.cc: endpoint creation, peer classification and eager connection of all peers.
#include "transport/transport_setup.h"

#include <sys/prctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "transport/config.h"
#include "transport/local_connection.h"
#include "transport/shared_buffers.h"
#include "transport/log.h"
#include "transport/socket.h"
#include "transport/tcp_connection.h"

namespace strata {

enum class PeerKind { Self, Threads, Shm, Tcp };

CommTransports::~CommTransports() {
  conns.clear();
  if (endpoint) unregisterLocalEndpoint(commTag, rank);
}

void CommTransports::markFailed(const std::string& reason) {
  if (endpoint) {
    EndpointHeader* h = endpoint->header();
    size_t n = std::min(reason.size(), sizeof(h->failReason) - 1);
    memcpy(h->failReason, reason.data(), n);
    h->failReason[n] = '\0';
    h->failed.store(1, std::memory_order_release);
    h->bell.ring();
  }
  for (auto& c : conns)
    if (c) c->sendFailure(reason);
}

Status setupTransports(Bootstrap& bs, const topology::CommLayout& layout, CommTransports* out) {
  const Config& cfg = config();
  const int me = bs.rank(), n = bs.nranks();
  const auto& infos = bs.infos();
  out->rank = me;
  out->commTag = bs.commTag();
  out->conns.resize(n);
  std::vector<PeerKind> kind(n, PeerKind::Tcp);
  bool anyThreads = false, anyShm = false;
  for (int p = 0; p < n; ++p) {
    if (p == me) kind[p] = PeerKind::Self;
    else if (cfg.transport == "tcp") kind[p] = PeerKind::Tcp;
    else if (layout.node(p) != layout.node(me)) kind[p] = PeerKind::Tcp;
    else if (infos[p].processHash == infos[me].processHash) kind[p] = PeerKind::Threads;
    else kind[p] = PeerKind::Shm;
    anyThreads |= kind[p] == PeerKind::Threads;
    anyShm |= kind[p] == PeerKind::Shm;
  }
  // Let same-machine peers read our buffers under Yama's ptrace restrictions (scope 1).
  if (anyShm && cfg.localCma) prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  if (anyThreads || anyShm) {
    if (anyShm) {
      int stale = removeStaleSegments();
      if (stale) log::info("rank {}: removed {} shared-memory segment(s) of dead processes", me, stale);
    }
    std::string name = anyShm ? endpointShmName(out->commTag, me, infos[me].pid) : std::string();
    STRATA_RETURN_IF_ERROR(Endpoint::create(name, me, n, cfg.localSlots, cfg.localSlotBytes, anyShm, &out->endpoint));
    if (anyThreads) registerLocalEndpoint(out->commTag, me, out->endpoint);
  }
  STRATA_RETURN_IF_ERROR(bs.barrier());  // every endpoint exists now

  double deadline = net::nowSec() + cfg.joinTimeoutSec;
  for (int p = 0; p < n; ++p) {
    if (kind[p] == PeerKind::Threads || kind[p] == PeerKind::Shm) {
      std::shared_ptr<Endpoint> theirs;
      if (kind[p] == PeerKind::Threads) {
        theirs = findLocalEndpoint(out->commTag, p);
        if (!theirs) return internalError("rank {}: endpoint of same-process rank {} not found", me, p);
      } else {
        STRATA_RETURN_IF_ERROR(Endpoint::open(endpointShmName(out->commTag, p, infos[p].pid), p, &theirs));
        // Tell p (through our channel for it) whether we can read its memory directly.
        if (cfg.localCma && probeCma(infos[p].pid, theirs->header()->probeAddr, theirs->header()->magic))
          out->endpoint->channel(p)->cmaReadable.store(1, std::memory_order_release);
        // And whether we can map its strataMemAlloc regions (through /proc/<pid>/fd).
        if (cfg.sharedMinBytes > 0) {
          if (canMapPeerRegions(infos[p].pid))
            out->endpoint->channel(p)->sharedReadable.store(1, std::memory_order_release);
          else
            log::info("rank {}: cannot open /proc/{}/fd of rank {}: its strataMemAlloc buffers come through "
                      "the staging slots", me, infos[p].pid, p);
        }
      }
      out->conns[p] = std::make_unique<LocalConnection>(me, p, out->endpoint, theirs, kind[p] == PeerKind::Threads,
                                                        infos[p].pid);
    }
  }
  // tcp: connect to higher ranks first (the listen backlog holds them), then accept lower ranks.
  const int k = cfg.tcpSockets;
  std::vector<std::vector<int>> fds(n);
  for (int p = me + 1; p < n; ++p) {
    if (kind[p] != PeerKind::Tcp) continue;
    for (int i = 0; i < k; ++i) {
      int fd = -1;
      const int rail = layout.node(p) != layout.node(me) ? layout.messageRail(me, p) : -1;
      STRATA_RETURN_IF_ERROR(bs.connectPeer(p, Bootstrap::kData, i, deadline, &fd, rail));
      fds[p].push_back(fd);
    }
  }
  for (int p = 0; p < me; ++p) {
    if (kind[p] != PeerKind::Tcp) continue;
    for (int i = 0; i < k; ++i) {
      int fd = -1;
      STRATA_RETURN_IF_ERROR(bs.acceptPeer(p, Bootstrap::kData, i, deadline, &fd));
      fds[p].push_back(fd);
    }
  }
  for (int p = 0; p < n; ++p)
    if (kind[p] == PeerKind::Tcp && p != me)
      out->conns[p] = std::make_unique<TcpConnection>(me, p, std::move(fds[p]), cfg.tcpChunkBytes);

  STRATA_RETURN_IF_ERROR(bs.barrier());  // every peer mapped our segment: its name can go
  if (out->endpoint) out->endpoint->unlink();
  const auto count = [&](PeerKind k) { return std::count(kind.begin(), kind.end(), k); };
  log::debug("rank {}: transports ready ({} threads, {} shm, {} tcp peers)", me, count(PeerKind::Threads),
             count(PeerKind::Shm), count(PeerKind::Tcp));
  return OkStatus();
}

}  // namespace strata
