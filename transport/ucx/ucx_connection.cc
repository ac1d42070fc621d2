// ucx_connection.cc: handshake, posting, completion and teardown of one UCX peer connection.
#include "transport/ucx/ucx_connection.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "kernels/host_reduce.h"
#include "transport/log.h"
#include "transport/socket.h"

namespace strata::ucx {
namespace {

constexpr double kNoticeWaitSec = 0.2;   ///< how long a failure waits for the peer's reason
constexpr double kEofGraceSec = 0.2;     ///< after the peer exits, data it sent may still land
constexpr double kFlushSec = 0.5;        ///< teardown: bounded flush of a healthy endpoint
constexpr double kCloseSec = 1.0;        ///< teardown: bounded wait for forced close and requests
constexpr size_t kMaxReasonBytes = 4096;

}  // namespace

UcxConnection::UcxConnection(std::vector<std::shared_ptr<UcxContext>> ctxs, int me, int peer, int oobFd, int rails,
                             UcxTuning tuning)
    : ctxs_(std::move(ctxs)), me_(me), peer_(peer), oob_(oobFd), railsWanted_(std::max(1, rails)), tune_(tuning) {
  net::setNonBlocking(oob_);
  if (ctxs_.size() > static_cast<size_t>(kMaxRails)) ctxs_.resize(kMaxRails);
  Hello h{kHelloMagic, kWireVersion, static_cast<uint32_t>(me), static_cast<uint32_t>(ctxs_.size()),
          static_cast<uint32_t>(railsWanted_), 0, tune_.chunkBytes, tune_.inlineBytes};
  helloOut_.assign(reinterpret_cast<const char*>(&h), reinterpret_cast<const char*>(&h) + sizeof(h));
  for (const auto& c : ctxs_) {
    HelloRail r{static_cast<uint32_t>(c->address().size()), c->rail().net, c->rail().mask, 0};
    helloOut_.insert(helloOut_.end(), reinterpret_cast<const char*>(&r), reinterpret_cast<const char*>(&r) + sizeof(r));
  }
  for (const auto& c : ctxs_) helloOut_.insert(helloOut_.end(), c->address().begin(), c->address().end());
}

UcxConnection::~UcxConnection() {
  teardownEndpoint();
  for (Msg& m : sends_) releaseRegs(m);
  for (Msg& m : recvs_) releaseRegs(m);
  net::closeFd(&oob_);
}

void UcxConnection::releaseRegs(Msg& m) {
  for (size_t r = 0; r < rails_.size(); ++r)
    if (m.reg[r]) {
      rails_[r].ctx->regCache()->release(m.reg[r]);
      m.reg[r] = nullptr;
    }
}

bool UcxConnection::progressWorkers() {
  bool any = false;
  for (Rail& r : rails_)
    if (r.ctx->progress()) any = true;
  return any;
}

void UcxConnection::teardownEndpoint() {
  // Waits for `reqs` (all rails at once, one deadline), then hands them back to UCX.
  auto waitAll = [&](std::vector<void*>& reqs, double sec) {
    const double deadline = net::nowSec() + sec;
    auto pending = [&] {
      for (void* r : reqs)
        if (ucp_request_check_status(r) == UCS_INPROGRESS) return true;
      return false;
    };
    while (pending() && net::nowSec() < deadline) progressWorkers();
    for (void* r : reqs) ucp_request_free(r);  // released by UCX once it completes, if it has not
    reqs.clear();
  };
  // Receives: ours to cancel (UCX does not complete them when the endpoint fails).
  for (Op& op : recvOps_) ucp_request_cancel(rails_[op.rail].ctx->worker(), op.req);
  if (!rails_.empty()) {
    std::vector<void*> reqs;
    if (broken_.ok() && epStatus_ == UCS_OK && !sendOps_.empty()) {
      for (Rail& r : rails_) {
        if (r.ep == nullptr) continue;
        ucp_request_param_t fp{};
        void* req = ucp_ep_flush_nbx(r.ep, &fp);
        if (UCS_PTR_IS_PTR(req)) reqs.push_back(req);
      }
      waitAll(reqs, kFlushSec);
    }
    // Forced close: no confirmation from the peer (a failed endpoint allows nothing else), and
    // every request still on the endpoint completes with UCS_ERR_CANCELED.
    for (Rail& r : rails_) {
      if (r.ep == nullptr) continue;
      ucp_request_param_t cp{};
      cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      cp.flags = UCP_EP_CLOSE_FLAG_FORCE;
      void* req = ucp_ep_close_nbx(r.ep, &cp);
      if (UCS_PTR_IS_PTR(req)) reqs.push_back(req);
      r.ep = nullptr;
    }
    waitAll(reqs, kCloseSec);
  }
  const double deadline = net::nowSec() + kCloseSec;
  for (auto* ops : {&sendOps_, &recvOps_}) {
    for (Op& op : *ops) {
      while (ucp_request_check_status(op.req) == UCS_INPROGRESS && net::nowSec() < deadline) progressWorkers();
      if (ucp_request_check_status(op.req) == UCS_INPROGRESS)
        log::warn("ucx: rank {}: a request to rank {} did not finish at teardown; UCX releases it later", me_,
                  peer_);
      ucp_request_free(op.req);
    }
    ops->clear();
  }
}

void UcxConnection::onEndpointError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* c = static_cast<UcxConnection*>(arg);
  if (c->epStatus_ == UCS_OK) c->epStatus_ = status;  // any rail's error fails the connection
}

