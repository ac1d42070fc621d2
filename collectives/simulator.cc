// simulator.cc: runs all ranks' schedules in one process on symbolic values (see simulator.h).
//
// Phases: (1) lay out each rank's memory (Input, Output, Scratch in one array, aliased in place);
// (2) static checks per op and per step (bounds, read-only Input, overlaps); (3) FIFO matching of
// sends and receives per ordered pair, counts compared; (4) rendezvous execution: a pair completes
// when both ranks are in the steps holding it, a rank leaves a step when all its communication
// completed (local ops run then: they touch nothing the step's other ops touch, so their timing
// inside the step does not matter); (5) the Output of every rank is compared with the expected one.
#include "collectives/simulator.h"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace strata {

namespace {

// A symbolic element: `idx` is the source element index, `mask` the set of ranks whose values it
// holds (reductions) or the source rank (data movement). mask == 0: uninitialised. `hash` encodes
// the reduction tree (commutative: a+b and b+a are bitwise equal in floating point).
struct Val {
  uint64_t mask = 0;
  uint32_t idx = 0;
  uint32_t hash = 0;
};

uint32_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}
uint32_t leafHash(int rank) { return mix(0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(rank)); }
uint32_t combineHash(uint32_t a, uint32_t b) {
  if (a > b) std::swap(a, b);
  return mix((static_cast<uint64_t>(a) << 32 | b) ^ 0x5bd1e995ULL);
}

bool isComm(OpCode c) { return c == OpCode::Send || c == OpCode::Recv || c == OpCode::RecvReduce; }
bool isRecv(OpCode c) { return c == OpCode::Recv || c == OpCode::RecvReduce; }

const char* bufLong(BufId b) {
  switch (b) {
    case BufId::Input: return "Input";
    case BufId::Output: return "Output";
    case BufId::Scratch: return "Scratch";
  }
  return "?";
}

std::string maskStr(uint64_t m, int n) {
  const uint64_t all = n >= 64 ? ~0ULL : ((1ULL << n) - 1);
  if (m == all) return "all ranks";
  if ((m & (m - 1)) == 0) return "rank " + std::to_string(__builtin_ctzll(m));
  std::string s = "ranks {";
  bool first = true;
  for (int i = 0; i < 64; ++i)
    if (m >> i & 1) {
      s += (first ? "" : ",") + std::to_string(i);
      first = false;
    }
  return s + "}";
}

std::string valStr(const Val& v, int n) {
  if (v.mask == 0) return "uninitialised";
  return "element " + std::to_string(v.idx) + " of " + maskStr(v.mask, n);
}

struct Layout {
  size_t base[3] = {0, 0, 0};
  size_t size[3] = {0, 0, 0};
  size_t total = 0;
};

// Per-collective buffer sizes and in-place aliasing (CollArgs in schedule.h).
Layout layoutFor(const CollArgs& a, int r, bool inPlace, size_t scratch) {
  const size_t n = static_cast<size_t>(a.nranks), C = a.count;
  const bool root = r == a.root;
  size_t inS = 0, outS = 0;
  switch (a.coll) {
    case CollType::AllReduce: inS = C, outS = C; break;
    case CollType::ReduceScatter: inS = n * C, outS = C; break;
    case CollType::AllGather: inS = C, outS = n * C; break;
    case CollType::Broadcast: inS = root ? C : 0, outS = C; break;
    case CollType::Reduce: inS = C, outS = root ? C : 0; break;
    case CollType::AllToAll: inS = n * C, outS = n * C; break;
    case CollType::Gather: inS = C, outS = root ? n * C : 0; break;
    case CollType::Scatter: inS = root ? n * C : 0, outS = C; break;
  }
  Layout L;
  L.size[0] = inS, L.size[1] = outS, L.size[2] = scratch;
  const bool alias = inPlace && inS > 0 && outS > 0;
  size_t region = inS + outS;
  if (!alias) {
    L.base[0] = 0, L.base[1] = inS;
  } else {
    switch (a.coll) {
      case CollType::ReduceScatter: L.base[0] = 0, L.base[1] = static_cast<size_t>(r) * C, region = inS; break;
      case CollType::AllGather: L.base[1] = 0, L.base[0] = static_cast<size_t>(r) * C, region = outS; break;
      case CollType::Gather: L.base[1] = 0, L.base[0] = static_cast<size_t>(a.root) * C, region = outS; break;
      case CollType::Scatter: L.base[0] = 0, L.base[1] = static_cast<size_t>(a.root) * C, region = inS; break;
      case CollType::AllToAll: L.base[0] = L.base[1] = 0, region = inS; break;
      default: L.base[0] = L.base[1] = 0, region = C; break;  // AllReduce, Broadcast, Reduce roots
    }
  }
  L.base[2] = region;
  L.total = region + scratch;
  return L;
}

