// compose.cc: schedules of sub-groups embedded in a parent schedule (hierarchical algorithms are
// compositions: intra-node phases around inter-node ones). Peers and buffers are renamed; the
// sub-schedule's steps stay steps, so the simulator proves the composed schedule as a whole.
#include <algorithm>

#include "collectives/algorithms/algorithms.h"

namespace strata::algo {

static Slice mapSlice(const Slice& x, const SubBuffers& b) {
  const Slice& base = x.buf == BufId::Input ? b.input : x.buf == BufId::Output ? b.output : b.scratch;
  return Slice{base.buf, base.offset + x.offset};
}

void appendSub(Schedule* s, const Schedule& sub, const std::vector<int>& members, const SubBuffers& b) {
  for (const Schedule::Step& st : sub.steps) {
    s->beginStep();
    for (uint32_t i = st.firstOp; i < st.firstOp + st.numOps; ++i) {
      Op op = sub.ops[i];
      if (op.peer >= 0) op.peer = members[static_cast<size_t>(op.peer)];
      op.src = mapSlice(op.src, b);
      op.src2 = mapSlice(op.src2, b);
      op.dst = mapSlice(op.dst, b);
      s->add(op);
    }
  }
}

void appendSubCollective(Schedule* s, Algo algo, CollType coll, const std::vector<int>& members, int subRank,
                         int subRoot, size_t count, const SubBuffers& b) {
  Schedule sub;
  CollArgs a;
  a.coll = coll;
  a.nranks = static_cast<int>(members.size());
  a.rank = subRank;
  a.root = subRoot;
  a.count = count;
  buildSchedule(algo, a, &sub);
  appendSub(s, sub, members, b);
  if (sub.scratchElems) s->scratchElems = std::max(s->scratchElems, b.scratch.offset + sub.scratchElems);
}

}  // namespace strata::algo
