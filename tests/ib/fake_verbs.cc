// fake_verbs.cc: the test-only RC provider over shared memory (see fake_verbs.h for its model).
#include "fake_verbs.h"

#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace strata::ib::fake {
namespace {

struct FDev {
  ibv_device dev{};
  DeviceSpec spec;
  uint64_t bytes = 0;
};
struct FContext {
  ibv_context ctx{};
  FDev* dev = nullptr;
  int ordinal = 0;
};
struct FPd {
  ibv_pd pd{};
};
struct FMr {
  ibv_mr mr{};
  int access = 0;
};
struct FChannel {
  ibv_comp_channel ch{};
  std::deque<ibv_cq*> events;
};
struct FCq {
  ibv_cq cq{};
  FChannel* ch = nullptr;
  bool armed = false;
  std::deque<ibv_wc> q;
};
struct SendWr {
  uint64_t id;
  ibv_wr_opcode op;
  bool signaled;
  uint32_t imm;
  std::vector<ibv_sge> sge;
  uint64_t raddr;
  uint32_t rkey;
};
struct RecvWr {
  uint64_t id;
  std::vector<ibv_sge> sge;
};
struct FQp {
  ibv_qp qp{};
  FContext* c = nullptr;
  FCq* scq = nullptr;
  FCq* rcq = nullptr;
  uint8_t port = 0;
  int access = 0;
  uint32_t remote = 0;
  ibv_ah_attr ah{};
  uint32_t maxSend = 0, maxRecv = 0, maxSendSge = 0, maxRecvSge = 0;
  uint32_t sendInUse = 0;
  std::deque<SendWr> sq;
  std::deque<RecvWr> rq;
};

struct State {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::unique_ptr<FDev>> devs;
  std::map<uint32_t, FQp*> qps;
  std::map<uint32_t, FMr*> lkeys, rkeys;
  int contexts = 0;
  uint32_t nextQpn = 0x100, nextKey = 0x1000;
  uint64_t overflows = 0, readBytes = 0;
  int mrs = 0;
  std::string misuse;
  bool stop = false;
  std::thread wire;
  Verbs table{};
};
State* g = nullptr;

void noteMisuse(const std::string& m) {
  if (g->misuse.empty()) g->misuse = m;
}

void pushCqe(FCq* cq, const ibv_wc& wc) {
  if (cq->q.size() >= static_cast<size_t>(cq->cq.cqe)) {
    ++g->overflows;
    return;
  }
  cq->q.push_back(wc);
  if (cq->armed && cq->ch) {
    cq->armed = false;
    cq->ch->events.push_back(&cq->cq);
    uint64_t one = 1;
    (void)!write(cq->ch->ch.fd, &one, sizeof(one));
  }
}

ibv_wc makeWc(uint64_t id, ibv_wc_status st, ibv_wc_opcode op, uint32_t qpn) {
  ibv_wc wc{};
  wc.wr_id = id;
  wc.status = st;
  wc.opcode = op;
  wc.qp_num = qpn;
  return wc;
}

ibv_wc_opcode sendOpcode(ibv_wr_opcode op) {
  switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
    default: return IBV_WC_SEND;
  }
}

void setErr(FQp* qp) {
  qp->qp.state = IBV_QPS_ERR;
  while (!qp->sq.empty()) {
    pushCqe(qp->scq, makeWc(qp->sq.front().id, IBV_WC_WR_FLUSH_ERR, sendOpcode(qp->sq.front().op), qp->qp.qp_num));
    qp->sq.pop_front();
  }
  while (!qp->rq.empty()) {
    pushCqe(qp->rcq, makeWc(qp->rq.front().id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, qp->qp.qp_num));
    qp->rq.pop_front();
  }
}

// A registered range of `pd` covering [addr, addr+len) with `access`, else null.
FMr* findMr(std::map<uint32_t, FMr*>& keys, uint32_t key, ibv_pd* pd, uint64_t addr, uint64_t len, int access) {
  auto it = keys.find(key);
  if (it == keys.end()) return nullptr;
  FMr* m = it->second;
  const uint64_t b = reinterpret_cast<uint64_t>(m->mr.addr);
  if (m->mr.pd != pd || addr < b || addr + len > b + m->mr.length) return nullptr;
  if ((m->access & access) != access) return nullptr;
  return m;
}

const PortSpec& portOf(FQp* qp) { return qp->c->dev->spec.ports[qp->port - 1]; }