// The expected Output of rank r, viewed as blocks of `count` elements: block j holds elements
// idx0 + k of `mask` (k = 0..count-1).
struct Expect {
  size_t idx0;
  uint64_t mask;
};
Expect expectedBlock(const CollArgs& a, int r, int j) {
  const size_t C = a.count;
  const int n = a.nranks;
  const uint64_t all = n >= 64 ? ~0ULL : ((1ULL << n) - 1);
  switch (a.coll) {
    case CollType::AllReduce: return {0, all};
    case CollType::ReduceScatter: return {r * C, all};
    case CollType::AllGather: return {0, 1ULL << j};
    case CollType::Broadcast: return {0, 1ULL << a.root};
    case CollType::Reduce: return {0, all};
    case CollType::AllToAll: return {r * C, 1ULL << j};
    case CollType::Gather: return {0, 1ULL << j};
    case CollType::Scatter: return {r * C, 1ULL << a.root};
  }
  return {0, 0};
}

struct Interval {
  size_t lo, hi;
  uint32_t op;
};

// Whether Input and Output alias. AllToAll: only for schedules built in place (Schedule::inPlace);
// the executor runs the others on a staged copy of the input, i.e. out of place.
bool aliased(const CollArgs& a, bool inPlace, const std::vector<Schedule>& s) {
  if (!inPlace) return false;
  if (a.coll != CollType::AllToAll) return true;
  return !s.empty() && s[0].inPlace;
}

class Sim {
 public:
  Sim(const CollArgs& a, bool inPlace, const std::vector<Schedule>& s, const SimOptions& o)
      : args_(a), inPlace_(aliased(a, inPlace, s)), sch_(s), opt_(o), n_(a.nranks) {}

  SimResult run() {
    stats();
    if (static_cast<int>(sch_.size()) != n_) return fail("expected " + std::to_string(n_) + " schedules");
    for (int r = 0; r < n_; ++r)
      if (sch_[r].inPlace != sch_[0].inPlace) return fail("ranks disagree on Schedule::inPlace");
    if (sch_[0].inPlace && args_.coll != CollType::AllToAll) return fail("Schedule::inPlace on a non-AllToAll schedule");
    if (sch_[0].inPlace && !inPlace_) return fail("an in-place schedule (Schedule::inPlace) run out of place");
    if (opt_.values && n_ > 64) return fail("value simulation supports at most 64 ranks");
    layouts_.resize(n_);
    for (int r = 0; r < n_; ++r) layouts_[r] = layoutFor(args_, r, inPlace_, sch_[r].scratchElems);
    for (int r = 0; r < n_ && res_.ok; ++r) checkStatic(r);
    if (res_.ok) match();
    if (res_.ok && opt_.values) initMemory();
    if (res_.ok) execute();
    if (res_.ok && opt_.values) checkOutput();
    return res_;
  }

 private:
  // ---- reporting -------------------------------------------------------------------------------
  SimResult fail(const std::string& msg) {
    if (res_.ok) {
      res_.ok = false;
      res_.error = msg;
    }
    return res_;
  }
  std::string where(int r, size_t step, uint32_t opIdx) const {
    const Schedule& s = sch_[r];
    const uint32_t k = opIdx - s.steps[step].firstOp;
    return "rank " + std::to_string(r) + " step " + std::to_string(step) + " op " + std::to_string(k) + " " +
           opToString(s.ops[opIdx]);
  }
  void failAt(int r, size_t step, uint32_t opIdx, const std::string& msg) { fail(where(r, step, opIdx) + ": " + msg); }