Status UcxConnection::fail(Status st) {
  if (broken_.ok()) {
    broken_ = st;
    for (Op& op : recvOps_) ucp_request_cancel(rails_[op.rail].ctx->worker(), op.req);
  }
  return broken_;
}

UcxConnection::Msg UcxConnection::nextMsg(Transfer* t, uint64_t* seq, uint64_t* chunks) const {
  Msg m;
  m.t = t;
  m.headSeq = *seq;
  m.nchunks = chunksAfterHead(t->bytes, tune_.inlineBytes, tune_.chunkBytes);
  m.firstChunk = *chunks;
  *seq += 1 + m.nchunks;
  *chunks += m.nchunks;
  return m;
}

void UcxConnection::postSend(Transfer* t) { sends_.push_back(nextMsg(t, &sendSeq_, &sendChunks_)); }

void UcxConnection::postRecv(Transfer* t) { recvs_.push_back(nextMsg(t, &recvSeq_, &recvChunks_)); }

size_t UcxConnection::chunkLen(const Msg& m, uint64_t i) const {
  return std::min(tune_.chunkBytes, m.t->bytes - i * tune_.chunkBytes);
}

char* UcxConnection::takeBuffer(Buffers& pool, size_t bytes) {
  if (!pool.empty()) {
    char* b = pool.back();
    pool.pop_back();
    return b;
  }
  ownedBuffers_.push_back(std::make_unique<char[]>(bytes));
  return ownedBuffers_.back().get();
}

void UcxConnection::giveBuffer(Buffers& pool, char* b) { pool.push_back(b); }

RegCache::Entry* UcxConnection::registration(int rail, const void* p, size_t bytes) {
  RegCache* rc = rails_[rail].ctx->regCache();
  if (rc == nullptr) return nullptr;
  RegCache::Entry* e = nullptr;
  Status st = rc->acquire(p, bytes, &e);
  if (!st.ok()) {
    log::debug("ucx: registration failed, sending unregistered: {}", st.message());
    return nullptr;
  }
  return e;
}

// ---- oob socket: hello, failure notices, liveness ----

Status UcxConnection::writeHello(bool* progressed) {
  while (helloSent_ < helloOut_.size()) {
    ssize_t w = ::send(oob_, helloOut_.data() + helloSent_, helloOut_.size() - helloSent_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return OkStatus();
      if (errno == EPIPE || errno == ECONNRESET)
        return fail(remoteError("rank {} closed the connection (peer exited or failed)", peer_));
      return fail(remoteError("connection to rank {} broke while sending: {}", peer_, strerror(errno)));
    }
    helloSent_ += static_cast<size_t>(w);
    *progressed = true;
  }
  return OkStatus();
}