bool addressOk(FQp* qp, FQp* target) {
  if (target->remote != qp->qp.qp_num) return false;
  const PortSpec& tp = portOf(target);
  if (!tp.ethernet) return qp->ah.dlid == tp.lid;
  if (!qp->ah.is_global) return false;
  const PortSpec& lp = portOf(qp);
  if (qp->ah.grh.sgid_index >= lp.gids.size()) return false;
  for (const GidSpec& gs : tp.gids)  // RoCE v1 and v2 entries may share an address: the types must match
    if (memcmp(gs.raw, qp->ah.grh.dgid.raw, 16) == 0 && gs.type == lp.gids[qp->ah.grh.sgid_index].type) return true;
  return false;
}

// Executes the head work request of qp; false if it must wait (no receive posted at the target).
bool execute(FQp* qp) {
  SendWr& wr = qp->sq.front();
  auto finish = [&](ibv_wc_status st, uint32_t bytes) {
    ibv_wc wc = makeWc(wr.id, st, sendOpcode(wr.op), qp->qp.qp_num);
    wc.byte_len = bytes;
    const bool sig = wr.signaled || st != IBV_WC_SUCCESS;
    qp->sq.pop_front();
    if (sig) pushCqe(qp->scq, wc);
    else --qp->sendInUse;
    if (st != IBV_WC_SUCCESS) setErr(qp);
  };
  auto it = g->qps.find(qp->remote);
  FQp* t = it == g->qps.end() ? nullptr : it->second;
  if (!t || (t->qp.state != IBV_QPS_RTR && t->qp.state != IBV_QPS_RTS) || !addressOk(qp, t)) {
    finish(IBV_WC_RETRY_EXC_ERR, 0);
    return true;
  }
  uint64_t len = 0;
  for (const ibv_sge& s : wr.sge) len += s.length;
  const bool isRead = wr.op == IBV_WR_RDMA_READ;
  for (const ibv_sge& s : wr.sge)
    if (!findMr(g->lkeys, s.lkey, qp->qp.pd, s.addr, s.length, isRead ? IBV_ACCESS_LOCAL_WRITE : 0)) {
      finish(IBV_WC_LOC_PROT_ERR, 0);
      return true;
    }
  const bool needsRecv = wr.op == IBV_WR_RDMA_WRITE_WITH_IMM || wr.op == IBV_WR_SEND || wr.op == IBV_WR_SEND_WITH_IMM;
  if (needsRecv && t->rq.empty()) return false;  // receiver not ready: retry later
  switch (wr.op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ: {
      const int acc = isRead ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;
      if ((len > 0 || isRead) &&
          (!(t->access & acc) || !findMr(g->rkeys, wr.rkey, t->qp.pd, wr.raddr, len, acc))) {
        finish(IBV_WC_REM_ACCESS_ERR, 0);
        setErr(t);
        return true;
      }
      char* remote = reinterpret_cast<char*>(wr.raddr);
      for (const ibv_sge& s : wr.sge) {
        char* local = reinterpret_cast<char*>(s.addr);
        if (isRead) memcpy(local, remote, s.length);
        else memcpy(remote, local, s.length);
        remote += s.length;
      }
      if (wr.op == IBV_WR_RDMA_WRITE_WITH_IMM) {
        RecvWr r = t->rq.front();
        t->rq.pop_front();
        ibv_wc wc = makeWc(r.id, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, t->qp.qp_num);
        wc.byte_len = static_cast<uint32_t>(len);
        wc.imm_data = wr.imm;
        wc.wc_flags = IBV_WC_WITH_IMM;
        wc.src_qp = qp->qp.qp_num;
        pushCqe(t->rcq, wc);
      }
      break;
    }
    default: {  // send (with immediate)
      RecvWr r = t->rq.front();
      uint64_t room = 0;
      for (const ibv_sge& s : r.sge) room += s.length;
      if (room < len) {
        t->rq.pop_front();
        pushCqe(t->rcq, makeWc(r.id, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, t->qp.qp_num));
        setErr(t);
        finish(IBV_WC_REM_INV_REQ_ERR, 0);
        return true;
      }
      t->rq.pop_front();
      uint64_t done = 0;
      {  // simple gather into a temporary, then scatter
        std::string tmp;
        for (const ibv_sge& s : wr.sge) tmp.append(reinterpret_cast<const char*>(s.addr), s.length);
        for (const ibv_sge& d : r.sge) {
          const uint64_t n = std::min<uint64_t>(d.length, tmp.size() - done);
          memcpy(reinterpret_cast<char*>(d.addr), tmp.data() + done, n);
          done += n;
        }
      }
      ibv_wc wc = makeWc(r.id, IBV_WC_SUCCESS, IBV_WC_RECV, t->qp.qp_num);
      wc.byte_len = static_cast<uint32_t>(len);
      if (wr.op == IBV_WR_SEND_WITH_IMM) {
        wc.imm_data = wr.imm;
        wc.wc_flags = IBV_WC_WITH_IMM;
      }
      wc.src_qp = qp->qp.qp_num;
      pushCqe(t->rcq, wc);
      break;
    }
  }
  qp->c->dev->bytes += len;
  if (isRead) g->readBytes += len;
  finish(IBV_WC_SUCCESS, isRead ? static_cast<uint32_t>(len) : 0);
  return true;
}