  // ---- statistics ------------------------------------------------------------------------------
  void stats() {
    for (const Schedule& s : sch_) {
      size_t sent = 0, recvd = 0;
      int comm = 0;
      for (const Schedule::Step& st : s.steps) {
        bool c = false;
        for (uint32_t i = st.firstOp; i < st.firstOp + st.numOps; ++i) {
          const Op& op = s.ops[i];
          if (op.code == OpCode::Send) sent += op.count;
          if (isRecv(op.code)) recvd += op.count;
          c = c || isComm(op.code);
        }
        comm += c;
      }
      res_.steps = std::max(res_.steps, static_cast<int>(s.steps.size()));
      res_.commSteps = std::max(res_.commSteps, comm);
      res_.maxSentElems = std::max(res_.maxSentElems, sent);
      res_.maxRecvElems = std::max(res_.maxRecvElems, recvd);
      res_.maxScratchElems = std::max(res_.maxScratchElems, s.scratchElems);
      res_.maxOps = std::max(res_.maxOps, s.ops.size());
    }
  }

  // ---- static checks ---------------------------------------------------------------------------
  size_t phys(int r, const Slice& s) const { return layouts_[r].base[static_cast<int>(s.buf)] + s.offset; }
  bool sameMem(int r, const Slice& a, const Slice& b) const { return phys(r, a) == phys(r, b); }
  bool overlap(int r, const Slice& a, const Slice& b, size_t n) const {
    const size_t pa = phys(r, a), pb = phys(r, b);
    return pa < pb + n && pb < pa + n;
  }
  // Copy with src == dst in memory: the in-place own-block copy, a no-op.
  bool noopCopy(int r, const Op& op) const { return op.code == OpCode::Copy && sameMem(r, op.src, op.dst); }

  bool checkRange(int r, size_t step, uint32_t oi, const Slice& s, size_t count, bool write) {
    const Layout& L = layouts_[r];
    const size_t size = L.size[static_cast<int>(s.buf)];
    const char* name = bufLong(s.buf);
    if (write && s.buf == BufId::Input) {
      failAt(r, step, oi, "writes Input, which is read-only");
      return false;
    }
    if (size == 0) {
      failAt(r, step, oi, std::string(write ? "writes " : "reads ") + name + ", which this rank does not have");
      return false;
    }
    if (s.offset > size || count > size - s.offset) {
      failAt(r, step, oi, std::string(write ? "writes " : "reads ") + name + " out of bounds (size " +
                              std::to_string(size) + ")");
      return false;
    }
    return true;
  }

  void checkStatic(int r) {
    const Schedule& s = sch_[r];
    const bool red = isReduction(args_.coll);
    std::vector<Interval> reads, writes;
    if (!s.steps.empty()) {
      const Schedule::Step& last = s.steps.back();
      if (static_cast<size_t>(last.firstOp) + last.numOps > s.ops.size()) {
        fail("rank " + std::to_string(r) + ": steps index past the op list");
        return;
      }
    }
    for (size_t st = 0; st < s.steps.size(); ++st) {
      reads.clear();
      writes.clear();
      const Schedule::Step& step = s.steps[st];
      for (uint32_t oi = step.firstOp; oi < step.firstOp + step.numOps; ++oi) {
        const Op& op = s.ops[oi];
        if (op.count == 0) continue;
        if (isComm(op.code) && (op.peer < 0 || op.peer >= n_ || op.peer == r)) {
          failAt(r, st, oi, "invalid peer");
          return;
        }
        if (!red && (op.code == OpCode::RecvReduce || op.code == OpCode::Reduce)) {
          failAt(r, st, oi, std::string("reduction op in a non-reduction collective (") + collName(args_.coll) + ")");
          return;
        }
        const bool hasSrc = op.code != OpCode::Recv, hasDst = op.code != OpCode::Send;
        if (hasSrc && !checkRange(r, st, oi, op.src, op.count, false)) return;
        if (op.code == OpCode::Reduce && !checkRange(r, st, oi, op.src2, op.count, false)) return;
        if (hasDst && !checkRange(r, st, oi, op.dst, op.count, true)) return;
        // Inside one op: dst equals a source exactly or does not overlap it.
        if (hasSrc && hasDst && overlap(r, op.src, op.dst, op.count) && !sameMem(r, op.src, op.dst)) {
          failAt(r, st, oi, "dst partially overlaps src");
          return;
        }
        if (op.code == OpCode::Reduce && overlap(r, op.src2, op.dst, op.count) && !sameMem(r, op.src2, op.dst)) {
          failAt(r, st, oi, "dst partially overlaps src2");
          return;
        }
        if (noopCopy(r, op)) continue;
        if (hasSrc) reads.push_back({phys(r, op.src), phys(r, op.src) + op.count, oi});
        if (op.code == OpCode::Reduce) reads.push_back({phys(r, op.src2), phys(r, op.src2) + op.count, oi});
        if (hasDst) writes.push_back({phys(r, op.dst), phys(r, op.dst) + op.count, oi});
      }
      std::sort(writes.begin(), writes.end(), [](const Interval& x, const Interval& y) { return x.lo < y.lo; });
      for (size_t i = 1; i < writes.size(); ++i) {
        if (writes[i - 1].hi > writes[i].lo) {
          failAt(r, st, writes[i].op, "writes memory that " + where(r, st, writes[i - 1].op) + " of the same step also writes");
          return;
        }
      }
      for (const Interval& rd : reads) {
        // Writes are disjoint and sorted, so their ends are sorted too.
        auto it = std::upper_bound(writes.begin(), writes.end(), rd.lo,
                                   [](size_t v, const Interval& w) { return v < w.hi; });
        for (; it != writes.end() && it->lo < rd.hi; ++it) {
          if (it->op != rd.op) {
            failAt(r, st, rd.op, "reads memory that " + where(r, st, it->op) + " of the same step writes");
            return;
          }
        }
      }
    }
  }