Status UcxConnection::readOob(bool* progressed) {
  if (oobClosed_ || oob_ < 0) return OkStatus();
  char buf[4096];
  while (true) {
    ssize_t r = ::recv(oob_, buf, sizeof(buf), MSG_DONTWAIT);
    if (r == 0) {
      oobClosed_ = true;
      oobClosedAt_ = net::nowSec();
      break;
    }
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      oobClosed_ = true;
      oobClosedAt_ = net::nowSec();
      break;
    }
    oobIn_.insert(oobIn_.end(), buf, buf + r);
    *progressed = true;
  }
  // Parse whole frames.
  size_t at = 0;
  while (oobIn_.size() - at >= sizeof(uint32_t)) {
    uint32_t magic;
    std::memcpy(&magic, oobIn_.data() + at, sizeof(magic));
    if (magic == kHelloMagic && !gotHello_) {
      // The version (second word) is checked first: another version's hello has another layout.
      if (oobIn_.size() - at < 3 * sizeof(uint32_t)) break;
      uint32_t word[3];
      std::memcpy(word, oobIn_.data() + at, sizeof(word));
      if (word[1] != kWireVersion || static_cast<int>(word[2]) != peer_)
        return fail(remoteError("UCX handshake with rank {} failed: it sent version {} rank {} (this is version {})",
                                peer_, word[1], word[2], kWireVersion));
      if (oobIn_.size() - at < sizeof(Hello)) break;
      Hello h;
      std::memcpy(&h, oobIn_.data() + at, sizeof(h));
      if (h.rails < 1 || h.rails > static_cast<uint32_t>(kMaxRails))
        return fail(remoteError("UCX handshake with rank {} failed: it offers {} rails", peer_, h.rails));
      const size_t recordsAt = at + sizeof(Hello), addrsAt = recordsAt + h.rails * sizeof(HelloRail);
      if (oobIn_.size() < addrsAt) break;
      size_t addrBytes = 0;
      for (uint32_t r = 0; r < h.rails; ++r) {
        HelloRail hr;
        std::memcpy(&hr, oobIn_.data() + recordsAt + r * sizeof(HelloRail), sizeof(hr));
        addrBytes += hr.addrBytes;
      }
      if (oobIn_.size() < addrsAt + addrBytes) break;
      if (h.chunkBytes != tune_.chunkBytes || h.inlineBytes != tune_.inlineBytes)
        return fail(invalidUsage("UCX settings differ: rank {} uses STRATA_UCX_CHUNK_BYTES={} "
                                 "STRATA_UCX_INLINE_BYTES={}, rank {} uses {} and {}",
                                 peer_, h.chunkBytes, h.inlineBytes, me_, tune_.chunkBytes, tune_.inlineBytes));
      gotHello_ = true;
      STRATA_RETURN_IF_ERROR(startEndpoints(h, oobIn_.data() + recordsAt));
      at = addrsAt + addrBytes;
      *progressed = true;
    } else if (magic == kFailMagic) {
      if (oobIn_.size() - at < sizeof(FailFrame)) break;
      FailFrame f;
      std::memcpy(&f, oobIn_.data() + at, sizeof(f));
      const size_t n = std::min<size_t>(f.reasonBytes, kMaxReasonBytes);
      if (oobIn_.size() - at < sizeof(FailFrame) + n && !oobClosed_) break;
      std::string why(oobIn_.data() + at + sizeof(FailFrame),
                      std::min(n, oobIn_.size() - at - sizeof(FailFrame)));
      at = oobIn_.size();
      if (peerError_.ok() || !peerNotice_) peerError_ = remoteError("rank {} failed: {}", peer_, why);
      peerNotice_ = true;
    } else {
      return fail(remoteError("protocol error on the connection to rank {}: unexpected frame {:#x}", peer_, magic));
    }
  }
  oobIn_.erase(oobIn_.begin(), oobIn_.begin() + at);
  if (oobClosed_ && peerError_.ok() && !gotHello_)
    peerError_ = remoteError("rank {} closed the connection (peer exited or failed)", peer_);
  return OkStatus();
}