void wireLoop() {
  std::unique_lock<std::mutex> lk(g->mu);
  while (!g->stop) {
    bool did = false;
    for (auto& [qpn, qp] : g->qps)
      if (!qp->sq.empty() && qp->qp.state == IBV_QPS_RTS && execute(qp)) did = true;
    if (did) {
      lk.unlock();
      std::this_thread::yield();
      lk.lock();
    } else {
      g->cv.wait_for(lk, std::chrono::milliseconds(2));
    }
  }
}

// ---- the table ----------------------------------------------------------------------------

ibv_device** getDeviceList(int* num) {
  std::lock_guard<std::mutex> lk(g->mu);
  auto** list = new ibv_device*[g->devs.size() + 1];
  for (size_t i = 0; i < g->devs.size(); ++i) list[i] = &g->devs[i]->dev;
  list[g->devs.size()] = nullptr;
  if (num) *num = static_cast<int>(g->devs.size());
  return list;
}
void freeDeviceList(ibv_device** list) { delete[] list; }
const char* getDeviceName(ibv_device* d) { return d->name; }

FDev* devOf(ibv_device* d) {
  for (auto& x : g->devs)
    if (&x->dev == d) return x.get();
  return nullptr;
}

ibv_context* openDevice(ibv_device* d) {
  std::lock_guard<std::mutex> lk(g->mu);
  auto* c = new FContext;
  c->dev = devOf(d);
  c->ctx.device = d;
  c->ordinal = g->contexts++;
  return &c->ctx;
}
int closeDevice(ibv_context* ctx) {
  delete reinterpret_cast<FContext*>(ctx);
  return 0;
}
FContext* fctx(ibv_context* ctx) { return reinterpret_cast<FContext*>(ctx); }