  // ---- matching --------------------------------------------------------------------------------
  struct Ref {
    int rank;
    uint32_t step, op;
  };
  void match() {
    // Flat op ids: rank r's op i is base_[r] + i.
    base_.assign(n_ + 1, 0);
    for (int r = 0; r < n_; ++r) base_[r + 1] = base_[r] + sch_[r].ops.size();
    const size_t total = base_[n_];
    partner_.assign(total, UINT32_MAX);
    stepOf_.assign(total, 0);
    // (pair key, flat id): sends keyed (from, to), receives keyed (from = peer, to = self).
    std::vector<std::pair<uint64_t, uint32_t>> sends, recvs;
    for (int r = 0; r < n_; ++r) {
      const Schedule& s = sch_[r];
      for (uint32_t st = 0; st < s.steps.size(); ++st) {
        for (uint32_t oi = s.steps[st].firstOp; oi < s.steps[st].firstOp + s.steps[st].numOps; ++oi) {
          const Op& op = s.ops[oi];
          const uint32_t id = static_cast<uint32_t>(base_[r] + oi);
          stepOf_[id] = st;
          if (op.count == 0) continue;
          if (op.code == OpCode::Send) sends.push_back({static_cast<uint64_t>(r) * n_ + op.peer, id});
          if (isRecv(op.code)) recvs.push_back({static_cast<uint64_t>(op.peer) * n_ + r, id});
        }
      }
    }
    std::sort(sends.begin(), sends.end());
    std::sort(recvs.begin(), recvs.end());
    size_t i = 0, j = 0;
    while (i < sends.size() || j < recvs.size()) {
      if (j == recvs.size() || (i < sends.size() && sends[i].first < recvs[j].first)) {
        const Ref a = ref(sends[i].second);
        failAt(a.rank, a.step, a.op, "no matching receive at rank " + std::to_string(sch_[a.rank].ops[a.op].peer));
        return;
      }
      if (i == sends.size() || recvs[j].first < sends[i].first) {
        const Ref b = ref(recvs[j].second);
        failAt(b.rank, b.step, b.op, "no matching send from rank " + std::to_string(sch_[b.rank].ops[b.op].peer));
        return;
      }
      const Ref a = ref(sends[i].second), b = ref(recvs[j].second);
      const size_t ca = sch_[a.rank].ops[a.op].count, cb = sch_[b.rank].ops[b.op].count;
      if (ca != cb) {
        failAt(a.rank, a.step, a.op, "count " + std::to_string(ca) + " differs from the matching " +
                                         where(b.rank, b.step, b.op));
        return;
      }
      partner_[sends[i].second] = recvs[j].second;
      partner_[recvs[j].second] = sends[i].second;
      ++i, ++j;
    }
  }
  Ref ref(uint32_t id) const {
    const int r = static_cast<int>(std::upper_bound(base_.begin(), base_.end(), id) - base_.begin()) - 1;
    return Ref{r, stepOf_[id], static_cast<uint32_t>(id - base_[r])};
  }