Status UcxConnection::startEndpoints(const Hello& h, const char* records) {
  std::vector<RailSubnet> mine, theirs;
  std::vector<const char*> addr;
  const char* a = records + h.rails * sizeof(HelloRail);
  for (uint32_t r = 0; r < h.rails; ++r) {
    HelloRail hr;
    std::memcpy(&hr, records + r * sizeof(HelloRail), sizeof(hr));
    theirs.push_back(RailSubnet{hr.net, hr.mask});
    addr.push_back(a);
    a += hr.addrBytes;
  }
  for (const auto& c : ctxs_) mine.push_back(RailSubnet{c->rail().net, c->rail().mask});
  const bool low = me_ < peer_;
  const std::vector<std::pair<int, int>> pairs = low ? pairRails(mine, theirs) : pairRails(theirs, mine);
  const size_t n = std::min({pairs.size(), static_cast<size_t>(railsWanted_), static_cast<size_t>(h.railsWanted),
                             static_cast<size_t>(kMaxRails)});
  std::string names;
  for (size_t k = 0; k < n; ++k) {
    const int myRail = low ? pairs[k].first : pairs[k].second;
    const int peerRail = low ? pairs[k].second : pairs[k].first;
    Rail rail;
    rail.ctx = ctxs_[static_cast<size_t>(myRail)].get();
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(addr[static_cast<size_t>(peerRail)]);
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = &UcxConnection::onEndpointError;
    ep.err_handler.arg = this;
    ucs_status_t st = ucp_ep_create(rail.ctx->worker(), &ep, &rail.ep);
    if (st != UCS_OK)
      return fail(remoteError("UCX endpoint to rank {} failed: {} (no common network transport{}? check "
                              "STRATA_UCX_TLS / UCX_NET_DEVICES)", peer_, ucs_status_string(st),
                              rail.ctx->rail().devices.empty() ? "" : " on " + rail.ctx->rail().devices));
    rails_.push_back(rail);
    names += fmt::format("{}{}", names.empty() ? "" : ", ",
                         rail.ctx->rail().devices.empty() ? "UCX's devices" : rail.ctx->rail().devices);
  }
  log::debug("ucx: rank {} to rank {}: {} rail(s): {}", me_, peer_, rails_.size(), names);
  return OkStatus();
}

// ---- sends ----

Status UcxConnection::postSends(bool* progressed) {
  for (Msg& m : sends_) {
    if (m.headPosted && m.chunksPosted == m.nchunks) continue;
    const bool inlined = m.nchunks == 0;
    if (!m.headPosted) {
      if (sendOps_.size() >= static_cast<size_t>(tune_.window)) return OkStatus();
      char* b = takeBuffer(headPool_, sizeof(Head) + tune_.inlineBytes);
      Head h{kHeadMagic, 0, m.t->bytes, m.t->call};
      std::memcpy(b, &h, sizeof(h));
      if (inlined && m.t->bytes) std::memcpy(b + sizeof(h), m.t->src, m.t->bytes);
      ucp_request_param_t p{};
      void* req =
          ucp_tag_send_nbx(rails_[0].ep, b, sizeof(h) + (inlined ? m.t->bytes : 0), makeTag(me_, m.headSeq), &p);
      if (UCS_PTR_IS_ERR(req))
        return fail(remoteError("UCX send to rank {} failed: {}", peer_, ucs_status_string(UCS_PTR_STATUS(req))));
      m.headPosted = true;
      *progressed = true;
      if (req == nullptr) {
        giveBuffer(headPool_, b);
        m.headDone = true;
        if (inlined) m.t->posted = m.t->bytes;
      } else {
        sendOps_.push_back(Op{req, &m, -1, b});
      }
    }
    while (m.chunksPosted < m.nchunks) {
      if (sendOps_.size() >= static_cast<size_t>(tune_.window)) return OkStatus();
      const uint64_t i = m.chunksPosted;
      const int r = railOfChunk(m.firstChunk + i, rails());
      if (!(m.regTried & (1u << r))) {  // memory handles are per context: one registration per rail
        m.regTried |= 1u << r;
        m.reg[r] = registration(r, m.t->src, m.t->bytes);
      }
      ucp_request_param_t p{};
      if (m.reg[r]) {
        p.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
        p.memh = static_cast<ucp_mem_h>(m.reg[r]->handle);
      }
      const char* src = static_cast<const char*>(m.t->src) + i * tune_.chunkBytes;
      void* req = ucp_tag_send_nbx(rails_[r].ep, src, chunkLen(m, i), makeTag(me_, m.headSeq + 1 + i), &p);
      if (UCS_PTR_IS_ERR(req))
        return fail(remoteError("UCX send to rank {} failed: {}", peer_, ucs_status_string(UCS_PTR_STATUS(req))));
      ++m.chunksPosted;
      *progressed = true;
      if (req == nullptr) {
        ++m.chunksDone;
        ++chunksSent_[r];
        m.t->posted += chunkLen(m, i);
      } else {
        sendOps_.push_back(Op{req, &m, static_cast<int64_t>(i), nullptr, r});
      }
    }
  }
  return OkStatus();
}

