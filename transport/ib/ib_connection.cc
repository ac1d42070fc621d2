// ib_connection.cc: queue-pair setup, completion handling and the slot / single-copy data paths of
// one ibverbs connection.
#include "transport/ib/ib_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>

#include "kernels/host_reduce.h"
#include "transport/log.h"

namespace strata::ib {
namespace {

constexpr int kMinRnrTimer = 12;  // 0.64 ms
constexpr int kRnrRetry = 7;      // infinite (receive queues are refilled as completions arrive)

char* allocRegion(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, bytes) != 0) return nullptr;
  memset(p, 0, bytes);
  return static_cast<char*>(p);
}

const char* opName(int op) {
  switch (op) {
    case IBV_WC_SEND: return "send";
    case IBV_WC_RDMA_WRITE: return "RDMA write";
    case IBV_WC_RDMA_READ: return "RDMA read";
    case IBV_WC_RECV: return "receive";
    case IBV_WC_RECV_RDMA_WITH_IMM: return "receive (write with immediate)";
    default: return "work request";
  }
}

}  // namespace

IbConnection::IbConnection(std::shared_ptr<Devices> devices, int me, int peer, int oobFd, int rails)
    : dev_(std::move(devices)),
      v_(dev_->verbs()),
      opt_(dev_->options()),
      me_(me),
      peer_(peer),
      railsWanted_(std::max(1, std::min({rails, static_cast<int>(dev_->rails().size()), kMaxRails}))),
      hs_(me, peer, oobFd,
          Hello{Handshake::kVersion, me, static_cast<uint32_t>(railsWanted_),
                static_cast<uint32_t>(std::clamp(opt_.qpsPerRail, 1, kMaxQps / kMaxRails)), opt_.slots,
                static_cast<uint32_t>(opt_.slotBytes)},
          this) {
  kickFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

IbConnection::~IbConnection() {
  for (SendOp* op = sends_.begin(); op != sends_.end(); ++op)
    for (int r = 0; r < kMaxRails; ++r)
      if (op->reg[r]) dev_->rails()[r].cache->release(op->reg[r]);
  for (RecvOp* op = recvs_.begin(); op != recvs_.end(); ++op)
    for (int r = 0; r < kMaxRails; ++r)
      if (op->reg[r]) dev_->rails()[r].cache->release(op->reg[r]);
  for (QpRes& q : qps_)
    if (q.qp) v_->destroyQp(q.qp);
  for (RailRes& r : rails_) {
    if (r.cq) {
      drainChannelEvents();
      v_->destroyCq(r.cq);
    }
    if (r.channel) v_->destroyCompChannel(r.channel);
    if (r.fifoMr) v_->deregMr(r.fifoMr);
    if (r.stageMr) v_->deregMr(r.stageMr);
    if (r.scratchMr) v_->deregMr(r.scratchMr);
  }
  free(fifo_);
  free(stage_);
  free(scratch_);
  if (kickFd_ >= 0) close(kickFd_);
}

void IbConnection::postSend(Transfer* t) {
  SendOp op;
  op.t = t;
  sends_.push_back(op);
}

void IbConnection::postRecv(Transfer* t) {
  RecvOp op;
  op.t = t;
  recvs_.push_back(op);
}

Status IbConnection::fail(Status st, bool tellPeer) {
  if (broken_.ok()) {
    broken_ = st;
    if (tellPeer) hs_.sendFailure(st.message());
  }
  return broken_;
}

// ---- handshake hooks ----------------------------------------------------------------------

Status IbConnection::onHello(const Hello& peer, Info* mine) {
  nrails_ = static_cast<int>(std::min<uint32_t>(peer.rails, static_cast<uint32_t>(railsWanted_)));
  qpsPerRail_ = static_cast<int>(std::min<uint32_t>(peer.qpsPerRail, std::clamp(opt_.qpsPerRail, 1, kMaxQps / kMaxRails)));
  slots_ = std::min(peer.slots, opt_.slots);
  slotBytes_ = std::min<size_t>(peer.slotBytes, opt_.slotBytes);
  if (nrails_ < 1 || qpsPerRail_ < 1 || slots_ < 2 || slotBytes_ < 2 * kSlotHeaderBytes || slotBytes_ % 64)
    return remoteError("ibverbs handshake with rank {}: unusable offer ({} rails, {} queue pairs per rail, {} slots of {} bytes)",
                       peer_, peer.rails, peer.qpsPerRail, peer.slots, peer.slotBytes);
  STRATA_RETURN_IF_ERROR(setupQueuePairs());
  mine->rails = static_cast<uint32_t>(nrails_);
  mine->qps = static_cast<uint32_t>(qps_.size());
  for (int r = 0; r < nrails_; ++r) {
    Rail& rail = *rails_[r].rail;
    Info::Rail& ir = mine->rail[r];
    memcpy(ir.gid, rail.gid.raw, 16);
    ir.lid = rail.lid;
    ir.ethernet = rail.ethernet ? 1 : 0;
    ir.mtu = static_cast<uint8_t>(rail.mtu);
    ir.fifoAddr = reinterpret_cast<uint64_t>(fifo_);
    ir.fifoRkey = rails_[r].fifoMr->rkey;
  }
  for (size_t q = 0; q < qps_.size(); ++q) mine->qp[q] = Info::Qp{qps_[q].qp->qp_num, qps_[q].psn};
  return OkStatus();
}

Status IbConnection::setupQueuePairs() {
  const size_t fifoBytes = slots_ * slotBytes_;
  fifo_ = allocRegion(fifoBytes);
  stage_ = allocRegion(fifoBytes);
  if (!fifo_ || !stage_) return systemError("ibverbs: cannot allocate {} bytes of slots for rank {}", 2 * fifoBytes, peer_);
  credits_ = std::make_unique<SlotCredits>(slots_);
  arrivals_ = std::make_unique<SlotArrivals>(slots_);
  // Receive work requests per queue pair: every slot may land on one, plus credit returns (one per
  // consumed slot at most) and FINs (one per single-copy send in flight).
  rqDepth_ = static_cast<int>(2 * slots_) + opt_.maxRendezvous + 8;
  const int nq = nrails_ * qpsPerRail_;
  rails_.resize(nrails_);
  std::mt19937 rng(static_cast<uint32_t>(me_ * 7919 + peer_ * 104729) ^ static_cast<uint32_t>(getpid()));
  for (int r = 0; r < nrails_; ++r) {
    RailRes& rr = rails_[r];
    rr.rail = &dev_->rails()[r];
    const char* dname = rr.rail->name.c_str();
    rr.channel = v_->createCompChannel(rr.rail->ctx);
    if (!rr.channel) return systemError("ibverbs: ibv_create_comp_channel failed on {}: {}", dname, strerror(errno));
    fcntl(rr.channel->fd, F_SETFL, fcntl(rr.channel->fd, F_GETFL) | O_NONBLOCK);
    const int cqe = qpsPerRail_ * (opt_.sendDepth + rqDepth_) + 16;
    rr.cq = v_->createCq(rr.rail->ctx, cqe, nullptr, rr.channel, 0);
    if (!rr.cq) return systemError("ibverbs: ibv_create_cq({}) failed on {}: {}", cqe, dname, strerror(errno));
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    rr.fifoMr = v_->regMr(rr.rail->pd, fifo_, fifoBytes, access);
    rr.stageMr = v_->regMr(rr.rail->pd, stage_, fifoBytes, IBV_ACCESS_LOCAL_WRITE);
    if (!rr.fifoMr || !rr.stageMr)
      return systemError("ibverbs: ibv_reg_mr of {} slot bytes failed on {}: {}", fifoBytes, dname, strerror(errno));
  }
  qps_.resize(nq);
  for (int q = 0; q < nq; ++q) {
    QpRes& qr = qps_[q];
    qr.rail = q % nrails_;
    RailRes& rr = rails_[qr.rail];
    ibv_qp_init_attr ia{};
    ia.send_cq = rr.cq;
    ia.recv_cq = rr.cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = static_cast<uint32_t>(opt_.sendDepth);
    ia.cap.max_recv_wr = static_cast<uint32_t>(rqDepth_);
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    qr.qp = v_->createQp(rr.rail->pd, &ia);
    if (!qr.qp) return systemError("ibverbs: ibv_create_qp failed on {}: {}", rr.rail->name, strerror(errno));
    qr.psn = rng() & 0xffffff;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = rr.rail->port;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (int e = v_->modifyQp(qr.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      return systemError("ibverbs: queue pair to INIT failed on {}: {}", rr.rail->name, strerror(e));
    for (int i = 0; i < rqDepth_; ++i) STRATA_RETURN_IF_ERROR(postRecvWr(q));
  }
  setUp_ = true;
  return OkStatus();
}

Status IbConnection::onInfo(const Info& peer) {
  if (peer.rails != static_cast<uint32_t>(nrails_) || peer.qps != qps_.size())
    return remoteError("ibverbs handshake with rank {}: it uses {} rails / {} queue pairs, this rank {} / {}", peer_,
                       peer.rails, peer.qps, nrails_, qps_.size());
  for (int r = 0; r < nrails_; ++r) {
    rails_[r].remoteFifo = peer.rail[r].fifoAddr;
    rails_[r].remoteRkey = peer.rail[r].fifoRkey;
    if (peer.rail[r].ethernet != (rails_[r].rail->ethernet ? 1 : 0))
      return remoteError("ibverbs: rail {} of rank {} is {}, this rank's ({}) is {}", r, peer_,
                         peer.rail[r].ethernet ? "Ethernet (RoCE)" : "InfiniBand", rails_[r].rail->name,
                         rails_[r].rail->ethernet ? "Ethernet (RoCE)" : "InfiniBand");
  }
  for (size_t q = 0; q < qps_.size(); ++q) {
    QpRes& qr = qps_[q];
    Rail& rail = *rails_[qr.rail].rail;
    const Info::Rail& pr = peer.rail[qr.rail];
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = static_cast<ibv_mtu>(std::min<int>(pr.mtu, rail.mtu));
    pathMtu_ = 128 << a.path_mtu;  // IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5
    a.dest_qp_num = peer.qp[q].qpn;
    a.rq_psn = peer.qp[q].psn;
    a.max_dest_rd_atomic = static_cast<uint8_t>(rail.maxRdAtomic);
    a.min_rnr_timer = kMinRnrTimer;
    a.ah_attr.port_num = rail.port;
    a.ah_attr.sl = 0;
    if (rail.ethernet) {
      a.ah_attr.is_global = 1;
      memcpy(a.ah_attr.grh.dgid.raw, pr.gid, 16);
      a.ah_attr.grh.sgid_index = static_cast<uint8_t>(rail.gidIndex);
      a.ah_attr.grh.hop_limit = 255;
    } else {
      a.ah_attr.dlid = pr.lid;
    }
    if (int e = v_->modifyQp(qr.qp, &a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
      return systemError("ibverbs: queue pair to RTR (rank {}) failed on {}: {}", peer_, rail.name, strerror(e));
    ibv_qp_attr s{};
    s.qp_state = IBV_QPS_RTS;
    s.timeout = static_cast<uint8_t>(opt_.timeout);
    s.retry_cnt = static_cast<uint8_t>(opt_.retryCnt);
    s.rnr_retry = kRnrRetry;
    s.sq_psn = qr.psn;
    s.max_rd_atomic = static_cast<uint8_t>(rail.maxRdAtomic);
    if (int e = v_->modifyQp(qr.qp, &s,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                 IBV_QP_MAX_QP_RD_ATOMIC))
      return systemError("ibverbs: queue pair to RTS (rank {}) failed on {}: {}", peer_, rail.name, strerror(e));
  }
  log::debug("ibverbs: rank {} <-> rank {}: {} rail(s), {} queue pairs, {} slots of {} bytes, path MTU {}", me_,
             peer_, nrails_, qps_.size(), slots_, slotBytes_, pathMtu_);
  return OkStatus();
}

// ---- work requests ------------------------------------------------------------------------

Status IbConnection::postRecvWr(int q) {
  ibv_recv_wr wr{};
  wr.wr_id = makeWrId(WrKind::Recv, static_cast<unsigned>(q), 0);
  wr.num_sge = 0;  // writes with immediate land in the slots; control messages carry no payload
  ibv_recv_wr* bad = nullptr;
  if (int e = v_->postRecv(qps_[q].qp, &wr, &bad))
    return remoteError("ibverbs: posting a receive to rank {} failed: {}", peer_, strerror(e));
  return OkStatus();
}

Status IbConnection::postCtrl(uint32_t imm) {
  ibv_send_wr wr{};
  wr.wr_id = makeWrId(WrKind::Ctrl, 0, 0);
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  wr.num_sge = 0;
  ibv_send_wr* bad = nullptr;
  if (int e = v_->postSend(qps_[0].qp, &wr, &bad))
    return remoteError("ibverbs: posting a control message to rank {} failed: {}", peer_, strerror(e));
  ++qps_[0].outstanding;
  return OkStatus();
}

// ---- completions --------------------------------------------------------------------------

Status IbConnection::pollCompletions(bool* moved) {
  if (!stash_.empty()) {
    uint64_t x;
    (void)!read(kickFd_, &x, sizeof(x));
    std::vector<ibv_wc> batch;
    batch.swap(stash_);
    for (const ibv_wc& wc : batch) STRATA_RETURN_IF_ERROR(handleCompletion(wc, moved));
  }
  ibv_wc wcs[32];
  for (RailRes& r : rails_) {
    while (true) {
      int n = v_->pollCq(r.cq, 32, wcs);
      if (n < 0) return fail(remoteError("ibverbs: polling the completion queue of {} (rank {}) failed", r.rail->name, peer_), true);
      for (int i = 0; i < n; ++i) STRATA_RETURN_IF_ERROR(handleCompletion(wcs[i], moved));
      if (n < 32) break;
    }
  }
  return OkStatus();
}

Status IbConnection::handleCompletion(const ibv_wc& wc, bool* moved) {
  *moved = true;
  const unsigned q = wrQp(wc.wr_id);
  const WrKind kind = wrKind(wc.wr_id);
  if (wc.status != IBV_WC_SUCCESS) {
    return fail(remoteError("ibverbs connection to rank {} failed: {} (status {}) on a {} of queue pair {} ({})", peer_,
                            wcStatusName(wc.status), static_cast<int>(wc.status), opName(wc.opcode), q,
                            q < qps_.size() ? rails_[qps_[q].rail].rail->name : std::string("?")),
                true);
  }
  if (q >= qps_.size()) return fail(internalError("ibverbs: completion for unknown queue pair {}", q), true);
  if (kind != WrKind::Recv) --qps_[q].outstanding;
  switch (kind) {
    case WrKind::Recv: {
      STRATA_RETURN_IF_ERROR(postRecvWr(static_cast<int>(q)));
      const uint32_t imm = ntohl(wc.imm_data);
      if (!(wc.wc_flags & IBV_WC_WITH_IMM))
        return fail(remoteError("ibverbs: message without immediate from rank {}", peer_), true);
      switch (immKind(imm)) {
        case ImmKind::Slot:
          if (!arrivals_->arrive(immValue(imm)))
            return fail(remoteError("ibverbs: rank {} wrote slot {} without credit", peer_, immValue(imm)), true);
          return OkStatus();
        case ImmKind::Credit:
          if (credits_->inFlight() < immValue(imm))
            return fail(remoteError("ibverbs: rank {} returned {} credits, {} were in use", peer_, immValue(imm),
                                    credits_->inFlight()),
                        true);
          credits_->addCredits(immValue(imm));
          return OkStatus();
        case ImmKind::Fin: {
          const uint64_t id = immValue(imm);
          for (SendOp* op = sends_.begin(); op != sends_.end(); ++op) {
            if (op->rndv && !op->finished && op->chunksPosted == 1 && (op->rndvId & 0x0fffffff) == id) {
              op->finished = true;
              op->t->posted = op->t->bytes;
              for (int r = 0; r < kMaxRails; ++r)
                if (op->reg[r]) dev_->rails()[r].cache->release(op->reg[r]), op->reg[r] = nullptr;
              --rndvInFlight_;
              return OkStatus();
            }
          }
          return fail(remoteError("ibverbs: rank {} finished unknown single-copy transfer {}", peer_, id), true);
        }
      }
      return fail(remoteError("ibverbs: unknown immediate {:#x} from rank {}", imm, peer_), true);
    }
    case WrKind::SlotWrite:
    case WrKind::Ctrl:
      return OkStatus();
    case WrKind::Read:
      return readDone(wrValue(wc.wr_id), moved);
  }
  return fail(internalError("ibverbs: completion of unknown kind {}", static_cast<int>(kind)), true);
}

Status IbConnection::readDone(uint64_t value, bool* moved) {
  const uint64_t opId = value >> 24, chunk = value & 0xffffff;
  for (RecvOp* op = recvs_.begin(); op != recvs_.end(); ++op) {
    if (!op->rndv || (op->opId & 0xffffff) != opId) continue;
    Transfer* t = op->t;
    const size_t off = op->plan.offsetOf(chunk), len = op->plan.lengthOf(chunk);
    if (t->kind == Transfer::RecvReduce) {
      const size_t es = kernels::dtypeSize(t->dtype);
      const size_t s = chunk % static_cast<uint64_t>(opt_.scratchChunks);
      kernels::reduce(static_cast<char*>(t->dst) + off, static_cast<const char*>(t->src) + off,
                      scratch_ + s * opt_.readChunkBytes, len / es, t->dtype, t->op);
      scratchBusy_[s] = 0;
    }
    op->filled += len;
    t->posted += len;
    if (++op->doneChunks == op->plan.chunks()) {
      for (int r = 0; r < kMaxRails; ++r)
        if (op->reg[r]) dev_->rails()[r].cache->release(op->reg[r]), op->reg[r] = nullptr;
      pendingFins_.push_back(op->rndvId);
      op->finQueued = true;
    }
    return OkStatus();
  }
  return fail(internalError("ibverbs: read completion for unknown transfer {} (rank {})", opId, peer_), true);
}

// ---- receive side -------------------------------------------------------------------------

Status IbConnection::consumeSlots(bool* moved) {
  while (arrivals_->headReady()) {
    if (recvCursor_ >= recvs_.size()) return OkStatus();  // not posted yet: the slot (and its credit) waits
    const char* slot = fifo_ + arrivals_->headSlot() * slotBytes_;
    SlotHeader h;
    memcpy(&h, slot, sizeof(h));
    if (h.seq != arrivals_->headSeq())
      return fail(remoteError("ibverbs: framing error from rank {}: slot {} holds chunk {} (expected {})", peer_,
                              arrivals_->headSlot(), h.seq, arrivals_->headSeq()),
                  true);
    RecvOp& op = recvs_.begin()[recvCursor_];
    Transfer* t = op.t;
    if (h.call != t->call) return fail(callMismatch(peer_, h.call, me_, t->call), true);
    if (h.msgBytes != t->bytes)
      return fail(invalidUsage("message size mismatch: rank {} sent {} bytes, rank {} expects {} bytes", peer_,
                               h.msgBytes, me_, t->bytes),
                  true);
    if (h.type == SlotHeader::Data) {
      const size_t len = std::min(payloadBytes(), t->bytes - op.filled);
      if (h.chunkBytes != len)
        return fail(remoteError("ibverbs: framing error from rank {}: chunk of {} bytes, expected {}", peer_,
                                h.chunkBytes, len),
                    true);
      const char* data = slot + kSlotHeaderBytes;
      if (t->kind == Transfer::Recv) {
        memcpy(static_cast<char*>(t->dst) + op.filled, data, len);
      } else {
        const size_t es = kernels::dtypeSize(t->dtype);
        kernels::reduce(static_cast<char*>(t->dst) + op.filled, static_cast<const char*>(t->src) + op.filled, data,
                        len / es, t->dtype, t->op);
      }
      op.filled += len;
      t->posted += len;
      counters().slotChunks.fetch_add(1, std::memory_order_relaxed);
      if (op.filled == t->bytes) ++recvCursor_;
    } else if (h.type == SlotHeader::Rts) {
      if (op.filled != 0)
        return fail(remoteError("ibverbs: framing error from rank {}: single-copy offer inside a message", peer_), true);
      op.rndv = true;
      op.rndvId = h.rndvId;
      op.opId = nextOpId_++;
      op.raddr = h.addr;
      for (int r = 0; r < kMaxRails; ++r) op.rkey[r] = h.rkey[r];
      op.plan = ReadPlan{t->bytes, opt_.readChunkBytes, static_cast<unsigned>(qps_.size())};
      (t->kind == Transfer::Recv ? counters().singleCopy : counters().singleCopyReduce)
          .fetch_add(1, std::memory_order_relaxed);
      if (t->kind == Transfer::Recv) {
        for (int r = 0; r < nrails_; ++r)
          if (Status st = dev_->rails()[r].cache->acquire(t->dst, t->bytes, &op.reg[r]); !st.ok()) return fail(st, true);
      } else {
        STRATA_RETURN_IF_ERROR(ensureScratch());
      }
      ++recvCursor_;
    } else {
      return fail(remoteError("ibverbs: framing error from rank {}: slot type {}", peer_, static_cast<uint32_t>(h.type)), true);
    }
    arrivals_->consume();
    *moved = true;
  }
  return OkStatus();
}

Status IbConnection::ensureScratch() {
  if (scratch_) return OkStatus();
  const size_t bytes = static_cast<size_t>(opt_.scratchChunks) * opt_.readChunkBytes;
  scratch_ = allocRegion(bytes);
  if (!scratch_) return fail(systemError("ibverbs: cannot allocate {} bytes of reduction scratch", bytes), true);
  scratchBusy_.assign(static_cast<size_t>(opt_.scratchChunks), 0);
  for (RailRes& r : rails_) {
    r.scratchMr = v_->regMr(r.rail->pd, scratch_, bytes, IBV_ACCESS_LOCAL_WRITE);
    if (!r.scratchMr) return fail(systemError("ibverbs: ibv_reg_mr of the reduction scratch failed on {}", r.rail->name), true);
  }
  return OkStatus();
}

Status IbConnection::issueReads(bool* moved) {
  for (size_t i = 0; i < recvCursor_; ++i) {
    RecvOp& op = recvs_.begin()[i];
    if (!op.rndv) continue;
    Transfer* t = op.t;
    while (op.nextChunk < op.plan.chunks()) {
      const uint64_t c = op.nextChunk;
      const unsigned q = op.plan.qpOf(c);
      QpRes& qr = qps_[q];
      if (qr.outstanding >= opt_.sendDepth) return OkStatus();
      const size_t off = op.plan.offsetOf(c), len = op.plan.lengthOf(c);
      ibv_sge sge{};
      sge.length = static_cast<uint32_t>(len);
      if (t->kind == Transfer::RecvReduce) {
        const size_t s = c % static_cast<uint64_t>(opt_.scratchChunks);
        if (scratchBusy_[s]) return OkStatus();  // the ring is full: later reads wait for reductions
        scratchBusy_[s] = 1;
        sge.addr = reinterpret_cast<uint64_t>(scratch_ + s * opt_.readChunkBytes);
        sge.lkey = rails_[qr.rail].scratchMr->lkey;
      } else {
        sge.addr = reinterpret_cast<uint64_t>(static_cast<char*>(t->dst) + off);
        sge.lkey = op.reg[qr.rail]->lkey;
      }
      ibv_send_wr wr{};
      wr.wr_id = makeWrId(WrKind::Read, q, ((op.opId & 0xffffff) << 24) | (c & 0xffffff));
      wr.opcode = IBV_WR_RDMA_READ;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.wr.rdma.remote_addr = op.raddr + off;
      wr.wr.rdma.rkey = op.rkey[qr.rail];
      ibv_send_wr* bad = nullptr;
      if (int e = v_->postSend(qr.qp, &wr, &bad))
        return fail(remoteError("ibverbs: posting an RDMA read from rank {} failed: {}", peer_, strerror(e)), true);
      ++qr.outstanding;
      ++op.nextChunk;
      *moved = true;
    }
  }
  return OkStatus();
}

// ---- send side ----------------------------------------------------------------------------

Status IbConnection::pushSends(bool* moved) {
  const size_t payload = payloadBytes();
  while (sendCursor_ < sends_.size()) {
    SendOp& op = sends_.begin()[sendCursor_];
    Transfer* t = op.t;
    if (!op.started) {
      op.started = true;
      op.rndv = opt_.singleCopyMinBytes > 0 && t->bytes >= opt_.singleCopyMinBytes;
      op.chunks = op.rndv ? 1 : (t->bytes + payload - 1) / payload;
    }
    if (op.rndv && rndvInFlight_ >= opt_.maxRendezvous) return OkStatus();
    while (op.chunksPosted < op.chunks) {
      if (!credits_->canSend()) return OkStatus();
      const uint64_t seq = credits_->next();
      const unsigned q = static_cast<unsigned>(seq % qps_.size());
      QpRes& qr = qps_[q];
      if (qr.outstanding >= opt_.sendDepth) return OkStatus();
      const int rail = qr.rail;
      char* slot = stage_ + credits_->slotOf(seq) * slotBytes_;
      SlotHeader h{};
      h.seq = seq;
      h.msgBytes = t->bytes;
      h.call = t->call;
      size_t len = 0;
      if (op.rndv) {
        for (int r = 0; r < nrails_; ++r)
          if (!op.reg[r])
            if (Status st = dev_->rails()[r].cache->acquire(t->src, t->bytes, &op.reg[r]); !st.ok()) return fail(st, true);
        h.type = SlotHeader::Rts;
        h.addr = reinterpret_cast<uint64_t>(t->src);
        op.rndvId = nextRndvId_++;
        h.rndvId = op.rndvId & 0x0fffffff;
        for (int r = 0; r < nrails_; ++r) h.rkey[r] = op.reg[r]->rkey;
      } else {
        const size_t off = op.chunksPosted * payload;
        len = std::min(payload, t->bytes - off);
        h.type = SlotHeader::Data;
        h.chunkBytes = static_cast<uint32_t>(len);
        memcpy(slot + kSlotHeaderBytes, static_cast<const char*>(t->src) + off, len);
      }
      memcpy(slot, &h, sizeof(h));
      ibv_sge sge{reinterpret_cast<uint64_t>(slot), static_cast<uint32_t>(kSlotHeaderBytes + len),
                  rails_[rail].stageMr->lkey};
      ibv_send_wr wr{};
      wr.wr_id = makeWrId(WrKind::SlotWrite, q, seq);
      wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.imm_data = htonl(makeImm(ImmKind::Slot, credits_->slotOf(seq)));
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.wr.rdma.remote_addr = rails_[rail].remoteFifo + credits_->slotOf(seq) * slotBytes_;
      wr.wr.rdma.rkey = rails_[rail].remoteRkey;
      ibv_send_wr* bad = nullptr;
      if (int e = v_->postSend(qr.qp, &wr, &bad))
        return fail(remoteError("ibverbs: posting a write to rank {} failed: {}", peer_, strerror(e)), true);
      credits_->take();
      ++qr.outstanding;
      ++op.chunksPosted;
      if (op.rndv) ++rndvInFlight_;
      else t->posted += len;
      *moved = true;
    }
    ++sendCursor_;
  }
  return OkStatus();
}

Status IbConnection::sendControl(bool* moved) {
  // Credits go back in batches, or at once when the receiver has caught up (the sender may wait).
  const uint64_t owed = arrivals_->owed();
  if (owed > 0 && (owed >= std::max<uint64_t>(1, slots_ / 4) || !arrivals_->headReady()) &&
      qps_[0].outstanding < opt_.sendDepth) {
    STRATA_RETURN_IF_ERROR(postCtrl(makeImm(ImmKind::Credit, static_cast<uint32_t>(arrivals_->takeOwed()))));
    *moved = true;
  }
  size_t sent = 0;
  while (sent < pendingFins_.size() && qps_[0].outstanding < opt_.sendDepth) {
    STRATA_RETURN_IF_ERROR(postCtrl(makeImm(ImmKind::Fin, static_cast<uint32_t>(pendingFins_[sent] & 0x0fffffff))));
    ++sent;
    *moved = true;
  }
  pendingFins_.erase(pendingFins_.begin(), pendingFins_.begin() + static_cast<long>(sent));
  return OkStatus();
}

void IbConnection::completeFront(bool* moved) {
  while (!sends_.empty()) {
    SendOp& op = sends_.front();
    if (!op.started || (op.rndv ? !op.finished : op.chunksPosted < op.chunks)) break;
    op.t->complete = true;
    sends_.pop_front();
    --sendCursor_;
    *moved = true;
  }
  while (!recvs_.empty() && recvCursor_ > 0) {
    RecvOp& op = recvs_.front();
    if (op.rndv ? !op.finQueued : op.filled < op.t->bytes) break;
    op.t->complete = true;
    recvs_.pop_front();
    --recvCursor_;
    *moved = true;
  }
}

// ---- progress and waiting -----------------------------------------------------------------

void IbConnection::drainChannelEvents() {
  for (RailRes& r : rails_) {
    if (!r.armed || !r.channel) continue;
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    while (v_->getCqEvent(r.channel, &cq, &ctx) == 0) {
      v_->ackCqEvents(cq, 1);
      r.armed = false;
    }
  }
}

Status IbConnection::progress(bool* progressed) {
  if (!broken_.ok()) return broken_;
  if (!hs_.connected()) {
    if (Status st = hs_.progress(progressed); !st.ok()) return fail(st, false);
    if (!hs_.connected()) return OkStatus();
  }
  drainChannelEvents();
  bool moved = false;
  STRATA_RETURN_IF_ERROR(pollCompletions(&moved));
  STRATA_RETURN_IF_ERROR(consumeSlots(&moved));
  STRATA_RETURN_IF_ERROR(issueReads(&moved));
  STRATA_RETURN_IF_ERROR(pushSends(&moved));
  STRATA_RETURN_IF_ERROR(sendControl(&moved));
  completeFront(&moved);
  if (!moved) {
    // Idle: look at the oob socket (EOF or FAIL means the peer is gone).
    bool dummy = false;
    if (Status st = hs_.progress(&dummy); !st.ok()) return fail(st, false);
  }
  if (moved) *progressed = true;
  return OkStatus();
}

void IbConnection::addWaitSources(WaitSet* ws) {
  hs_.addWaitSources(ws);
  if (!hs_.connected() || !broken_.ok()) return;
  for (RailRes& r : rails_) {
    if (!r.armed) {
      if (v_->reqNotifyCq(r.cq, 0) == 0) r.armed = true;
      // Completions that arrived before arming raise no event: collect them for progress().
      ibv_wc wcs[16];
      int n;
      while ((n = v_->pollCq(r.cq, 16, wcs)) > 0) stash_.insert(stash_.end(), wcs, wcs + n);
    }
    ws->fds.push_back(pollfd{r.channel->fd, POLLIN, 0});
  }
  if (!stash_.empty()) {
    uint64_t one = 1;
    (void)!write(kickFd_, &one, sizeof(one));
    ws->fds.push_back(pollfd{kickFd_, POLLIN, 0});
  }
}

Status IbConnection::checkPeer() {
  if (!broken_.ok()) return broken_;
  bool dummy = false;
  if (Status st = hs_.progress(&dummy); !st.ok()) return fail(st, false);
  return OkStatus();
}

void IbConnection::sendFailure(const std::string& reason) {
  hs_.sendFailure(reason);
  if (broken_.ok()) broken_ = remoteError("ibverbs connection to rank {} shut down after a local failure: {}", peer_, reason);
}

}  // namespace strata::ib
