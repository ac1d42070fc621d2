// device_proxy.cc: the device proxy (device_proxy.h): setup over a bootstrap of its own, the wire
// protocol, the thread's loop and its waits, and the orderly goodbye.
//
// Wire protocol, one connection per proxied peer carrying every channel, each message a 32-byte
// header (WireMsg) received into a header buffer that is always posted:
//   data   (channel, step, bytes) followed by `bytes` of payload, received straight into the
//          receive shadow slot step % kSteps; the step's head is published once it has landed
//          (steps complete in order per connection, so heads advance in order per channel);
//   credit (channel, consumed count): written to the send shadow's tail, which the kernel waits on;
//   bye / bye-ack: an orderly goodbye. A proxy that stops first sends everything its kernels
//          posted, then bye, and closes once the peer answered (bye-ack, or its own bye), so the
//          peer never mistakes the close for a death. A close or error without a goodbye is a
//          failure when device work is pending or this rank still has data for the peer.
// Flow control is the kernels': a sender's kernel writes step s only after the receiver's kernel
// consumed step s - kSteps and its proxy forwarded that credit, so step s finds its receive slot
// free and the sender's shadow slot is no longer being sent.
#include "collectives/device_proxy.h"

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "kernels/device/dev_sync.h"
#include "topology/host_identity.h"
#include "transport/config.h"
#include "transport/log.h"
#include "transport/socket.h"