Status UcxConnection::reapSends(bool* progressed) {
  for (size_t k = 0; k < sendOps_.size();) {
    Op& op = sendOps_[k];
    ucs_status_t st = ucp_request_check_status(op.req);
    if (st == UCS_INPROGRESS) {
      ++k;
      continue;
    }
    ucp_request_free(op.req);
    Msg& m = *op.msg;
    if (op.chunk < 0) {
      giveBuffer(headPool_, op.bounce);
      m.headDone = true;
      if (m.nchunks == 0) m.t->posted = m.t->bytes;
    } else {
      ++m.chunksDone;
      if (st == UCS_OK) ++chunksSent_[op.rail];
      m.t->posted += chunkLen(m, static_cast<uint64_t>(op.chunk));
    }
    op = sendOps_.back();
    sendOps_.pop_back();
    *progressed = true;
    if (st != UCS_OK)
      return fail(remoteError("UCX send to rank {} failed: {} (peer exited or failed)", peer_, ucs_status_string(st)));
  }
  return OkStatus();
}

// ---- receives ----

Status UcxConnection::postRecvs(bool* progressed) {
  for (Msg& m : recvs_) {
    if (m.headPosted && m.chunksPosted == m.nchunks) continue;
    if (!m.headPosted) {
      if (recvOps_.size() >= static_cast<size_t>(tune_.window)) return OkStatus();
      char* b = takeBuffer(headPool_, sizeof(Head) + tune_.inlineBytes);
      ucp_request_param_t p{};
      // Always a request: an immediate completion in 1.13 leaves recv_info.tag_info unfilled (measured).
      p.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
      void* req = ucp_tag_recv_nbx(rails_[0].ctx->worker(), b, sizeof(Head) + tune_.inlineBytes,
                                   makeTag(peer_, m.headSeq), kTagFullMask, &p);
      if (UCS_PTR_IS_ERR(req))
        return fail(remoteError("UCX receive from rank {} failed: {}", peer_, ucs_status_string(UCS_PTR_STATUS(req))));
      m.headPosted = true;
      *progressed = true;
      recvOps_.push_back(Op{req, &m, -1, b});
    }
    if (!m.headDone) return OkStatus();  // chunks wait until the head confirmed the size
    while (m.chunksPosted < m.nchunks) {
      if (recvOps_.size() >= static_cast<size_t>(tune_.window)) return OkStatus();
      const uint64_t i = m.chunksPosted;
      const int r = railOfChunk(m.firstChunk + i, rails());
      ucp_request_param_t p{};
      // Always a request: an immediate completion in 1.13 leaves recv_info.tag_info unfilled (measured).
      p.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
      char* dst;
      char* bounce = nullptr;
      if (m.t->kind == Transfer::Recv) {
        dst = static_cast<char*>(m.t->dst) + i * tune_.chunkBytes;
        if (!(m.regTried & (1u << r))) {
          m.regTried |= 1u << r;
          m.reg[r] = registration(r, m.t->dst, m.t->bytes);
        }
        if (m.reg[r]) {
          p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
          p.memh = static_cast<ucp_mem_h>(m.reg[r]->handle);
        }
      } else {
        dst = bounce = takeBuffer(chunkPool_, tune_.chunkBytes);
      }
      void* req = ucp_tag_recv_nbx(rails_[r].ctx->worker(), dst, chunkLen(m, i), makeTag(peer_, m.headSeq + 1 + i),
                                   kTagFullMask, &p);
      if (UCS_PTR_IS_ERR(req)) {
        if (bounce) giveBuffer(chunkPool_, bounce);
        return fail(remoteError("UCX receive from rank {} failed: {}", peer_, ucs_status_string(UCS_PTR_STATUS(req))));
      }
      ++m.chunksPosted;
      *progressed = true;
      recvOps_.push_back(Op{req, &m, static_cast<int64_t>(i), bounce, r});
    }
  }
  return OkStatus();
}