int queryDevice(ibv_context* ctx, ibv_device_attr* a) {
  *a = ibv_device_attr{};
  a->phys_port_cnt = static_cast<uint8_t>(fctx(ctx)->dev->spec.ports.size());
  a->max_qp_rd_atom = 16;
  a->max_qp_init_rd_atom = 16;
  a->max_qp_wr = 16384;
  a->max_cqe = 1 << 20;
  return 0;
}
int queryPort(ibv_context* ctx, uint8_t port, ibv_port_attr* a) {
  const auto& ports = fctx(ctx)->dev->spec.ports;
  if (port < 1 || port > ports.size()) return EINVAL;
  const PortSpec& p = ports[port - 1];
  *a = ibv_port_attr{};
  a->state = p.active ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
  a->link_layer = p.ethernet ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  a->lid = p.lid;
  a->gid_tbl_len = static_cast<int>(p.gids.size());
  a->active_mtu = p.mtu;
  a->max_mtu = p.mtu;
  return 0;
}
int queryGid(ibv_context* ctx, uint8_t port, int index, ibv_gid* gid) {
  const auto& ports = fctx(ctx)->dev->spec.ports;
  if (port < 1 || port > ports.size() || index < 0 || index >= static_cast<int>(ports[port - 1].gids.size())) return EINVAL;
  memcpy(gid->raw, ports[port - 1].gids[index].raw, 16);
  return 0;
}
int queryGidType(ibv_context* ctx, uint8_t port, int index, uint32_t* type) {
  const auto& ports = fctx(ctx)->dev->spec.ports;
  if (port < 1 || port > ports.size() || index < 0 || index >= static_cast<int>(ports[port - 1].gids.size())) return EINVAL;
  *type = static_cast<uint32_t>(ports[port - 1].gids[index].type);
  return 0;
}
ibv_pd* allocPd(ibv_context* ctx) {
  auto* p = new FPd;
  p->pd.context = ctx;
  return &p->pd;
}
int deallocPd(ibv_pd* pd) {
  delete reinterpret_cast<FPd*>(pd);
  return 0;
}
ibv_mr* regMr(ibv_pd* pd, void* addr, size_t len, int access) {
  std::lock_guard<std::mutex> lk(g->mu);
  auto* m = new FMr;
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = len;
  m->mr.lkey = g->nextKey++;
  m->mr.rkey = g->nextKey++ | 0x80000000u;
  m->access = access;
  g->lkeys[m->mr.lkey] = m;
  g->rkeys[m->mr.rkey] = m;
  ++g->mrs;
  return &m->mr;
}
int deregMr(ibv_mr* mr) {
  std::lock_guard<std::mutex> lk(g->mu);
  g->lkeys.erase(mr->lkey);
  g->rkeys.erase(mr->rkey);
  --g->mrs;
  delete reinterpret_cast<FMr*>(mr);
  return 0;
}
ibv_comp_channel* createCompChannel(ibv_context* ctx) {
  auto* c = new FChannel;
  c->ch.context = ctx;
  c->ch.fd = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
  return &c->ch;
}
int destroyCompChannel(ibv_comp_channel* ch) {
  close(ch->fd);
  delete reinterpret_cast<FChannel*>(ch);
  return 0;
}
ibv_cq* createCq(ibv_context* ctx, int cqe, void* cqContext, ibv_comp_channel* ch, int) {
  auto* c = new FCq;
  c->cq.context = ctx;
  c->cq.cqe = cqe;
  c->cq.cq_context = cqContext;
  c->cq.channel = ch;
  c->ch = reinterpret_cast<FChannel*>(ch);
  return &c->cq;
}
int destroyCq(ibv_cq* cq) {
  std::lock_guard<std::mutex> lk(g->mu);
  delete reinterpret_cast<FCq*>(cq);
  return 0;
}
int getCqEvent(ibv_comp_channel* ch, ibv_cq** cq, void** cqContext) {
  std::lock_guard<std::mutex> lk(g->mu);
  auto* c = reinterpret_cast<FChannel*>(ch);
  if (c->events.empty()) {
    errno = EAGAIN;
    return -1;
  }
  *cq = c->events.front();
  *cqContext = (*cq)->cq_context;
  c->events.pop_front();
  uint64_t x;
  (void)!read(ch->fd, &x, sizeof(x));
  return 0;
}
void ackCqEvents(ibv_cq*, unsigned) {}
int reqNotifyCq(ibv_cq* cq, int) {
  std::lock_guard<std::mutex> lk(g->mu);
  reinterpret_cast<FCq*>(cq)->armed = true;
  return 0;
}
int pollCq(ibv_cq* cq, int n, ibv_wc* wc) {
  std::lock_guard<std::mutex> lk(g->mu);
  auto* c = reinterpret_cast<FCq*>(cq);
  int i = 0;
  for (; i < n && !c->q.empty(); ++i) {
    wc[i] = c->q.front();
    c->q.pop_front();
    const bool sendSide = !(wc[i].opcode & IBV_WC_RECV);
    auto it = g->qps.find(wc[i].qp_num);
    if (sendSide && it != g->qps.end() && it->second->sendInUse > 0) --it->second->sendInUse;
  }
  return i;
}
ibv_qp* createQp(ibv_pd* pd, ibv_qp_init_attr* a) {
  std::lock_guard<std::mutex> lk(g->mu);
  if (a->qp_type != IBV_QPT_RC || !a->send_cq || !a->recv_cq) {
    errno = EINVAL;
    return nullptr;
  }
  auto* q = new FQp;
  q->c = fctx(pd->context);
  q->qp.context = pd->context;
  q->qp.pd = pd;
  q->qp.send_cq = a->send_cq;
  q->qp.recv_cq = a->recv_cq;
  q->qp.qp_num = g->nextQpn++;
  q->qp.state = IBV_QPS_RESET;
  q->qp.qp_type = IBV_QPT_RC;
  q->scq = reinterpret_cast<FCq*>(a->send_cq);
  q->rcq = reinterpret_cast<FCq*>(a->recv_cq);
  q->maxSend = a->cap.max_send_wr;
  q->maxRecv = a->cap.max_recv_wr;
  q->maxSendSge = a->cap.max_send_sge;
  q->maxRecvSge = a->cap.max_recv_sge;
  g->qps[q->qp.qp_num] = q;
  return &q->qp;
}
int destroyQp(ibv_qp* qp) {
  std::lock_guard<std::mutex> lk(g->mu);
  g->qps.erase(qp->qp_num);
  delete reinterpret_cast<FQp*>(qp);
  return 0;
}
int modifyQp(ibv_qp* qp, ibv_qp_attr* a, int mask) {
  std::lock_guard<std::mutex> lk(g->mu);
  auto* q = reinterpret_cast<FQp*>(qp);
  if (!(mask & IBV_QP_STATE)) return EINVAL;
  auto need = [&](int m, const char* what) {
    if ((mask & m) == m) return true;
    noteMisuse(std::string("modify_qp to ") + what + " without its required attributes");
    return false;
  };
  const ibv_qp_state from = q->qp.state, to = a->qp_state;
  if (to == IBV_QPS_ERR) {
    setErr(q);
    return 0;
  }
  if (to == IBV_QPS_RESET) {
    q->sq.clear();
    q->rq.clear();
    q->qp.state = IBV_QPS_RESET;
    return 0;
  }
  if (from == IBV_QPS_RESET && to == IBV_QPS_INIT) {
    if (!need(IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT")) return EINVAL;
    if (a->port_num < 1 || a->port_num > q->c->dev->spec.ports.size()) return EINVAL;
    q->port = a->port_num;
    q->access = a->qp_access_flags;
  } else if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) {
    if (!need(IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                  IBV_QP_MIN_RNR_TIMER, "RTR"))
      return EINVAL;
    if (a->ah_attr.port_num != q->port) return EINVAL;
    q->remote = a->dest_qp_num;
    q->ah = a->ah_attr;
  } else if (from == IBV_QPS_RTR && to == IBV_QPS_RTS) {
    if (!need(IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC, "RTS"))
      return EINVAL;
  } else {
    noteMisuse("invalid queue pair transition " + std::to_string(from) + " -> " + std::to_string(to));
    return EINVAL;
  }
  q->qp.state = to;
  return 0;
}
int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  std::lock_guard<std::mutex> lk(g->mu);
  auto* q = reinterpret_cast<FQp*>(qp);
  for (; wr; wr = wr->next) {
    if (q->qp.state != IBV_QPS_RTS && q->qp.state != IBV_QPS_ERR) {
      noteMisuse("post_send on a queue pair in state " + std::to_string(q->qp.state));
      *bad = wr;
      return EINVAL;
    }
    if (q->sendInUse >= q->maxSend || static_cast<uint32_t>(wr->num_sge) > q->maxSendSge) {
      noteMisuse("post_send beyond the send queue's capacity");
      *bad = wr;
      return ENOMEM;
    }
    SendWr s{wr->wr_id, wr->opcode, (wr->send_flags & IBV_SEND_SIGNALED) != 0, wr->imm_data,
             std::vector<ibv_sge>(wr->sg_list, wr->sg_list + wr->num_sge), wr->wr.rdma.remote_addr, wr->wr.rdma.rkey};
    ++q->sendInUse;
    q->sq.push_back(std::move(s));
    if (q->qp.state == IBV_QPS_ERR) setErr(q);
  }
  g->cv.notify_all();
  return 0;
}
int postRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  std::lock_guard<std::mutex> lk(g->mu);
  auto* q = reinterpret_cast<FQp*>(qp);
  for (; wr; wr = wr->next) {
    if (q->qp.state == IBV_QPS_RESET) {
      noteMisuse("post_recv on a queue pair in RESET");
      *bad = wr;
      return EINVAL;
    }
    if (q->rq.size() >= q->maxRecv || static_cast<uint32_t>(wr->num_sge) > q->maxRecvSge) {
      noteMisuse("post_recv beyond the receive queue's capacity");
      *bad = wr;
      return ENOMEM;
    }
    q->rq.push_back(RecvWr{wr->wr_id, std::vector<ibv_sge>(wr->sg_list, wr->sg_list + wr->num_sge)});
    if (q->qp.state == IBV_QPS_ERR) setErr(q);
  }
  g->cv.notify_all();
  return 0;
}

}  // namespace

