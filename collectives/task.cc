// task.cc: resolving schedules to pointers and running them step by step (see task.h).
#include "collectives/task.h"

#include <algorithm>
#include <sched.h>

#include <cstring>

#include "collectives/call_digest.h"
#include "collectives/comm.h"
#include "collectives/op_ring.h"
#include "transport/config.h"
#include "transport/log.h"
#include "transport/socket.h"

namespace strata {
namespace {

size_t alignUp(size_t v) { return (v + 63) & ~size_t(63); }

struct Extents {
  size_t in, out;
};

Extents extents(CollType c, size_t count, int n) {
  const size_t cn = count * static_cast<size_t>(n);
  switch (c) {
    case CollType::AllReduce: return {count, count};
    case CollType::ReduceScatter: return {cn, count};
    case CollType::AllGather: return {count, cn};
    case CollType::Broadcast: return {count, count};
    case CollType::Reduce: return {count, count};
    case CollType::AllToAll: return {cn, cn};
    case CollType::Gather: return {count, cn};
    case CollType::Scatter: return {cn, count};
  }
  return {count, count};
}

}  // namespace

void Task::setCollective(Comm& comm, const CollCall& call) {
  comm_ = &comm;
  isP2P_ = false;
  started_ = false;
  call_ = call;
}

void Task::setP2P(Comm& comm, const std::vector<P2PCall>& calls) {
  comm_ = &comm;
  isP2P_ = true;
  started_ = false;
  p2p_.assign(calls.begin(), calls.end());
}

Status Task::start() {
  started_ = true;
  return isP2P_ ? initP2P(*comm_, p2p_) : initCollective(*comm_, call_);
}

void Task::reset(Comm& comm) {
  comm_ = &comm;
  scaleScalar_ = nullptr;
  scaleSrc_ = nullptr;
  scaleDst_ = nullptr;
  scaleCount_ = 0;
  divideBuf_ = nullptr;
  divideCount_ = 0;
  postDone_ = true;
  input_ = nullptr;
  output_ = nullptr;
  scratch_ = nullptr;
  ops_.clear();
  steps_.clear();
  transfers_.clear();
  step_ = 0;
  stepPosted_ = false;
  tag_ = CallTag{};
  ringOpen_ = false;
}

char* Task::resolve(const Slice& s) const {
  char* base = s.buf == BufId::Input ? const_cast<char*>(input_) : s.buf == BufId::Output ? output_ : scratch_;
  return base ? base + s.offset * esize_ : nullptr;
}

Status Task::initCollective(Comm& comm, const CollCall& call) {
  reset(comm);
  const int n = comm.nranks(), r = comm.rank();
  dtype_ = call.dtype;
  esize_ = kernels::dtypeSize(call.dtype);
  const bool rooted = call.coll == CollType::Broadcast || call.coll == CollType::Reduce ||
                      call.coll == CollType::Gather || call.coll == CollType::Scatter;
  const bool isRoot = !rooted || r == call.root;
  const bool reduction = call.coll == CollType::AllReduce || call.coll == CollType::ReduceScatter ||
                         call.coll == CollType::Reduce;
  red_ = kernels::RedKind::Sum;
  if (reduction) {
    switch (call.op) {
      case strataSum: case strataAvg: red_ = kernels::RedKind::Sum; break;
      case strataProd: red_ = kernels::RedKind::Prod; break;
      case strataMax: red_ = kernels::RedKind::Max; break;
      case strataMin: red_ = kernels::RedKind::Min; break;
      default: break;  // pre-multiplied sum: Sum plus scaling below
    }
  }
  const Extents ext = extents(call.coll, call.count, n);
  input_ = static_cast<const char*>(call.sendbuff);
  output_ = static_cast<char*>(call.recvbuff);
  if ((call.coll == CollType::Broadcast || call.coll == CollType::Scatter) && !isRoot) input_ = nullptr;
  if ((call.coll == CollType::Reduce || call.coll == CollType::Gather) && !isRoot) output_ = nullptr;

  const Algo algo = comm.chooseAlgo(call.coll, call.count, esize_);
  algo_ = algo;
  const bool inPlaceA2A = call.coll == CollType::AllToAll && input_ && input_ == output_ && ext.in > 0;
  const Schedule& sched =
      comm.schedule(algo, CollArgs{call.coll, n, r, call.root, call.count, &comm.layout(), inPlaceA2A});
  uint64_t seq = 0;
  tag_ = collCallTag(call, comm.opRing().nextSeq());
  ringIndex_ = comm.opRing().beginColl(tag_, static_cast<uint32_t>(algo), static_cast<uint32_t>(sched.steps.size()), &seq);
  ringOpen_ = true;

  // Staging: pre-multiplied sums scale the input into scratch; an in-place all-to-all whose schedule
  // is not built in place (Schedule::inPlace: pairwise stages block by block itself) copies it.
  const CustomOp* custom = reduction ? comm.customOp(call.op) : nullptr;
  const bool stageA2A = inPlaceA2A && !sched.inPlace;
  const size_t stageElems = (custom || stageA2A) && input_ ? ext.in : 0;
  const size_t stageBytes = alignUp(stageElems * esize_);
  char* scratch = comm.scratch(stageBytes + sched.scratchElems * esize_ + 64);
  if (stageElems) {
    scaleSrc_ = input_;
    scaleDst_ = scratch;
    scaleCount_ = stageElems;
    scaleScalar_ = custom ? custom->scalar : nullptr;
    input_ = scratch;
  }
  scratch_ = scratch + stageBytes;
  if (reduction && call.op == strataAvg && output_) {
    divideBuf_ = output_;
    divideCount_ = ext.out;
    postDone_ = false;
  }

  // Transfer::rewritten: only the caller's input, when no output overlaps it, is memory that
  // neither this operation nor, typically, the next one on these buffers writes. Outputs are
  // written by the operation itself or by the next call (a training loop all-reduces the same
  // gradient buckets every step), and staged input and scratch by the next operation.
  const bool inputKept = !stageElems && input_ &&
                         !(output_ && input_ < output_ + ext.out * esize_ && output_ < input_ + ext.in * esize_);
  ROp* slot = ops_.grow(sched.ops.size());
  for (const Op& op : sched.ops) {
    ROp ro{op.code, op.peer, nullptr, nullptr, nullptr, op.count, !(inputKept && op.src.buf == BufId::Input)};
    const bool readsSrc = op.code == OpCode::Send || op.code == OpCode::RecvReduce || op.code == OpCode::Copy ||
                          op.code == OpCode::Reduce;
    const bool writesDst = op.code != OpCode::Send;
    if (readsSrc) ro.src = resolve(op.src);
    if (op.code == OpCode::Reduce) ro.src2 = resolve(op.src2);
    if (writesDst) ro.dst = resolve(op.dst);
    if ((readsSrc && !ro.src) || (op.code == OpCode::Reduce && !ro.src2) || (writesDst && !ro.dst))
      return internalError("{}({}) schedule of rank {} touches a buffer this rank does not have",
                           collName(call.coll), algoName(algo), r);
    *slot++ = ro;
  }
  steps_.assign(sched.steps.begin(), sched.steps.end());
  // Pre-work runs now: scratch is this task's until it finishes (tasks of a comm run in order and
  // are initialised when they start).
  if (scaleCount_) {
    if (scaleScalar_) kernels::scale(scaleDst_, scaleSrc_, scaleCount_, dtype_, scaleScalar_);
    else kernels::copy(scaleDst_, scaleSrc_, scaleCount_ * esize_);
  }
  return OkStatus();
}

Status Task::initP2P(Comm& comm, const std::vector<P2PCall>& calls) {
  reset(comm);
  ringIndex_ = comm.opRing().beginP2P(calls.size(), 1);
  ringOpen_ = true;
  dtype_ = strataUint8;
  esize_ = 1;
  steps_.push_back(Schedule::Step{0, 0});
  for (const P2PCall& c : calls) {
    const size_t bytes = c.count * kernels::dtypeSize(c.dtype);
    if (bytes == 0) continue;
    if (c.peer == comm.rank()) {
      // Self send/recv pairs are matched in order and copied locally.
      continue;
    }
    ROp ro{c.isSend ? OpCode::Send : OpCode::Recv, c.peer, nullptr, nullptr, nullptr, bytes, false};
    if (c.isSend) ro.src = static_cast<const char*>(c.buf);
    else ro.dst = static_cast<char*>(c.buf);
    ops_.push_back(ro);
    steps_[0].numOps++;
  }
  // Self messages: the k-th send to self matches the k-th receive from self.
  selfSends_.clear();
  selfRecvs_.clear();
  for (const P2PCall& c : calls)
    if (c.peer == comm.rank() && c.count) (c.isSend ? selfSends_ : selfRecvs_).push_back(&c);
  if (selfSends_.size() != selfRecvs_.size())
    return invalidUsage("rank {}: {} sends to self but {} receives from self in one group", comm.rank(),
                        selfSends_.size(), selfRecvs_.size());
  for (size_t i = 0; i < selfSends_.size(); ++i) {
    size_t sb = selfSends_[i]->count * kernels::dtypeSize(selfSends_[i]->dtype);
    size_t rb = selfRecvs_[i]->count * kernels::dtypeSize(selfRecvs_[i]->dtype);
    if (sb != rb) return invalidUsage("rank {}: send to self of {} bytes but receive of {} bytes", comm.rank(), sb, rb);
  }
  // A send whose buffer overlaps a receive of the same group (in-place exchanges) is staged:
  // peers may read a send buffer while it is being received into, since transfers of one group
  // run concurrently and large ones are read straight from the sender's memory.
  auto overlaps = [](const char* a, size_t na, const char* b, size_t nb) { return a < b + nb && b < a + na; };
  size_t stage = 0;
  for (ROp& o : ops_) {
    if (o.code != OpCode::Send) continue;
    bool alias = false;
    for (ROp& rv : ops_) alias = alias || (rv.code == OpCode::Recv && overlaps(o.src, o.count, rv.dst, rv.count));
    for (const P2PCall* rv : selfRecvs_)
      alias = alias || overlaps(o.src, o.count, static_cast<const char*>(rv->buf), rv->count * kernels::dtypeSize(rv->dtype));
    if (alias) {
      o.src2 = o.src;  // remembered: copied into scratch below
      stage += (o.count + 63) & ~size_t(63);
    }
  }
  if (stage) {
    char* buf = comm.scratch(stage);
    for (ROp& o : ops_) {
      if (o.code != OpCode::Send || !o.src2) continue;
      std::memcpy(buf, o.src2, o.count);
      o.src = buf;
      o.src2 = nullptr;
      o.rewritten = true;  // scratch: the next staging writes it
      buf += (o.count + 63) & ~size_t(63);
    }
  }
  for (size_t i = 0; i < selfSends_.size(); ++i)
    std::memmove(selfRecvs_[i]->buf, selfSends_[i]->buf, selfSends_[i]->count * kernels::dtypeSize(selfSends_[i]->dtype));
  if (steps_[0].numOps == 0) steps_.clear();
  return OkStatus();
}

void Task::runLocal(const ROp& op) {
  if (op.code == OpCode::Copy) {
    if (op.dst != op.src) std::memmove(op.dst, op.src, op.count * esize_);
  } else {
    kernels::reduce(op.dst, op.src, op.src2, op.count, dtype_, red_);
  }
}

void Task::beginStep() {
  const Schedule::Step& st = steps_[step_];
  if (transfers_.size() < st.numOps) transfers_.resize(st.numOps);  // grows once, then reused
  for (uint32_t i = 0; i < st.numOps; ++i) {
    const ROp& op = ops_[st.firstOp + i];
    Transfer& t = transfers_[i];
    t = Transfer{};
    t.bytes = op.count * esize_;
    t.call = tag_;
    switch (op.code) {
      case OpCode::Copy:
      case OpCode::Reduce:
        runLocal(op);
        t.complete = true;
        break;
      case OpCode::Send:
        t.kind = Transfer::Send;
        t.src = op.src;
        t.rewritten = op.rewritten;
        comm_->conn(op.peer)->postSend(&t);
        break;
      case OpCode::Recv:
        t.kind = Transfer::Recv;
        t.dst = op.dst;
        comm_->conn(op.peer)->postRecv(&t);
        break;
      case OpCode::RecvReduce:
        t.kind = Transfer::RecvReduce;
        t.src = op.src;
        t.dst = op.dst;
        t.dtype = dtype_;
        t.op = red_;
        comm_->conn(op.peer)->postRecv(&t);
        break;
    }
  }
  stepPosted_ = true;
}

Status Task::progress(bool* progressed) {
  while (step_ < steps_.size()) {
    if (!stepPosted_) beginStep();
    const Schedule::Step& st = steps_[step_];
    bool all = true;
    for (uint32_t i = 0; i < st.numOps; ++i) {
      if (transfers_[i].complete) continue;
      Status cs = comm_->conn(ops_[st.firstOp + i].peer)->progress(progressed);
      if (!cs.ok()) {
        // A peer that already moved on to a later call is not the cause: a message of this
        // collective from another call, if one waits somewhere, names it.
        if (isCallMismatch(cs)) {
          Status stray = strayCallMismatch();
          if (!stray.ok()) return stray;
        }
        return cs;
      }
      all = all && transfers_[i].complete;
    }
    if (!all) {
      for (uint32_t i = 0; i < st.numOps; ++i) all = all && transfers_[i].complete;
      if (!all) return OkStatus();
    }
    ++step_;
    stepPosted_ = false;
    *progressed = true;
  }
  if (!postDone_) {
    kernels::divide(divideBuf_, divideCount_, dtype_, comm_->nranks());
    postDone_ = true;
    *progressed = true;
  }
  if (ringOpen_) {
    comm_->opRing().end(ringIndex_, /*failed=*/false);
    ringOpen_ = false;
  }
  return OkStatus();
}

void Task::noteWaiting() {
  if (!ringOpen_ || step_ >= steps_.size() || !stepPosted_) return;
  hang::Wait waits[OpRing::kMaxWaits];
  uint32_t n = 0;
  const Schedule::Step& st = steps_[step_];
  for (uint32_t i = 0; i < st.numOps && n < OpRing::kMaxWaits; ++i) {
    const ROp& op = ops_[st.firstOp + i];
    if (!transfers_[i].complete && op.peer >= 0) waits[n++] = hang::Wait{op.peer, op.code == OpCode::Send};
  }
  comm_->opRing().noteWaiting(ringIndex_, static_cast<uint32_t>(step_ + 1), waits, n);
}

void Task::noteFailed(const Status& st) {
  comm_->opRing().setError(st.message());
  if (!ringOpen_) return;
  noteWaiting();
  comm_->opRing().end(ringIndex_, /*failed=*/true);
  ringOpen_ = false;
}

void Task::abandonTransfers() {
  if (step_ >= steps_.size() || !stepPosted_) return;  // earlier steps' transfers all completed
  const Schedule::Step& st = steps_[step_];
  for (uint32_t i = 0; i < st.numOps; ++i) {
    const ROp& op = ops_[st.firstOp + i];
    if (!transfers_[i].complete && op.peer >= 0) comm_->conn(op.peer)->abandonTransfers();
  }
}

void Task::addWaitSources(WaitSet* ws) {
  if (step_ >= steps_.size() || !stepPosted_) return;
  const Schedule::Step& st = steps_[step_];
  for (uint32_t i = 0; i < st.numOps; ++i)
    if (!transfers_[i].complete && ops_[st.firstOp + i].peer >= 0)
      comm_->conn(ops_[st.firstOp + i].peer)->addWaitSources(ws);
}

Status Task::checkPeers() {
  if (step_ >= steps_.size() || !stepPosted_) return OkStatus();
  const Schedule::Step& st = steps_[step_];
  for (uint32_t i = 0; i < st.numOps; ++i)
    if (!transfers_[i].complete && ops_[st.firstOp + i].peer >= 0)
      STRATA_RETURN_IF_ERROR(comm_->conn(ops_[st.firstOp + i].peer)->checkPeer());
  // A peer of a later step whose communicator failed will not take part in it: fail now rather
  // than after this step, which may crawl over a slow link or wait on ranks that wait on it.
  int recent[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
  size_t next = 0;
  for (uint32_t op = st.firstOp + st.numOps; op < ops_.size(); ++op) {
    const int p = ops_[op].peer;
    if (p < 0 || std::find(std::begin(recent), std::end(recent), p) != std::end(recent)) continue;
    recent[next++ % 8] = p;
    if (Connection* c = comm_->transports().made(p)) STRATA_RETURN_IF_ERROR(c->peerFailed());
  }
  return strayCallMismatch();
}

Status Task::strayCallMismatch() {
  if (isP2P_) return OkStatus();
  const CallFields mine = decodeCallTag(tag_);
  for (int p = 0; p < comm_->nranks(); ++p) {
    Connection* c = p == comm_->rank() ? nullptr : comm_->transports().made(p);
    CallTag theirs;
    if (!c || !c->peekCallTag(&theirs) || theirs == tag_) continue;
    const CallFields f = decodeCallTag(theirs);
    if (f.code != kCallSendRecv && f.seq == mine.seq) return callMismatch(p, theirs, comm_->rank(), tag_);
  }
  return OkStatus();
}

std::string Task::describe() const {
  std::string waiting;
  if (step_ < steps_.size()) {
    const Schedule::Step& st = steps_[step_];
    std::vector<int> peers;
    for (uint32_t i = 0; i < st.numOps && i < transfers_.size(); ++i) {
      int p = ops_[st.firstOp + i].peer;
      if (!transfers_[i].complete && p >= 0 && std::find(peers.begin(), peers.end(), p) == peers.end()) {
        peers.push_back(p);
        waiting += (waiting.empty() ? "" : ", ") + std::to_string(p);
      }
    }
  }
  std::string label = isP2P_ ? std::string("send/recv") : fmt::format("{}({})", collName(call_.coll), algoName(algo_));
  return fmt::format("{} step {}/{}{}", label, step_ + 1, steps_.size(),
                     waiting.empty() ? "" : ", waiting on rank(s) " + waiting);
}

Status runTasks(std::vector<std::vector<Task*>>& lists, RunScratch& scratch) {
  const Config& cfg = config();
  std::vector<size_t>& cur = scratch.cur;
  WaitSet& ws = scratch.ws;
  cur.assign(lists.size(), 0);
  if (ws.bells.capacity() == 0) {  // sleeping must not allocate either, even the first time
    ws.bells.reserve(64);
    ws.fds.reserve(256);
  }
  Status first;
  double lastCheck = 0;  // set with idleStart: fast calls never read the clock
  // Oversubscribed (or one thread driving several ranks): yield from the first idle poll.
  bool yieldAtOnce = lists.size() > 1;
  for (auto& l : lists)
    if (!l.empty()) yieldAtOnce = yieldAtOnce || l[0]->comm()->oversubscribed();
  const double pureSpin = yieldAtOnce ? 0 : 20e-6;
  auto failList = [&](size_t li, const Status& st) {
    Task* t = lists[li][cur[li]];
    Comm* c = t->comm();
    t->noteFailed(st);
    t->abandonTransfers();  // the caller may free its buffers once we return
    c->fail(st);
    if (first.ok()) first = st;
    cur[li] = lists[li].size();
  };
  auto step = [&](bool* progressed) {
    bool allDone = true;
    for (size_t li = 0; li < lists.size(); ++li) {
      while (cur[li] < lists[li].size()) {
        Task* t = lists[li][cur[li]];
        if (!t->started()) {
          Status st = t->start();
          if (!st.ok()) {
            failList(li, Status(st.code(), fmt::format("rank {}: {}", t->comm()->rank(), st.message())));
            break;
          }
        }
        if (t->comm()->aborted()) {
          failList(li, Status(strataAborted, fmt::format("rank {}: communicator aborted during {}",
                                                         t->comm()->rank(), t->describe())));
          break;
        }
        Status st = t->progress(progressed);
        if (!st.ok()) {
          failList(li, Status(st.code(), fmt::format("rank {}: {} failed: {}", t->comm()->rank(), t->describe(),
                                                     st.message())));
          break;
        }
        if (!t->done()) break;
        ++cur[li];
      }
      allDone = allDone && cur[li] >= lists[li].size();
    }
    return allDone;
  };
  uint32_t idle = 0;  // consecutive polls without progress; the clock is read every 16th
  uint32_t busy = 0;  // polls with progress; the clock is read every 4096th
  double idleStart = 0;
  // The slow path's checks: peers' failures, stray mismatches, and (when `idleSince` >= 0) the timeout.
  auto checkAll = [&](double now, double idleSince) {
    for (size_t li = 0; li < lists.size(); ++li) {
      if (cur[li] >= lists[li].size()) continue;
      Task* t = lists[li][cur[li]];
      t->noteWaiting();
      Status st = t->checkPeers();
      const double timeout = t->comm()->timeoutSec();
      if (st.ok() && idleSince >= 0 && now - idleSince > timeout)
        st = makeError(strataTimeout, "no progress for {} s (STRATA_TIMEOUT or the communicator's timeout)", timeout);
      if (!st.ok())
        failList(li, Status(st.code(), fmt::format("rank {}: {} failed: {}", t->comm()->rank(), t->describe(),
                                                   st.message())));
    }
  };
  while (true) {
    bool progressed = false;
    if (step(&progressed)) break;
    if (progressed) {
      idle = 0;
      // A rank that keeps moving data (a slow link: progress, so never the timeout) still learns
      // within a second that peers it needs later have failed.
      if (++busy == 4096) {
        busy = 0;
        const double now = net::nowSec();
        if (now - lastCheck > 1.0) {
          lastCheck = now;
          checkAll(now, -1);
        }
      }
      continue;
    }
    // Short waits never read the clock: it starts at the 16th idle poll.
    if (++idle == 16) {
      idleStart = net::nowSec();
      if (lastCheck == 0) lastCheck = idleStart;
      for (size_t li = 0; li < lists.size(); ++li)  // the op rings' time sample (op_ring.h)
        if (cur[li] < lists[li].size()) lists[li][cur[li]]->comm()->opRing().noteClock(static_cast<int64_t>(idleStart * 1e9));
    }
    if (idle & 15) {
      if (yieldAtOnce) sched_yield();
      continue;
    }
    const double now = net::nowSec();
    if (now - idleStart < cfg.spinMicros * 1e-6) {
      // Past the first microseconds, give the core away on every poll: when ranks outnumber cores
      // the peer we wait for may be queued behind us. With nothing else runnable this returns at
      // once and we keep polling.
      if (now - idleStart > pureSpin) sched_yield();
      continue;
    }
    if (now - lastCheck > 0.1) {
      lastCheck = now;
      checkAll(now, idleStart);
      continue;
    }
    ws.clear();
    for (size_t li = 0; li < lists.size(); ++li)
      if (cur[li] < lists[li].size()) {
        lists[li][cur[li]]->addWaitSources(&ws);
        Doorbell* own = lists[li][cur[li]]->comm()->transports().bell();
        bool have = false;
        for (Doorbell* b : ws.bells) have = have || b == own;
        if (!have && ws.fds.empty() && ws.bells.empty()) ws.bells.push_back(own);  // abort wakes it
      }
    sleepOn(ws, 50000, [&] {
      bool p = false;
      step(&p);
      if (p) idle = 0;
      return p;
    });
  }
  if (!first.ok()) dumpOpRings("failure", /*stderrWithoutDir=*/false);  // with STRATA_DUMP_DIR only
  return first;
}

}  // namespace strata