  // ---- values ----------------------------------------------------------------------------------
  // All ranks' memory in one array (memBase_[r] + phys), reused across calls on a thread so that
  // sweeps do not pay for fresh pages every time.
  void initMemory() {
    static thread_local std::vector<Val> arena;
    memBase_.assign(n_ + 1, 0);
    for (int r = 0; r < n_; ++r) memBase_[r + 1] = memBase_[r] + layouts_[r].total;
    arena.assign(memBase_[n_], Val{});
    mem_ = arena.data();
    for (int r = 0; r < n_; ++r) {
      const Layout& L = layouts_[r];
      const uint32_t h = leafHash(r);
      Val* m = at(r, L.base[0]);
      for (size_t i = 0; i < L.size[0]; ++i) m[i] = Val{1ULL << r, static_cast<uint32_t>(i), h};
    }
  }
  Val* at(int r, size_t physOff) { return mem_ + memBase_[r] + physOff; }
  void noteUninit(int r, size_t step, uint32_t oi) {
    if (trackUninit && uninitNote_.empty()) uninitNote_ = where(r, step, oi);
  }
  // dst = a + b; false on error.
  bool reduceVal(const Val& a, const Val& b, Val* dst, int r, size_t step, uint32_t oi) {
    if (a.mask == 0 || b.mask == 0) {
      noteUninit(r, step, oi);
      *dst = Val{};
      return true;
    }
    if (a.idx != b.idx) {
      failAt(r, step, oi, "index mismatch: combines " + valStr(a, n_) + " with " + valStr(b, n_));
      return false;
    }
    if (a.mask & b.mask) {
      failAt(r, step, oi, "double counted: combines " + valStr(a, n_) + " with " + valStr(b, n_));
      return false;
    }
    *dst = Val{a.mask | b.mask, a.idx, combineHash(a.hash, b.hash)};
    return true;
  }
  // dst[i] = a[i] + b[i]; dst may equal a or b. The common case inline, errors in reduceVal.
  bool reduceRange(const Val* a, const Val* b, Val* dst, size_t count, int r, size_t step, uint32_t oi) {
    for (size_t i = 0; i < count; ++i) {
      const Val x = a[i], y = b[i];
      if (x.mask == 0 || y.mask == 0 || x.idx != y.idx || (x.mask & y.mask)) {
        if (!reduceVal(x, y, &dst[i], r, step, oi)) return false;
        continue;
      }
      dst[i] = Val{x.mask | y.mask, x.idx, combineHash(x.hash, y.hash)};
    }
    return true;
  }
  // Moves the data of matched pair (send id s, receive id v).
  bool transfer(uint32_t sId, uint32_t vId) {
    const Ref a = ref(sId), b = ref(vId);
    const Op& so = sch_[a.rank].ops[a.op];
    const Op& ro = sch_[b.rank].ops[b.op];
    const Val* src = at(a.rank, phys(a.rank, so.src));
    Val* dst = at(b.rank, phys(b.rank, ro.dst));
    const size_t count = ro.count;
    if (ro.code == OpCode::Recv) {
      if (trackUninit)
        for (size_t i = 0; i < count; ++i)
          if (src[i].mask == 0) noteUninit(b.rank, b.step, b.op);
      std::copy(src, src + count, dst);
      return true;
    }
    return reduceRange(at(b.rank, phys(b.rank, ro.src)), src, dst, count, b.rank, b.step, b.op);
  }
  bool runLocal(int r, size_t step, uint32_t oi) {
    const Op& op = sch_[r].ops[oi];
    if (op.count == 0 || noopCopy(r, op)) return true;
    Val* m = at(r, 0);
    const size_t s = phys(r, op.src), d = phys(r, op.dst);
    const size_t count = op.count;
    if (op.code == OpCode::Copy) {
      if (trackUninit)
        for (size_t i = 0; i < count; ++i)
          if (m[s + i].mask == 0) noteUninit(r, step, oi);
      std::copy(m + s, m + s + count, m + d);  // src and dst do not overlap (checked)
      return true;
    }
    return reduceRange(m + s, m + phys(r, op.src2), m + d, count, r, step, oi);
  }