DeviceSpec ibDevice(const std::string& name, uint16_t lid) {
  PortSpec p;
  p.lid = lid;
  GidSpec gs{{0xfe, 0x80}, IBV_GID_TYPE_IB};
  gs.raw[15] = static_cast<uint8_t>(lid);
  p.gids.push_back(gs);
  return DeviceSpec{name, {p}};
}

DeviceSpec roceDevice(const std::string& name, uint8_t host) {
  PortSpec p;
  p.ethernet = true;
  GidSpec ll{{0xfe, 0x80}, IBV_GID_TYPE_ROCE_V1};
  ll.raw[15] = host;
  GidSpec ll2 = ll;
  ll2.type = IBV_GID_TYPE_ROCE_V2;
  GidSpec v4{{0}, IBV_GID_TYPE_ROCE_V1};
  v4.raw[10] = v4.raw[11] = 0xff;
  v4.raw[12] = 10;
  v4.raw[15] = host;
  GidSpec v4b = v4;
  v4b.type = IBV_GID_TYPE_ROCE_V2;
  p.gids = {ll, ll2, v4, v4b};
  return DeviceSpec{name, {p}};
}

Fabric::Fabric(std::vector<DeviceSpec> devices) {
  g = new State;
  for (DeviceSpec& d : devices) {
    auto fd = std::make_unique<FDev>();
    fd->spec = std::move(d);
    snprintf(fd->dev.name, sizeof(fd->dev.name), "%s", fd->spec.name.c_str());
    fd->dev.transport_type = IBV_TRANSPORT_IB;
    g->devs.push_back(std::move(fd));
  }
  Verbs& v = g->table;
  v.getDeviceList = getDeviceList;
  v.freeDeviceList = freeDeviceList;
  v.getDeviceName = getDeviceName;
  v.openDevice = openDevice;
  v.closeDevice = closeDevice;
  v.queryDevice = queryDevice;
  v.queryPort = queryPort;
  v.queryGid = queryGid;
  v.queryGidType = queryGidType;
  v.allocPd = allocPd;
  v.deallocPd = deallocPd;
  v.regMr = regMr;
  v.deregMr = deregMr;
  v.createCompChannel = createCompChannel;
  v.destroyCompChannel = destroyCompChannel;
  v.createCq = createCq;
  v.destroyCq = destroyCq;
  v.getCqEvent = getCqEvent;
  v.ackCqEvents = ackCqEvents;
  v.reqNotifyCq = reqNotifyCq;
  v.pollCq = pollCq;
  v.createQp = createQp;
  v.modifyQp = modifyQp;
  v.destroyQp = destroyQp;
  v.postSend = postSend;
  v.postRecv = postRecv;
  g->wire = std::thread(wireLoop);
}

