// layout.cc: counts, in-place offsets and bus-bandwidth factors per collective.
#include "perf/common/layout.h"

#include <algorithm>

namespace strata::perf {

Layout layoutFor(Coll coll, size_t bytes, DType dtype, int nranks) {
  const size_t count = bytes / dtypeSize(dtype);
  const size_t n = static_cast<size_t>(nranks);
  const size_t base = count / n;  // per-rank block of the collectives whose SIZE is the whole buffer
  Layout l;
  switch (coll) {
    case Coll::AllReduce:
    case Coll::Broadcast:
    case Coll::Reduce:
    case Coll::SendRecv:
      l.count = l.sendCount = l.recvCount = count;
      break;
    case Coll::ReduceScatter:
    case Coll::Scatter:
      l.count = l.recvCount = base;
      l.sendCount = base * n;
      l.recvInPlaceOffset = base;
      break;
    case Coll::AllGather:
    case Coll::Gather:
      l.count = l.sendCount = base;
      l.recvCount = base * n;
      l.sendInPlaceOffset = base;
      break;
    case Coll::AllToAll:
      l.count = base;
      l.sendCount = l.recvCount = base * n;
      break;
  }
  return l;
}

size_t reportedBytes(const Layout& l, DType dtype) { return std::max(l.sendCount, l.recvCount) * dtypeSize(dtype); }

double busFactor(Coll coll, int nranks) {
  const double n = nranks;
  switch (coll) {
    case Coll::AllReduce: return 2 * (n - 1) / n;
    case Coll::ReduceScatter:
    case Coll::AllGather:
    case Coll::AllToAll:
    case Coll::Gather:
    case Coll::Scatter: return (n - 1) / n;
    case Coll::Broadcast:
    case Coll::Reduce:
    case Coll::SendRecv: return 1;
  }
  return 1;
}

}  // namespace strata::perf