  // ---- timing (SimOptions::links) --------------------------------------------------------------
  std::vector<double> resourceFree_;
  void timeMessage(int src, int dst, size_t count, const std::vector<double>& tStart, std::vector<double>& tFinish) {
    const LinkModel& m = *opt_.links;
    const double bytes = static_cast<double>(count * opt_.elemBytes);
    double begin = std::max(tStart[src], tStart[dst]);
    int res[2];
    const int nres = m.resources(src, dst, res);
    for (int k = 0; k < nres; ++k) begin = std::max(begin, resourceFree_[res[k]]);
    const double busy = bytes * m.secondsPerByte(src, dst);
    for (int k = 0; k < nres; ++k) resourceFree_[res[k]] = begin + busy;
    const double end = begin + busy + m.latency(src, dst);
    tFinish[src] = std::max(tFinish[src], end);
    tFinish[dst] = std::max(tFinish[dst], end);
  }
  double localSeconds(int r, const Schedule::Step& st) const {
    size_t elems = 0;
    for (uint32_t oi = st.firstOp; oi < st.firstOp + st.numOps; ++oi) {
      const Op& op = sch_[r].ops[oi];
      if (op.code == OpCode::Copy && !noopCopy(r, op)) elems += op.count;
      if (op.code == OpCode::Reduce) elems += 2 * op.count;
    }
    return static_cast<double>(elems * opt_.elemBytes) * opt_.links->localSecondsPerByte(r);
  }

  // ---- rendezvous execution --------------------------------------------------------------------
  void execute() {
    std::vector<uint32_t> cur(n_, 0);
    std::vector<int> pending(n_, 0), start(n_, 0), finish(n_, 0);
    std::vector<double> tStart(opt_.links ? n_ : 0, 0.0), tFinish(opt_.links ? n_ : 0, 0.0);
    if (opt_.links) resourceFree_.assign(static_cast<size_t>(opt_.links->resourceCount()), 0.0);
    std::vector<char> done(base_[n_], 0);
    auto enter = [&](int r) {
      pending[r] = 0;
      if (cur[r] >= sch_[r].steps.size()) return;
      const Schedule::Step& st = sch_[r].steps[cur[r]];
      for (uint32_t oi = st.firstOp; oi < st.firstOp + st.numOps; ++oi)
        if (sch_[r].ops[oi].count && isComm(sch_[r].ops[oi].code)) ++pending[r];
    };
    for (int r = 0; r < n_; ++r) enter(r);
    bool progress = true;
    while (progress) {
      progress = false;
      for (int r = 0; r < n_; ++r) {
        const Schedule& s = sch_[r];
        while (cur[r] < s.steps.size()) {
          const Schedule::Step& st = s.steps[cur[r]];
          for (uint32_t oi = st.firstOp; oi < st.firstOp + st.numOps && pending[r]; ++oi) {
            const Op& op = s.ops[oi];
            const uint32_t id = static_cast<uint32_t>(base_[r] + oi);
            if (op.count == 0 || !isComm(op.code) || done[id]) continue;
            const uint32_t pid = partner_[id];
            if (cur[op.peer] != stepOf_[pid]) continue;
            if (opt_.values && !transfer(op.code == OpCode::Send ? id : pid, op.code == OpCode::Send ? pid : id)) return;
            done[id] = done[pid] = 1;
            --pending[r], --pending[op.peer];
            const int t = std::max(start[r], start[op.peer]) + 1;
            finish[r] = std::max(finish[r], t);
            finish[op.peer] = std::max(finish[op.peer], t);
            if (opt_.links) timeMessage(op.code == OpCode::Send ? r : op.peer, op.code == OpCode::Send ? op.peer : r,
                                        op.count, tStart, tFinish);
            progress = true;
          }
          if (pending[r]) break;
          if (opt_.values)
            for (uint32_t oi = st.firstOp; oi < st.firstOp + st.numOps; ++oi)
              if (!isComm(s.ops[oi].code) && !runLocal(r, cur[r], oi)) return;
          if (opt_.links) {
            // Local ops run when the step begins, beside its transfers.
            const double local = localSeconds(r, st);
            tStart[r] = tFinish[r] = std::max(tFinish[r], tStart[r] + local);
          }
          start[r] = finish[r] = std::max(start[r], finish[r]);
          ++cur[r];
          enter(r);
          progress = true;
        }
      }
    }
    for (int r = 0; r < n_; ++r) res_.depth = std::max(res_.depth, start[r]);
    for (double t : tStart) res_.seconds = std::max(res_.seconds, t);
    std::string blocked;
    int shown = 0;
    for (int r = 0; r < n_; ++r) {
      if (cur[r] >= sch_[r].steps.size()) continue;
      if (shown++ == 8) {
        blocked += "; ...";
        break;
      }
      const Schedule::Step& st = sch_[r].steps[cur[r]];
      for (uint32_t oi = st.firstOp; oi < st.firstOp + st.numOps; ++oi) {
        const Op& op = sch_[r].ops[oi];
        if (op.count && isComm(op.code) && !done[base_[r] + oi]) {
          blocked += (blocked.empty() ? "" : "; ") + where(r, cur[r], oi) + " waits (rank " +
                     std::to_string(op.peer) + " is at step " + std::to_string(cur[op.peer]) + ")";
          break;
        }
      }
    }
    if (!blocked.empty()) fail("deadlock: " + blocked);
  }