Status UcxConnection::finishRecv(Op& op, ucs_status_t st, size_t length) {
  Msg& m = *op.msg;
  Transfer* t = m.t;
  if (op.chunk < 0) {
    Head h{};
    if (st == UCS_OK && length >= sizeof(Head)) std::memcpy(&h, op.bounce, sizeof(h));
    if (st == UCS_ERR_MESSAGE_TRUNCATED || (st == UCS_OK && (length < sizeof(Head) || h.magic != kHeadMagic)))
      return fail(remoteError("protocol error from rank {}: bad message head ({} bytes)", peer_, length));
    if (st != UCS_OK)
      return fail(remoteError("UCX receive from rank {} failed: {} (peer exited or failed)", peer_,
                              ucs_status_string(st)));
    if (h.call != t->call) return fail(callMismatch(peer_, h.call, me_, t->call));
    if (h.msgBytes != t->bytes)
      return fail(invalidUsage("message size mismatch: rank {} sent {} bytes, rank {} expects {} bytes", peer_,
                               h.msgBytes, me_, t->bytes));
    if (m.nchunks == 0) {
      if (length != sizeof(Head) + t->bytes)
        return fail(remoteError("protocol error from rank {}: inline payload of {} bytes for a {}-byte message",
                                peer_, length - sizeof(Head), t->bytes));
      const char* payload = op.bounce + sizeof(Head);
      if (t->kind == Transfer::Recv) {
        if (t->bytes) std::memcpy(t->dst, payload, t->bytes);
      } else {
        kernels::reduce(t->dst, t->src, payload, t->bytes / kernels::dtypeSize(t->dtype), t->dtype, t->op);
      }
      t->posted = t->bytes;
    }
    m.headDone = true;
    giveBuffer(headPool_, op.bounce);
    return OkStatus();
  }
  const uint64_t i = static_cast<uint64_t>(op.chunk);
  const size_t expect = chunkLen(m, i);
  if (st == UCS_ERR_MESSAGE_TRUNCATED || (st == UCS_OK && length != expect))
    return fail(remoteError("protocol error from rank {}: chunk {} of a {}-byte message has {} bytes (expected {})",
                            peer_, i, t->bytes, length, expect));
  if (st != UCS_OK)
    return fail(remoteError("UCX receive from rank {} failed: {} (peer exited or failed)", peer_,
                            ucs_status_string(st)));
  if (t->kind == Transfer::RecvReduce) {
    const size_t off = i * tune_.chunkBytes;
    kernels::reduce(static_cast<char*>(t->dst) + off, static_cast<const char*>(t->src) + off, op.bounce,
                    expect / kernels::dtypeSize(t->dtype), t->dtype, t->op);
    giveBuffer(chunkPool_, op.bounce);
  }
  ++m.chunksDone;
  ++chunksReceived_[op.rail];
  t->posted += expect;
  return OkStatus();
}

Status UcxConnection::reapRecvs(bool* progressed) {
  for (size_t k = 0; k < recvOps_.size();) {
    Op op = recvOps_[k];
    ucp_tag_recv_info_t info{};
    ucs_status_t st = ucp_tag_recv_request_test(op.req, &info);
    if (st == UCS_INPROGRESS) {
      ++k;
      continue;
    }
    ucp_request_free(op.req);
    recvOps_[k] = recvOps_.back();
    recvOps_.pop_back();
    *progressed = true;
    STRATA_RETURN_IF_ERROR(finishRecv(op, st, info.length));
  }
  return OkStatus();
}

void UcxConnection::retire(bool* progressed) {
  auto done = [](const Msg& m) { return m.headDone && m.chunksDone == m.nchunks; };
  for (auto* q : {&sends_, &recvs_}) {
    while (!q->empty() && done(q->front())) {
      Msg& m = q->front();
      releaseRegs(m);
      m.t->posted = m.t->bytes;
      m.t->complete = true;
      q->pop_front();
      *progressed = true;
    }
  }
}

// ---- the Connection interface ----

Status UcxConnection::progressWithNotice(bool* progressed) {
  Status st = progressTransfers(progressed);
  if (st.ok() || st.code() != strataRemoteError) return st;
  // The peer is gone. If it failed rather than exited, its notice on the oob socket says why
  // (e.g. which rank it lost); UCX may report the endpoint error first, so give the notice a moment.
  const double deadline = net::nowSec() + kNoticeWaitSec;
  bool ignored = false;
  while (!peerNotice_ && !oobClosed_ && oob_ >= 0) {
    const double left = deadline - net::nowSec();
    if (left <= 0 || !readOob(&ignored).ok()) break;
    if (peerNotice_ || oobClosed_) break;
    pollfd p{oob_, POLLIN, 0};
    (void)::poll(&p, 1, static_cast<int>(left * 1000) + 1);
  }
  log::debug("rank {}: UCX connection to rank {} failed ({}); peer notice: {}", me_, peer_, st.message(),
             peerNotice_ ? peerError_.message() : oobClosed_ ? "none (oob closed)" : "none within the wait");
  if (peerNotice_) broken_ = peerError_;
  return broken_;
}

