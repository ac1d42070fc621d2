// check.cc: per collective, which rank holds which inputs and which exact result.
#include "perf/common/check.h"

#include <cstring>

#include "perf/common/typed.h"

namespace strata::perf {
namespace {

const char* at(const void* p, size_t elems, DType t) { return static_cast<const char*>(p) + elems * dtypeSize(t); }

}  // namespace

void fillInputs(const CollCall& c, const Values& v, int rank, int nranks) {
  const DType t = c.dtype;
  std::memset(c.recv, 0xFF, c.layout.recvCount * dtypeSize(t));
  const bool rootOnly = c.coll == Coll::Broadcast || c.coll == Coll::Scatter;
  if (rootOnly && rank != c.root) return;
  void* send = const_cast<void*>(c.send);
  if (collReduces(c.coll)) fillValues(t, send, c.layout.sendCount, v.reduceInput(rank, 0));
  else fillValues(t, send, c.layout.sendCount, v.moveInput(rank, 0));
}

size_t countWrongElements(const CollCall& c, const Values& v, const void* out, int rank, int nranks) {
  const DType t = c.dtype;
  const size_t count = c.layout.count;
  const double tol = (c.op == Op::Avg && dtypeIsFloat(t)) ? roundingTolerance(t) : 0;
  const bool isRoot = rank == c.root;
  size_t wrong = 0;
  switch (c.coll) {
    case Coll::AllReduce: return countWrong(t, out, count, v.reduced(0), tol);
    case Coll::Reduce: return isRoot ? countWrong(t, out, count, v.reduced(0), tol) : 0;
    case Coll::ReduceScatter: return countWrong(t, out, count, v.reduced(static_cast<size_t>(rank) * count), tol);
    case Coll::Broadcast: return countWrong(t, out, count, v.moveInput(c.root, 0), 0);
    case Coll::Scatter: return countWrong(t, out, count, v.moveInput(c.root, static_cast<size_t>(rank) * count), 0);
    case Coll::SendRecv: return countWrong(t, out, count, v.moveInput((rank + nranks - 1) % nranks, 0), 0);
    case Coll::Gather:
      if (!isRoot) return 0;
      [[fallthrough]];
    case Coll::AllGather:
      for (int p = 0; p < nranks; ++p) wrong += countWrong(t, at(out, p * count, t), count, v.moveInput(p, 0), 0);
      return wrong;
    case Coll::AllToAll:  // block p of my output is block `rank` of rank p's input
      for (int p = 0; p < nranks; ++p)
        wrong += countWrong(t, at(out, p * count, t), count, v.moveInput(p, static_cast<size_t>(rank) * count), 0);
      return wrong;
  }
  return wrong;
}

}  // namespace strata::perf