Fabric::~Fabric() {
  {
    std::lock_guard<std::mutex> lk(g->mu);
    g->stop = true;
  }
  g->cv.notify_all();
  g->wire.join();
  delete g;
  g = nullptr;
}

const Verbs* Fabric::verbs() const { return &g->table; }

void Fabric::killContext(int ordinal) {
  std::lock_guard<std::mutex> lk(g->mu);
  for (auto& [qpn, qp] : g->qps)
    if (qp->c->ordinal == ordinal) setErr(qp);
}
int Fabric::contextsOpened() const {
  std::lock_guard<std::mutex> lk(g->mu);
  return g->contexts;
}
uint64_t Fabric::bytesOn(const std::string& name) const {
  std::lock_guard<std::mutex> lk(g->mu);
  for (auto& d : g->devs)
    if (d->spec.name == name) return d->bytes;
  return 0;
}
uint64_t Fabric::bytesRead() const {
  std::lock_guard<std::mutex> lk(g->mu);
  return g->readBytes;
}
uint64_t Fabric::cqOverflows() const {
  std::lock_guard<std::mutex> lk(g->mu);
  return g->overflows;
}
int Fabric::liveQps() const {
  std::lock_guard<std::mutex> lk(g->mu);
  return static_cast<int>(g->qps.size());
}
int Fabric::liveMrs() const {
  std::lock_guard<std::mutex> lk(g->mu);
  return g->mrs;
}
std::string Fabric::firstMisuse() const {
  std::lock_guard<std::mutex> lk(g->mu);
  return g->misuse;
}

}  // namespace strata::ib::fake