  // ---- result ----------------------------------------------------------------------------------
  void checkOutput() {
    const bool sameTree = args_.coll == CollType::AllReduce;
    const size_t C = args_.count;
    for (int r = 0; r < n_ && C; ++r) {
      const Layout& L = layouts_[r];
      const Val* got = at(r, L.base[1]);
      const Val* ref0 = at(0, layouts_[0].base[1]);
      for (size_t j = 0; j * C < L.size[1]; ++j) {
        const Expect e = expectedBlock(args_, r, static_cast<int>(j));
        for (size_t k = 0, i = j * C; k < C; ++k, ++i) {
          if (got[i].mask != e.mask || got[i].idx != e.idx0 + k) {
            uninitOutput_ = got[i].mask == 0;
            std::string msg = "rank " + std::to_string(r) + " Output[" + std::to_string(i) + "]: expected " +
                              valStr(Val{e.mask, static_cast<uint32_t>(e.idx0 + k), 0}, n_) + ", got " +
                              valStr(got[i], n_);
            if (uninitOutput_ && !uninitNote_.empty()) msg += " (first uninitialised read: " + uninitNote_ + ")";
            fail(msg);
            return;
          }
          if (sameTree && r > 0 && got[i].hash != ref0[i].hash) {
            fail("rank " + std::to_string(r) + " Output[" + std::to_string(i) +
                 "]: reduced in a different order than on rank 0 (results would not be bitwise identical)");
            return;
          }
        }
      }
    }
  }

 public:
  /// An uninitialised value reached Output: run again with trackUninit to name its first read.
  bool uninitOutput() const { return uninitOutput_; }
  bool trackUninit = false;

 private:
  const CollArgs args_;
  const bool inPlace_;
  const std::vector<Schedule>& sch_;
  const SimOptions opt_;
  const int n_;
  SimResult res_;
  std::vector<Layout> layouts_;
  std::vector<size_t> base_;
  std::vector<uint32_t> partner_, stepOf_;
  std::vector<size_t> memBase_;
  Val* mem_ = nullptr;
  std::string uninitNote_;
  bool uninitOutput_ = false;
};

}  // namespace

SimResult simulateSchedules(const CollArgs& args, bool inPlace, const std::vector<Schedule>& perRank,
                            const SimOptions& opt) {
  Sim sim(args, inPlace, perRank, opt);
  SimResult r = sim.run();
  if (!r.ok && sim.uninitOutput()) {  // rare: rerun, noting where the uninitialised value was read
    Sim again(args, inPlace, perRank, opt);
    again.trackUninit = true;
    return again.run();
  }
  return r;
}

SimResult simulate(Algo algo, const CollArgs& args, bool inPlace, const SimOptions& opt) {
  if (!algoSupports(algo, args.coll)) {
    SimResult r;
    r.ok = false;
    r.error = std::string(algoName(algo)) + " does not implement " + collName(args.coll);
    return r;
  }
  std::vector<Schedule> scheds(args.nranks);
  CollArgs a = args;
  a.inPlace = args.coll == CollType::AllToAll && inPlace;
  for (int r = 0; r < args.nranks; ++r) {
    a.rank = r;
    buildSchedule(algo, a, &scheds[r]);
  }
  return simulateSchedules(args, inPlace, scheds, opt);
}

}  // namespace strata
