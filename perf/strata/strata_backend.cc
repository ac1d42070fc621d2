// strata_backend.cc: one strata call per collective (the *Stream forms: the rank's stream with
// device memory, NULL with host memory); send/recv is a grouped ring shift.
#include "perf/strata/strata_backend.h"

#include <fmt/format.h>

#include <stdexcept>

#include "perf/common/typed.h"

namespace strata::perf {

StrataBackend::StrataBackend(strataComm_t comm) : comm_(comm) {
  check(strataCommUserRank(comm_, &rank_), "CommUserRank");
  check(strataCommCount(comm_, &nranks_), "CommCount");
}

std::string StrataBackend::describe() const {
  int v = 0;
  strataGetVersion(&v);
  return fmt::format("strata {}.{}.{}", v / 10000, v / 100 % 100, v % 100);
}

void StrataBackend::check(strataResult_t rc, const char* what) const {
  if (rc != strataSuccess)
    throw std::runtime_error(fmt::format("strata {} failed: {}: {}", what, strataGetErrorString(rc),
                                         strataGetLastError(comm_)));
}

void StrataBackend::prepare(const CollCall& c) {
  static constexpr strataRedOp_t kOps[] = {strataSum, strataProd, strataMax, strataMin, strataAvg};
  customOp_ = c.op == Op::MulSum && collReduces(c.coll);
  if (!customOp_) {
    op_ = c.op == Op::MulSum ? strataSum : kOps[static_cast<int>(c.op)];
    return;
  }
  alignas(8) unsigned char scalar[8] = {};
  storeScalar(c.dtype, 2.0, scalar);
  check(strataRedOpCreatePreMulSum(&op_, scalar, c.dtype, comm_), "RedOpCreatePreMulSum");
}

void StrataBackend::finish(const CollCall&) {
  if (customOp_) check(strataRedOpDestroy(op_, comm_), "RedOpDestroy");
  customOp_ = false;
}

void StrataBackend::run(const CollCall& c) {
  const size_t n = c.layout.count;
  const DType t = c.dtype;
  const strataStream_t s = c.stream;  // NULL for host memory: the call completes before it returns
  switch (c.coll) {
    case Coll::AllReduce: return check(strataAllReduceStream(c.send, c.recv, n, t, op_, comm_, s), "AllReduce");
    case Coll::ReduceScatter:
      return check(strataReduceScatterStream(c.send, c.recv, n, t, op_, comm_, s), "ReduceScatter");
    case Coll::AllGather: return check(strataAllGatherStream(c.send, c.recv, n, t, comm_, s), "AllGather");
    case Coll::Broadcast: return check(strataBroadcastStream(c.send, c.recv, n, t, c.root, comm_, s), "Broadcast");
    case Coll::Reduce: return check(strataReduceStream(c.send, c.recv, n, t, op_, c.root, comm_, s), "Reduce");
    case Coll::AllToAll: return check(strataAllToAllStream(c.send, c.recv, n, t, comm_, s), "AllToAll");
    case Coll::Gather: return check(strataGatherStream(c.send, c.recv, n, t, c.root, comm_, s), "Gather");
    case Coll::Scatter: return check(strataScatterStream(c.send, c.recv, n, t, c.root, comm_, s), "Scatter");
    case Coll::SendRecv: {
      check(strataGroupStart(), "GroupStart");
      const strataResult_t sent = strataSendStream(c.send, n, t, (rank_ + 1) % nranks_, comm_, s);
      const strataResult_t received = strataRecvStream(c.recv, n, t, (rank_ + nranks_ - 1) % nranks_, comm_, s);
      const strataResult_t ended = strataGroupEnd();
      check(sent, "Send");
      check(received, "Recv");
      return check(ended, "Send/Recv");
    }
  }
}

void StrataBackend::groupStart() { check(strataGroupStart(), "GroupStart"); }
void StrataBackend::groupEnd() { check(strataGroupEnd(), "GroupEnd"); }
void StrataBackend::barrier() { check(strataBarrier(comm_), "Barrier"); }

double StrataBackend::allReduce(double v, Agg how) {
  const strataRedOp_t op = how == Agg::Min ? strataMin : how == Agg::Max ? strataMax : strataSum;
  check(strataAllReduce(&v, &v, 1, strataFloat64, op, comm_), "AllReduce");
  return v;
}

void StrataBackend::allGather(const void* mine, void* all, size_t bytes) {
  check(strataAllGather(mine, all, bytes, strataUint8, comm_), "AllGather");
}

}  // namespace strata::perf