namespace strata {
namespace {

constexpr uint32_t kWireMagic = 0x50525859;  // "PRXY"
enum MsgKind : uint32_t { kData = 1, kCredit = 2, kBye = 3, kByeAck = 4 };
struct WireMsg {
  uint32_t magic = kWireMagic;
  uint32_t kind = 0;
  uint32_t channel = 0;
  uint32_t pad = 0;
  uint64_t step = 0;   ///< data: the step; credit: the consumed count
  uint64_t bytes = 0;  ///< data: payload bytes that follow (<= slotBytes)
};
static_assert(sizeof(WireMsg) == 32, "proxy wire header");
constexpr int kCreditRing = 4;
constexpr int kMinSliceUs = 20, kActiveSliceUs = 1000, kIdleSliceUs = 20000;
constexpr double kDeepIdleSec = 1.0;  ///< no progress and no kick for this long: longer sleeps

class HostMemory final : public ProxyMemory {
 public:
  Status alloc(size_t bytes, char** host, char** device) override {
    const size_t rounded = (bytes + 127) / 128 * 128;
    void* p = std::aligned_alloc(128, rounded ? rounded : 128);
    if (!p) return systemError("device proxy: cannot allocate {} bytes of host memory", bytes);
    std::memset(p, 0, rounded);
    *host = *device = static_cast<char*>(p);
    return OkStatus();
  }
  void free(char* host) override { std::free(host); }
};

}  // namespace

std::unique_ptr<ProxyMemory> hostProxyMemory() { return std::make_unique<HostMemory>(); }

std::vector<uint8_t> proxiedPeers(CommTransports& transports, int nranks) {
  std::vector<uint8_t> out(static_cast<size_t>(nranks), 0);
  for (int p = 0; p < nranks; ++p) {
    const PeerKind k = transports.kind(p);
    out[static_cast<size_t>(p)] = k == PeerKind::Tcp || k == PeerKind::Net;
  }
  return out;
}

/// One shadowed (channel, peer): host addresses of its shadows and the proxy's counters.
struct DeviceProxy::Chan {
  int c = 0;
  char* sendSlots = nullptr;
  char* recvSlots = nullptr;
  uint64_t *sendHead = nullptr, *sendTail = nullptr, *recvHead = nullptr, *recvTail = nullptr, *sizes = nullptr;
  uint64_t sent = 0;      ///< steps handed to the connection
  uint64_t credited = 0;  ///< consumed count forwarded to the peer
  uint64_t expect = 0;    ///< next step to arrive
  struct Out {
    WireMsg msg;
    Transfer hdr, data;
    bool used = false;
    bool done() const { return !used || (hdr.complete && (data.bytes == 0 || data.complete)); }
  } out[dev::kSteps];
  Transfer in[dev::kSteps];
  struct Credit {
    WireMsg msg;
    Transfer t;
    bool used = false;
  } credits[kCreditRing];
};

/// One proxied peer: its connection's receive side, steps waiting to land, and the goodbye.
struct DeviceProxy::Link {
  int peer = 0;
  bool active = false;
  std::vector<Chan*> byChannel;  ///< [c]: null without a shadow
  std::vector<Chan*> chans;
  WireMsg hdrMsg;
  Transfer hdrIn;
  bool hdrPosted = false;
  struct Landing {
    Chan* ch;
    uint64_t step;
    Transfer* t;  ///< null: no payload
  };
  std::vector<Landing> landing;  ///< ring: steps whose data is on its way, in arrival order
  size_t landHead = 0, landCount = 0;
  bool peerLeft = false;  ///< the peer said bye (answered with bye-ack)
  bool peerDone = false;  ///< bye or bye-ack received: nothing more comes
  bool closed = false;    ///< no longer progressed
  Status gone;            ///< closed without a goodbye: why
  bool byeSent = false;
  WireMsg byeMsg, ackMsg;
  Transfer byeT, ackT;
};

Status DeviceProxy::create(Bootstrap& bs, const topology::CommLayout& layout, const ProxyGeometry& geometry,
                           std::vector<uint8_t> proxied, std::unique_ptr<ProxyMemory> mem, ProxyHooks hooks,
                           std::unique_ptr<DeviceProxy>* out) {
  std::unique_ptr<DeviceProxy> px(new DeviceProxy());
  const int n = geometry.nranks, r = geometry.rank;
  px->g_ = geometry;
  px->proxied_ = std::move(proxied);
  px->mem_ = std::move(mem);
  px->hooks_ = std::move(hooks);
  // A listener of the proxy's own, its port gathered over the communicator's bootstrap: the
  // proxy's connections never meet the host transports' on one listener or socket.
  RankInfo self = bs.infos()[static_cast<size_t>(r)];
  int lfd = -1;
  const Status listening = Bootstrap::openListener(&lfd, &self);
  struct Port {
    uint32_t ok;
    uint16_t port;
    uint16_t pad;
  };
  Port mine{listening.ok() ? 1u : 0u, self.port, 0};
  std::vector<Port> ports(static_cast<size_t>(n));
  Status st = bs.allGather(&mine, ports.data(), sizeof(Port));
  if (!st.ok() || !listening.ok()) {
    if (lfd >= 0) ::close(lfd);
    return !listening.ok() ? listening : st;
  }
  std::vector<RankInfo> infos = bs.infos();
  for (int p = 0; p < n; ++p) {
    if (!ports[static_cast<size_t>(p)].ok) {
      ::close(lfd);
      return remoteError("rank {} could not open the device proxy's listener", p);
    }
    infos[static_cast<size_t>(p)].port = ports[static_cast<size_t>(p)].port;  // same address: bound to every interface
  }
  const uint64_t parts[2] = {bs.commTag(), 0x70726f7879ull};  // "proxy"
  STRATA_RETURN_IF_ERROR(Bootstrap::fromInfos(lfd, r, std::move(infos), topology::hashBytes(parts, sizeof(parts)),
                                              bs.secret(), config().joinTimeoutSec, &px->bs_));
  STRATA_RETURN_IF_ERROR(setupTransports(*px->bs_, layout, &px->transports_, /*networkOnly=*/true));
  for (int p = 0; p < n; ++p) {
    const PeerKind k = px->transports_.kind(p);
    if (px->proxied_[static_cast<size_t>(p)] && k != PeerKind::Tcp && k != PeerKind::Net)
      return internalError("device proxy: rank {} is proxied but not reached over the network", p);
  }

  // Shadows, channels and links.
  px->layout_ = ProxyLayout::build(geometry, px->proxied_);
  if (px->layout_.totalBytes() > 0)
    STRATA_RETURN_IF_ERROR(px->mem_->alloc(px->layout_.totalBytes(), &px->host_, &px->device_));
  px->links_.resize(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    if (!px->proxied_[static_cast<size_t>(p)] || p == r) continue;
    auto l = std::make_unique<Link>();
    l->peer = p;
    l->byChannel.assign(static_cast<size_t>(geometry.nch), nullptr);
    px->links_[static_cast<size_t>(p)] = std::move(l);
  }
  const ProxyLayout& pl = px->layout_;
  for (int c = 0; c < geometry.nch; ++c)
    for (int p = 0; p < n; ++p) {
      const int32_t e = pl.at(c, p);
      if (e < 0) continue;
      auto ch = std::make_unique<Chan>();
      ch->c = c;
      char* ctrl = px->host_ + pl.ctrlOffset(static_cast<uint64_t>(e));
      auto word = [&](int w) { return reinterpret_cast<uint64_t*>(ctrl) + w; };
      ch->sendHead = word(ProxyLayout::kSendHead);
      ch->sendTail = word(ProxyLayout::kSendTail);
      ch->recvHead = word(ProxyLayout::kRecvHead);
      ch->recvTail = word(ProxyLayout::kRecvTail);
      ch->sizes = word(ProxyLayout::kSizes);
      ch->sendSlots = px->host_ + pl.sendSlotsOffset(static_cast<uint64_t>(e));
      ch->recvSlots = px->host_ + pl.recvSlotsOffset(static_cast<uint64_t>(e));
      Link& l = *px->links_[static_cast<size_t>(p)];
      l.byChannel[static_cast<size_t>(c)] = ch.get();
      l.chans.push_back(ch.get());
      px->chans_.push_back(std::move(ch));
    }
  for (auto& l : px->links_)
    if (l) l->landing.resize(l->chans.size() * dev::kSteps + 1);

  px->wanted_ = std::make_unique<std::atomic<uint8_t>[]>(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) px->wanted_[static_cast<size_t>(p)].store(0);
  px->wakeFd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (px->wakeFd_ < 0) return systemError("device proxy: eventfd: {}", strerror(errno));
  // Collectives talk to the ring and tree peers: connect those now (both ends want each other).
  for (int c = 0; c < geometry.nch; ++c) {
    int parent, kid0, kid1;
    dev::treeLinks(r, n, c, &parent, &kid0, &kid1);
    for (int p : {dev::mod(r - 1, n), dev::mod(r + 1, n), parent, kid0, kid1})
      if (p >= 0 && p != r && pl.at(c, p) >= 0) px->want(p);
  }
  DeviceProxy* raw = px.get();
  px->thread_ = std::thread([raw] { raw->run(); });
  size_t shadowed = 0;
  for (auto& l : px->links_) shadowed += l ? 1 : 0;
  log::debug("rank {}: device proxy for {} peers on other nodes ({} shadow entries, {} KiB of host memory)", r,
             shadowed, pl.entries, pl.totalBytes() >> 10);
  *out = std::move(px);
  return OkStatus();
}

DeviceProxy::~DeviceProxy() {
  stop_.store(true, std::memory_order_release);
  if (wakeFd_ >= 0) {
    const uint64_t one = 1;
    (void)!::write(wakeFd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
  if (host_ && mem_) mem_->free(host_);
  if (wakeFd_ >= 0) ::close(wakeFd_);
}

void DeviceProxy::wire(dev::PeerConn* conns) const {
  const int n = g_.nranks;
  for (int c = 0; c < g_.nch; ++c)
    for (int p = 0; p < n; ++p) {
      const int32_t e = layout_.at(c, p);
      if (e < 0) continue;
      dev::PeerConn& pc = conns[c * n + p];
      char* ctrl = device_ + layout_.ctrlOffset(static_cast<uint64_t>(e));
      auto word = [&](int w) { return reinterpret_cast<uint64_t*>(ctrl) + w; };
      pc.sendSimple = device_ + layout_.sendSlotsOffset(static_cast<uint64_t>(e));
      pc.sendHeadRemote = word(ProxyLayout::kSendHead);
      pc.sendTail = word(ProxyLayout::kSendTail);
      pc.sendSizes = word(ProxyLayout::kSizes);
      pc.recvSimple = device_ + layout_.recvSlotsOffset(static_cast<uint64_t>(e));
      pc.recvHead = word(ProxyLayout::kRecvHead);
      pc.recvTailRemote = word(ProxyLayout::kRecvTail);
      pc.sendLL = nullptr;  // Simple only
      pc.recvLL = nullptr;
    }
}

void DeviceProxy::want(int peer) {
  if (peer < 0 || peer >= g_.nranks || !proxied(peer) || peer == g_.rank) return;
  if (wanted_[static_cast<size_t>(peer)].exchange(1) != 0) return;
  wantSeq_.fetch_add(1, std::memory_order_seq_cst);
  kick();
}

void DeviceProxy::wantLaunch(const dev::DevWork& w) {
  if (w.algo == dev::Algo::RankTree && w.coll != dev::Coll::P2P)  // deterministic mode: every peer, channel 0
    for (int p = 0; p < g_.nranks; ++p) want(p);
  if (w.coll != dev::Coll::P2P) return;
  for (int i = 0; i < w.nops; ++i)
    if (w.ops[i].kind != dev::OpKind::Copy) want(w.ops[i].peer);
}

void DeviceProxy::simulateDeath() {
  dead_.store(true);
  stop_.store(true, std::memory_order_release);
  const uint64_t one = 1;
  (void)!::write(wakeFd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
}

void DeviceProxy::kick() {
  kickSeq_.fetch_add(1, std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst)) {
    const uint64_t one = 1;
    (void)!::write(wakeFd_, &one, sizeof(one));
  }
}

ProxyStats DeviceProxy::stats() const {
  ProxyStats s;
  s.stepsSent = stepsSent_.load(std::memory_order_relaxed);
  s.bytesSent = bytesSent_.load(std::memory_order_relaxed);
  s.stepsReceived = stepsReceived_.load(std::memory_order_relaxed);
  s.bytesReceived = bytesReceived_.load(std::memory_order_relaxed);
  return s;
}

Status DeviceProxy::status() {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

void DeviceProxy::fail(const Status& st) {
  if (stopped_) return;
  stopped_ = true;
  const Status named(st.code(), fmt::format("rank {}: device proxy: {}", g_.rank, st.message()));
  {
    std::lock_guard<std::mutex> lock(mu_);
    failed_ = named;
  }
  tellPeers(named.message());
  if (hooks_.onError) hooks_.onError(named);
}

void DeviceProxy::tellPeers(const std::string& why) { transports_.markFailed(why); }

Status DeviceProxy::handleMessage(Link& l) {
  const WireMsg m = l.hdrMsg;
  Chan* ch = m.channel < static_cast<uint32_t>(g_.nch) ? l.byChannel[m.channel] : nullptr;
  Connection* conn = transports_.conn(l.peer);
  if (m.magic != kWireMagic) return remoteError("bad message from rank {} (magic {:#x})", l.peer, m.magic);
  switch (m.kind) {
    case kData: {
      if (!ch || l.peerLeft || m.step != ch->expect || m.bytes > g_.slotBytes)
        return remoteError("unexpected data from rank {}: channel {} step {} of {} bytes (expected step {})", l.peer,
                           m.channel, m.step, m.bytes, ch ? ch->expect : 0);
      Transfer* t = nullptr;
      if (m.bytes > 0) {
        const uint64_t slot = m.step % dev::kSteps;
        t = &ch->in[slot];
        *t = Transfer::recvOf(ch->recvSlots + slot * g_.slotBytes, m.bytes);
        conn->postRecv(t);
      }
      if (l.landCount == l.landing.size()) return internalError("rank {}: more steps in flight than slots", l.peer);
      l.landing[(l.landHead + l.landCount) % l.landing.size()] = Link::Landing{ch, m.step, t};
      ++l.landCount;
      ++ch->expect;
      return OkStatus();
    }
    case kCredit:
      if (!ch || m.step > ch->sent)
        return remoteError("unexpected credit from rank {}: channel {} consumed {} (sent {})", l.peer, m.channel,
                           m.step, ch ? ch->sent : 0);
      if (m.step > dev::loadAcquire(ch->sendTail)) dev::storeRelease(ch->sendTail, m.step);
      return OkStatus();
    case kBye:
      l.peerLeft = l.peerDone = true;
      l.ackMsg = WireMsg{kWireMagic, kByeAck, 0, 0, 0, 0};
      l.ackT = Transfer::sendOf(&l.ackMsg, sizeof(WireMsg));
      conn->postSend(&l.ackT);
      return OkStatus();
    case kByeAck:
      l.peerDone = true;
      return OkStatus();
    default:
      return remoteError("bad message from rank {} (kind {})", l.peer, m.kind);
  }
}

Status DeviceProxy::pumpLink(Link& l, bool* progressed) {
  // A peer that left must not get new data (its communicator is gone).
  if (l.closed || l.peerLeft) {
    for (Chan* ch : l.chans)
      if (dev::loadAcquire(ch->sendHead) > ch->sent)
        return remoteError("rank {} {} while this rank's device work still sends to it", l.peer,
                           l.gone.ok() ? "destroyed its communicator" : "is gone (" + l.gone.message() + ")");
    if (l.closed) return OkStatus();
  }
  Connection* conn = transports_.conn(l.peer);
  if (!l.peerLeft) {
    for (Chan* ch : l.chans) {
      // Whole steps the kernel posted: a header, then the bytes from the shadow slot.
      const uint64_t head = dev::loadAcquire(ch->sendHead);
      while (ch->sent < head) {
        const uint64_t slot = ch->sent % dev::kSteps;
        Chan::Out& o = ch->out[slot];
        if (!o.done()) break;
        const uint64_t bytes = __atomic_load_n(&ch->sizes[slot], __ATOMIC_RELAXED);
        if (bytes > g_.slotBytes)
          return internalError("channel {} step {} to rank {} claims {} bytes (slots hold {})", ch->c, ch->sent, l.peer,
                               bytes, g_.slotBytes);
        o.msg = WireMsg{kWireMagic, kData, static_cast<uint32_t>(ch->c), 0, ch->sent, bytes};
        o.hdr = Transfer::sendOf(&o.msg, sizeof(WireMsg));
        conn->postSend(&o.hdr);
        o.data = Transfer{};
        if (bytes > 0) {
          o.data = Transfer::sendOf(ch->sendSlots + slot * g_.slotBytes, bytes);
          conn->postSend(&o.data);
        }
        o.used = true;
        ++ch->sent;
        stepsSent_.store(stepsSent_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        bytesSent_.store(bytesSent_.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
        *progressed = true;
      }
      // Credits: the consumed count, whenever it moved and a credit buffer is free.
      const uint64_t tail = dev::loadAcquire(ch->recvTail);
      if (tail > ch->credited)
        for (Chan::Credit& k : ch->credits) {
          if (k.used && !k.t.complete) continue;
          k.msg = WireMsg{kWireMagic, kCredit, static_cast<uint32_t>(ch->c), 0, tail, 0};
          k.t = Transfer::sendOf(&k.msg, sizeof(WireMsg));
          conn->postSend(&k.t);
          k.used = true;
          ch->credited = tail;
          *progressed = true;
          break;
        }
    }
  }
  if (!l.peerDone && !l.hdrPosted) {
    l.hdrIn = Transfer::recvOf(&l.hdrMsg, sizeof(WireMsg));
    conn->postRecv(&l.hdrIn);
    l.hdrPosted = true;
  }
  for (;;) {
    const Status st = conn->progress(progressed);
    if (!st.ok()) {
      l.closed = true;
      if (l.peerDone) return OkStatus();  // it said goodbye: a close after that is expected
      l.gone = st;
      bool unsent = false;
      for (Chan* ch : l.chans) {
        unsent = unsent || dev::loadAcquire(ch->sendHead) > ch->sent;
        for (const Chan::Out& o : ch->out) unsent = unsent || !o.done();
      }
      if (unsent || !hooks_.busy || hooks_.busy()) return st;
      return OkStatus();  // checked again while device work is pending (periodic check)
    }
    if (!l.hdrPosted || !l.hdrIn.complete) break;
    l.hdrPosted = false;
    STRATA_RETURN_IF_ERROR(handleMessage(l));
    *progressed = true;
    if (!l.peerDone) {
      l.hdrIn = Transfer::recvOf(&l.hdrMsg, sizeof(WireMsg));
      conn->postRecv(&l.hdrIn);
      l.hdrPosted = true;
    }
  }
  // Publish the steps that landed, in arrival order (per channel that is step order).
  while (l.landCount > 0) {
    const Link::Landing& a = l.landing[l.landHead];
    if (a.t && !a.t->complete) break;
    dev::storeRelease(a.ch->recvHead, a.step + 1);
    stepsReceived_.store(stepsReceived_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (a.t)
      bytesReceived_.store(bytesReceived_.load(std::memory_order_relaxed) + a.t->bytes, std::memory_order_relaxed);
    l.landHead = (l.landHead + 1) % l.landing.size();
    --l.landCount;
    *progressed = true;
  }
  if (l.peerLeft && l.ackT.complete && (!l.byeSent || l.byeT.complete)) l.closed = true;
  return OkStatus();
}

void DeviceProxy::pass(bool* progressed) {
  if (wantSeq_.load(std::memory_order_acquire) != seenWant_.load(std::memory_order_relaxed)) {
    seenWant_.store(wantSeq_.load(std::memory_order_acquire), std::memory_order_relaxed);
    for (int p = 0; p < g_.nranks; ++p) {
      Link* l = links_[static_cast<size_t>(p)].get();
      if (l && !l->active && wanted_[static_cast<size_t>(p)].load(std::memory_order_acquire)) {
        l->active = true;
        active_.push_back(l);
        *progressed = true;
      }
    }
  }
  if (stopped_) return;
  if (hooks_.abortFlag && dev::loadVolatile32(hooks_.abortFlag)) {
    stopped_ = true;
    tellPeers(fmt::format("rank {}: its device work was aborted", g_.rank));
    return;
  }
  for (Link* l : active_) {
    const Status st = pumpLink(*l, progressed);
    if (!st.ok()) {
      fail(st);
      return;
    }
  }
}

bool DeviceProxy::drained() {
  for (Link* l : active_) {
    if (l->closed || l->peerLeft) continue;
    for (Chan* ch : l->chans) {
      if (ch->sent != dev::loadAcquire(ch->sendHead) || ch->credited != dev::loadAcquire(ch->recvTail)) return false;
      for (const Chan::Out& o : ch->out)
        if (!o.done()) return false;
      for (const Chan::Credit& k : ch->credits)
        if (k.used && !k.t.complete) return false;
    }
  }
  return true;
}

void DeviceProxy::sleep(int micros) {
  ws_.clear();
  for (Link* l : active_)
    if (!l->closed) transports_.conn(l->peer)->addWaitSources(&ws_);
  ws_.fds.push_back(pollfd{wakeFd_, POLLIN, 0});
  if (!ws_.bells.empty()) micros = std::min(micros, 100);  // not a network connection: poll it often
  timespec ts{micros / 1000000, (micros % 1000000) * 1000L};
  ::ppoll(ws_.fds.data(), ws_.fds.size(), &ts, nullptr);
  uint64_t drain;
  while (::read(wakeFd_, &drain, sizeof(drain)) > 0) {
  }
}

void DeviceProxy::run() {
  const Config& cfg = config();
  const double spin = cfg.spinMicros * 1e-6;
  uint32_t idle = 0;
  double idleStart = 0, lastCheck = net::nowSec();
  uint64_t seenKick = kickSeq_.load();
  int slice = kMinSliceUs;
  bool stopping = false;  // past the main loop: stop_ no longer cuts sleeps short
  // One wait step: spin (yielding) briefly, then sleep on the sockets and the wake-up fd in
  // growing slices: up to 1 ms while work may be running (a kernel's head moves without waking
  // anyone), up to 20 ms after a second with neither progress nor a kick.
  auto wait = [&](bool progressed) {
    if (progressed) {
      idle = 0;
      slice = kMinSliceUs;
      return;
    }
    if (++idle < 16) {
      sched_yield();
      return;
    }
    const double now = net::nowSec();
    if (idle == 16) idleStart = now;
    const uint64_t k = kickSeq_.load(std::memory_order_seq_cst);
    if (k != seenKick) {
      seenKick = k;
      idleStart = now;
      slice = kMinSliceUs;
    }
    if (now - lastCheck > 0.1) {
      lastCheck = now;
      for (Link* l : active_) {
        if (stopped_) break;
        if (l->closed) {
          if (!l->gone.ok() && (!hooks_.busy || hooks_.busy())) fail(l->gone);
          continue;
        }
        const Status st = transports_.conn(l->peer)->checkPeer();
        if (!st.ok() && !l->peerDone) {
          l->closed = true;
          l->gone = st;
          if (!hooks_.busy || hooks_.busy()) fail(st);
        }
      }
    }
    if (now - idleStart < spin) {
      sched_yield();
      return;
    }
    sleeping_.store(true, std::memory_order_seq_cst);
    if (kickSeq_.load(std::memory_order_seq_cst) == seenKick && (stopping || !stop_.load(std::memory_order_seq_cst)) &&
        wantSeq_.load(std::memory_order_seq_cst) == seenWant_.load(std::memory_order_relaxed))
      sleep(slice);
    sleeping_.store(false, std::memory_order_seq_cst);
    slice = std::min(slice * 2, now - idleStart > kDeepIdleSec ? kIdleSliceUs : kActiveSliceUs);
  };
  while (!stop_.load(std::memory_order_acquire)) {
    if (dead_.load(std::memory_order_relaxed)) return;
    bool progressed = false;
    pass(&progressed);
    wait(progressed);
  }
  if (stopped_ || dead_.load()) return;  // failed or aborted: the peers were told; the connections close
  stopping = true;
  // Stopping: send what the kernels posted, then say goodbye and wait for the answer.
  const double drainUntil = net::nowSec() + cfg.timeoutSec;
  while (!stopped_ && !drained() && net::nowSec() < drainUntil) {
    bool progressed = false;
    pass(&progressed);
    wait(progressed);
  }
  for (Link* l : active_) {
    if (l->closed || l->byeSent) continue;
    l->byeMsg = WireMsg{kWireMagic, kBye, 0, 0, 0, 0};
    l->byeT = Transfer::sendOf(&l->byeMsg, sizeof(WireMsg));
    transports_.conn(l->peer)->postSend(&l->byeT);
    l->byeSent = true;
  }
  const double byeUntil = net::nowSec() + std::min(cfg.timeoutSec, 5.0);
  while (!stopped_ && net::nowSec() < byeUntil) {
    bool progressed = false;
    pass(&progressed);
    bool done = true;
    for (Link* l : active_)
      done = done && (l->closed || (l->peerDone && l->byeT.complete && (!l->peerLeft || l->ackT.complete)));
    if (done) break;
    wait(progressed);
  }
}

}  // namespace strata