Status UcxConnection::progress(bool* progressed) {
  if (!broken_.ok()) return broken_;
  const Status st = progressWithNotice(progressed);
  if (st.ok()) return st;
  if (broken_.ok()) broken_ = st;
  // The caller learns of the failure now and may free its buffers: UCX must not write into them
  // later (a matched rendezvous receive cannot be cancelled; data already on the wire still lands).
  teardownEndpoint();
  return broken_;
}

void UcxConnection::abandonTransfers() {
  if (broken_.ok())
    broken_ = Status(strataAborted, fmt::format("rank {}: an operation with rank {} was abandoned", me_, peer_));
  teardownEndpoint();
}

Status UcxConnection::progressTransfers(bool* progressed) {
  STRATA_RETURN_IF_ERROR(writeHello(progressed));
  STRATA_RETURN_IF_ERROR(readOob(progressed));
  const bool epDown = epStatus_ != UCS_OK;
  if (epDown && epDownAt_ == 0) epDownAt_ = net::nowSec();
  if (!rails_.empty()) {
    if (progressWorkers()) *progressed = true;
    STRATA_RETURN_IF_ERROR(reapSends(progressed));
    STRATA_RETURN_IF_ERROR(reapRecvs(progressed));
    retire(progressed);
    if (broken_.ok()) {
      // Receives are matched on the worker, not the endpoint: they still find what the peer sent
      // before its endpoint went down.
      if (!epDown) STRATA_RETURN_IF_ERROR(postSends(progressed));
      STRATA_RETURN_IF_ERROR(postRecvs(progressed));
    }
  }
  if (idle()) return OkStatus();
  // A failure notice or EOF before the hello is final. A peer that exited (endpoint error, EOF
  // after the hello) fails pending sends at once; pending receives get a moment to match the data
  // it sent just before exiting.
  if (!peerError_.ok()) return fail(peerError_);
  if (epDown || (oobClosed_ && gotHello_)) {
    const Status gone = epDown ? remoteError("connection to rank {} failed in UCX: {} (peer exited or failed)", peer_,
                                             ucs_status_string(epStatus_))
                               : remoteError("rank {} closed the connection (peer exited or failed)", peer_);
    const double since = epDown && (!oobClosed_ || epDownAt_ < oobClosedAt_) ? epDownAt_ : oobClosedAt_;
    if ((epDown && !sends_.empty()) || net::nowSec() - since > kEofGraceSec) return fail(gone);
    *progressed = true;  // keep polling through the grace period
  }
  return OkStatus();
}

Status UcxConnection::checkPeer() {
  if (!broken_.ok()) return broken_;
  bool ignored = false;
  return progress(&ignored);
}

void UcxConnection::addWaitSources(WaitSet* ws) {
  if (!broken_.ok() || idle()) return;
  if (oob_ >= 0 && !oobClosed_) {
    short ev = POLLIN;
    if (helloSent_ < helloOut_.size()) ev |= POLLOUT;
    ws->fds.push_back(pollfd{oob_, ev, 0});
  }
  for (Rail& r : rails_) r.ctx->addWaitSources(ws);
}

void UcxConnection::sendFailure(const std::string& reason) {
  if (oob_ < 0) return;
  bool ignored = false;
  (void)writeHello(&ignored);  // a frame may only follow a whole hello
  if (helloSent_ == helloOut_.size()) {
    const std::string why = reason.substr(0, kMaxReasonBytes);
    FailFrame f{kFailMagic, static_cast<uint32_t>(why.size())};
    std::string frame(reinterpret_cast<const char*>(&f), sizeof(f));
    frame += why;
    (void)::send(oob_, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);  // best effort
  }
  ::shutdown(oob_, SHUT_RDWR);
}

}  // namespace strata::ucx
