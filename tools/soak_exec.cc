// soak_exec.cc: strata-soak's rank: buffers in two arenas (heap and strataHostMemAlloc memory)
// with guard bytes, inputs from tests/support/coll_checks.h (exact results in every dtype), the
// calls of a step (plain or grouped, nested or not, on one or several communicators), and the
// checks: every output element, inputs unchanged, buffers a rank does not use untouched, guards.
#include "tools/soak_exec.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "kernels/host_reduce.h"
#include "support/coll_checks.h"
#include "support/typed_values.h"

namespace strata::soak {

static_assert(kPreMulSum == testing::kPreMulSum, "the soak's pre-multiplied sum is coll_checks'");

namespace {

constexpr size_t kGuard = 64;
constexpr unsigned char kUnused = 0x5A;  // outputs before the call; buffers the rank does not use
unsigned char guardByte(size_t k) { return static_cast<unsigned char>(0xA5 + 7 * k); }

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t mix(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t x = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull ^ c * 0x94d049bb133111ebull;
  x ^= x >> 31;
  x *= 0xd6e8feb86659fd93ull;
  return x ^ (x >> 32);
}

// One item as a rank of a communicator of n ranks sees it (n == 0: not a member).
std::string itemText(const Item& it, int n, int r) {
  std::string s = fmt::format("{} {}", kindName(it.kind), kernels::dtypeName(it.dtype));
  if (isReduction(it.kind)) s += fmt::format(" {}", opName(it.op));
  if (it.kind != Kind::Barrier) s += fmt::format(" count {}", it.count);
  if (it.kind != Kind::AllToAllV && it.kind != Kind::Pair && it.kind != Kind::Barrier)
    s += it.inPlace ? " in-place" : " out-of-place";
  if (n && (isRooted(it.kind) || it.kind == Kind::Pair)) s += fmt::format(" root {}", it.rootDraw % static_cast<uint32_t>(n));
  if (n && it.kind == Kind::Shift && n > 1) s += fmt::format(" shift {}", 1 + it.peerDraw % static_cast<uint32_t>(n - 1));
  if (n && it.kind == Kind::Pair && n > 1)
    s += fmt::format(" to {}", (it.rootDraw % static_cast<uint32_t>(n) + 1 + it.peerDraw % static_cast<uint32_t>(n - 1)) % n);
  if (n == 0) return s + fmt::format(" on slot {} (not a member)", it.slot);
  return s + fmt::format(" on slot {} (comm of {}, rank {})", it.slot, n, r);
}

}  // namespace

void Stats::toWords(uint64_t* w) const {
  for (int k = 0; k < kKinds; ++k) w[k] = ops[k];
  uint64_t* x = w + kKinds;
  x[0] = calls, x[1] = steps, x[2] = groups, x[3] = multiComm, x[4] = splits, x[5] = checkedBytes;
  x[6] = wrong, x[7] = errors, x[8] = hangs, x[9] = 0;
}

void Stats::fromWords(const uint64_t* w) {
  for (int k = 0; k < kKinds; ++k) ops[k] = w[k];
  const uint64_t* x = w + kKinds;
  calls = x[0], steps = x[1], groups = x[2], multiComm = x[3], splits = x[4], checkedBytes = x[5];
  wrong = x[6], errors = x[7], hangs = x[8];
}

uint64_t Stats::totalOps() const {
  uint64_t t = 0;
  for (uint64_t o : ops) t += o;
  return t;
}

struct RankRunner::Buffer {
  unsigned char* front = nullptr;  ///< the front guard (and the misalignment bytes)
  unsigned char* data = nullptr;
  size_t frontBytes = 0, bytes = 0;
  bool used() const { return front != nullptr; }
  void* at(size_t elem, size_t es) const { return data + elem * es; }
  bool guardsIntact() const {
    if (!front) return true;
    for (size_t k = 0; k < frontBytes; ++k)
      if (front[k] != guardByte(k)) return false;
    for (size_t k = 0; k < kGuard; ++k)
      if (data[bytes + k] != guardByte(k + 1000)) return false;
    return true;
  }
  bool untouched() const {
    for (size_t k = 0; k < bytes; ++k)
      if (data[k] != kUnused) return false;
    return true;
  }
};

struct RankRunner::Prepared {
  const Item* it = nullptr;
  strataComm_t comm = nullptr;  ///< NULL: this rank is in no communicator of the item's slot
  int n = 0, r = 0, root = 0, from = 0, to = 0;
  size_t es = 0;
  Buffer a, b;                  ///< a: send side (or the in-place buffer); b: receive side
  bool aUnused = false, bUnused = false;  ///< buffers passed but not used by this rank: must stay untouched
  const void* send = nullptr;
  void* recv = nullptr;
  strataRedOp_t rop = strataSum;
  bool customOp = false;
  struct P2P {
    bool isSend;
    void* buf;
    size_t count;
    int peer;
  };
  std::vector<P2P> p2p;
  std::vector<size_t> sendOff, recvOff;  ///< all-to-all-v: element offsets per peer (n + 1 entries)

  double input(int q, size_t i) const {  // rank q's input element i
    return isReduction(it->kind) ? testing::reduceInput(it->op, q, i + it->salt, it->dtype)
                                 : testing::moveValue(it->dtype, q, i + it->salt);
  }
  double expect(size_t i) const { return testing::reduceExpect(it->op, n, i + it->salt, it->dtype); }
  double p2pValue(int src, int dst, size_t i) const {
    return testing::moveValue(it->dtype, src * n + dst, i + it->salt);
  }
  size_t pairCount(int src, int dst) const {  // all-to-all-v
    return it->count == 0 ? 0 : mix(it->salt, static_cast<uint64_t>(src), static_cast<uint64_t>(dst)) % (it->count + 1);
  }
};

RankRunner::RankRunner(strataComm_t world, int worldSize, const PlanOptions& opt, double timeoutSec,
                       Progress* progress)
    : world_(worldSize), opt_(opt), timeoutSec_(timeoutSec), progress_(progress) {
  comms_.assign(static_cast<size_t>(std::max(1, opt.slots)), nullptr);
  comms_[0] = world;
  strataCommUserRank(world, &rank_);
  // Every buffer of a step: items x 2 buffers x (the largest + guards, misalignment, alignment).
  const size_t size = static_cast<size_t>(opt.maxGroupItems) * 2 * (opt.maxBytes + 4 * kGuard);
  arenas_[0].base = static_cast<unsigned char*>(std::malloc(size));
  arenas_[0].size = arenas_[0].base ? size : 0;
  void* host = nullptr;
  if (strataHostMemAlloc(&host, size) == strataSuccess) {
    arenas_[1].base = static_cast<unsigned char*>(host);
    arenas_[1].size = size;
    arenas_[1].host = true;
  }
}

RankRunner::~RankRunner() {
  std::free(arenas_[0].base);
  if (arenas_[1].base) strataMemFree(arenas_[1].base);
}

void RankRunner::closeAll(bool abort) {
  for (size_t s = comms_.size(); s-- > 0;) {
    if (!comms_[s]) continue;
    if (abort) strataCommAbort(comms_[s]);
    else strataCommDestroy(comms_[s]);
    comms_[s] = nullptr;
  }
}

bool RankRunner::fail(const std::string& what, strataResult_t rc) {
  if (error_.empty()) {
    error_ = what;
    errorCode_ = rc;
  }
  stats_.errors++;
  return false;
}

bool RankRunner::start(const std::vector<CommSpec>& specs) {
  if (!arenas_[0].base || !arenas_[1].base) return fail("cannot allocate the buffer arenas", strataSystemError);
  for (size_t s = 1; s < specs.size(); ++s)
    if (!resplit(static_cast<int>(s), specs)) return false;
  return true;
}

bool RankRunner::resplit(int slot, const std::vector<CommSpec>& specs) {
  const CommSpec& s = specs[static_cast<size_t>(slot)];
  strataComm_t& mine = comms_[static_cast<size_t>(slot)];
  if (mine) {
    if (s.generation % 2) strataCommFinalize(mine);  // both ways of letting go
    strataCommDestroy(mine);
    mine = nullptr;
  }
  const strataComm_t parent = comms_[static_cast<size_t>(s.parent)];
  if (!parent) return true;  // not in the parent: no part in the split
  const std::string name = fmt::format("soak-slot{}-gen{}", slot, s.generation);
  strataConfig_t cfg;
  strataConfigInit(&cfg);
  cfg.commName = name.c_str();
  cfg.timeout = timeoutSec_;
  const int color = s.color[static_cast<size_t>(rank_)];
  stats_.calls++;
  strataResult_t rc = strataCommSplit(parent, color, s.key[static_cast<size_t>(rank_)], &mine, &cfg);
  if (rc == strataTimeout) stats_.hangs++;
  if (rc != strataSuccess)
    return fail(fmt::format("split of slot {} (generation {}, from slot {}) failed: {}: {}", slot, s.generation,
                            s.parent, strataGetErrorString(rc), strataGetLastError(parent)),
                rc);
  const int g = s.groupOf[static_cast<size_t>(rank_)];
  int n = 0, r = -1;
  if (mine) strataCommCount(mine, &n), strataCommUserRank(mine, &r);
  const int wantN = g < 0 ? 0 : static_cast<int>(s.groups[static_cast<size_t>(g)].size());
  const int wantR = s.rankIn[static_cast<size_t>(rank_)];
  if ((mine != nullptr) != (g >= 0) || n != wantN || r != wantR) {
    stats_.wrong++;
    return fail(fmt::format("split of slot {} (colour {} key {}) gave a communicator of {} ranks with this rank as "
                            "{}; expected {} ranks, rank {}",
                            slot, color, s.key[static_cast<size_t>(rank_)], n, r, wantN, wantR),
                strataInternalError);
  }
  if (mine && r == 0) stats_.splits++;
  return true;
}

bool RankRunner::prepare(const Item& it, const std::vector<CommSpec>& specs, Prepared* p) {
  const CommSpec& s = specs[static_cast<size_t>(it.slot)];
  const int g = s.groupOf[static_cast<size_t>(rank_)];
  *p = Prepared{};
  p->it = &it;
  if (g < 0) return true;
  p->comm = comms_[static_cast<size_t>(it.slot)];
  p->n = static_cast<int>(s.groups[static_cast<size_t>(g)].size());
  p->r = s.rankIn[static_cast<size_t>(rank_)];
  p->es = kernels::dtypeSize(it.dtype);
  p->root = static_cast<int>(it.rootDraw % static_cast<uint32_t>(p->n));
  const size_t c = it.count, n = static_cast<size_t>(p->n), r = static_cast<size_t>(p->r), es = p->es;
  const strataDataType_t t = it.dtype;
  Arena& ar = arenas_[it.arena];
  bool ok = true;
  auto take = [&](Buffer& b, size_t elems) {
    const size_t start = (ar.used + 63) & ~size_t{63};
    const size_t front = kGuard + it.misalign * es, bytes = elems * es;
    if (start + front + bytes + kGuard > ar.size) {
      ok = false;
      return;
    }
    b.front = ar.base + start;
    b.frontBytes = front;
    b.data = b.front + front;
    b.bytes = bytes;
    for (size_t k = 0; k < front; ++k) b.front[k] = guardByte(k);
    std::memset(b.data, kUnused, bytes);
    for (size_t k = 0; k < kGuard; ++k) b.data[bytes + k] = guardByte(k + 1000);
    ar.used = start + front + bytes + kGuard;
  };
  auto fillInput = [&](const Buffer& b, size_t at, size_t cnt, int q, size_t first) {
    for (size_t i = 0; i < cnt; ++i) testing::storeValue(t, b.at(at, es), i, p->input(q, first + i));
  };
  auto fillP2P = [&](const Buffer& b, size_t at, size_t cnt, int src, int dst) {
    for (size_t i = 0; i < cnt; ++i) testing::storeValue(t, b.at(at, es), i, p->p2pValue(src, dst, i));
  };
  const int ri = p->r, root = p->root;
  const bool isRoot = ri == root;
  switch (it.kind) {
    case Kind::AllReduce:
    case Kind::Reduce:
      take(p->a, c);
      fillInput(p->a, 0, c, ri, 0);
      p->send = p->a.data;
      if (it.inPlace) p->recv = p->a.data;
      else if (it.kind == Kind::AllReduce || isRoot) take(p->b, c), p->recv = p->b.data;
      else if (!it.nullUnused) take(p->b, c), p->recv = p->b.data, p->bUnused = true;
      break;
    case Kind::ReduceScatter:
      take(p->a, n * c);
      fillInput(p->a, 0, n * c, ri, 0);
      p->send = p->a.data;
      if (it.inPlace) p->recv = p->a.at(r * c, es);
      else take(p->b, c), p->recv = p->b.data;
      break;
    case Kind::AllGather:
      if (it.inPlace) {
        take(p->a, n * c);
        fillInput(p->a, r * c, c, ri, 0);
        p->send = p->a.at(r * c, es);
        p->recv = p->a.data;
      } else {
        take(p->a, c);
        fillInput(p->a, 0, c, ri, 0);
        take(p->b, n * c);
        p->send = p->a.data;
        p->recv = p->b.data;
      }
      break;
    case Kind::Broadcast:
      if (isRoot) {
        take(p->a, c);
        fillInput(p->a, 0, c, ri, 0);
        p->send = p->a.data;
        if (it.inPlace) p->recv = p->a.data;
        else take(p->b, c), p->recv = p->b.data;
      } else {
        take(p->b, c);
        p->recv = p->b.data;
        if (it.inPlace) p->send = p->b.data;
        else if (!it.nullUnused) take(p->a, c), p->send = p->a.data, p->aUnused = true;
      }
      break;
    case Kind::AllToAll:
      take(p->a, n * c);
      fillInput(p->a, 0, n * c, ri, 0);
      p->send = p->a.data;
      if (it.inPlace) p->recv = p->a.data;
      else take(p->b, n * c), p->recv = p->b.data;
      break;
    case Kind::Gather:
      if (isRoot && it.inPlace) {
        take(p->b, n * c);
        fillInput(p->b, r * c, c, ri, 0);
        p->send = p->b.at(r * c, es);
        p->recv = p->b.data;
      } else {
        take(p->a, c);
        fillInput(p->a, 0, c, ri, 0);
        p->send = p->a.data;
        if (isRoot) take(p->b, n * c), p->recv = p->b.data;
        else if (!it.nullUnused) take(p->b, n * c), p->recv = p->b.data, p->bUnused = true;
      }
      break;
    case Kind::Scatter:
      if (isRoot) {
        take(p->a, n * c);
        fillInput(p->a, 0, n * c, ri, 0);
        p->send = p->a.data;
        if (it.inPlace) p->recv = p->a.at(r * c, es);
        else take(p->b, c), p->recv = p->b.data;
      } else {
        take(p->b, c);
        p->recv = p->b.data;
        if (!it.nullUnused) take(p->a, n * c), p->send = p->a.data, p->aUnused = true;
      }
      break;
    case Kind::Shift: {
      const int d = p->n > 1 ? 1 + static_cast<int>(it.peerDraw % static_cast<uint32_t>(p->n - 1)) : 0;
      p->to = (ri + d) % p->n;
      p->from = (ri + p->n - d) % p->n;
      take(p->a, c);
      fillP2P(p->a, 0, c, ri, p->to);
      if (!it.inPlace) take(p->b, c);
      void* in = it.inPlace ? p->a.data : p->b.data;
      p->p2p.push_back({true, p->a.data, c, p->to});
      p->p2p.push_back({false, in, c, p->from});
      break;
    }
    case Kind::AllToAllV: {
      p->sendOff.assign(n + 1, 0);
      p->recvOff.assign(n + 1, 0);
      for (int q = 0; q < p->n; ++q) {
        p->sendOff[q + 1] = p->sendOff[q] + p->pairCount(ri, q);
        p->recvOff[q + 1] = p->recvOff[q] + p->pairCount(q, ri);
      }
      take(p->a, p->sendOff[n]);
      take(p->b, p->recvOff[n]);
      for (int q = 0; q < p->n; ++q) fillP2P(p->a, p->sendOff[q], p->pairCount(ri, q), ri, q);
      for (int k = 0; k < p->n; ++k) {  // posting order: from this rank on (matching is per peer)
        const int q = (ri + k) % p->n;
        p->p2p.push_back({true, p->a.at(p->sendOff[q], es), p->pairCount(ri, q), q});
        p->p2p.push_back({false, p->b.at(p->recvOff[q], es), p->pairCount(q, ri), q});
      }
      break;
    }
    case Kind::Pair:
      p->from = root;
      p->to = p->n > 1 ? (root + 1 + static_cast<int>(it.peerDraw % static_cast<uint32_t>(p->n - 1))) % p->n : root;
      if (ri == p->from) {
        take(p->a, c);
        fillP2P(p->a, 0, c, p->from, p->to);
        p->p2p.push_back({true, p->a.data, c, p->to});
      }
      if (ri == p->to) {
        take(p->b, c);
        p->p2p.push_back({false, p->b.data, c, p->from});
      }
      break;
    case Kind::Barrier:
    case Kind::kCount:
      break;
  }
  if (!ok) return fail(fmt::format("arena too small for {} count {}", kindName(it.kind), c), strataInternalError);
  if (isReduction(it.kind) && it.op == kPreMulSum) {
    alignas(8) unsigned char scalar[8];
    testing::storeValue(t, scalar, 0, 2.0);
    stats_.calls++;
    strataResult_t rc = strataRedOpCreatePreMulSum(&p->rop, scalar, t, p->comm);
    if (rc != strataSuccess)
      return fail(fmt::format("RedOpCreatePreMulSum failed: {}", strataGetLastError(p->comm)), rc);
    p->customOp = true;
  } else {
    p->rop = static_cast<strataRedOp_t>(it.op);
  }
  return true;
}

strataResult_t RankRunner::issue(Prepared& p, bool inGroup) {
  const Item& it = *p.it;
  const strataDataType_t t = it.dtype;
  const size_t c = it.count;
  switch (it.kind) {
    case Kind::AllReduce: stats_.calls++; return strataAllReduce(p.send, p.recv, c, t, p.rop, p.comm);
    case Kind::ReduceScatter: stats_.calls++; return strataReduceScatter(p.send, p.recv, c, t, p.rop, p.comm);
    case Kind::AllGather: stats_.calls++; return strataAllGather(p.send, p.recv, c, t, p.comm);
    case Kind::Broadcast: stats_.calls++; return strataBroadcast(p.send, p.recv, c, t, p.root, p.comm);
    case Kind::Reduce: stats_.calls++; return strataReduce(p.send, p.recv, c, t, p.rop, p.root, p.comm);
    case Kind::AllToAll: stats_.calls++; return strataAllToAll(p.send, p.recv, c, t, p.comm);
    case Kind::Gather: stats_.calls++; return strataGather(p.send, p.recv, c, t, p.root, p.comm);
    case Kind::Scatter: stats_.calls++; return strataScatter(p.send, p.recv, c, t, p.root, p.comm);
    case Kind::Barrier: stats_.calls++; return strataBarrier(p.comm);
    default: break;
  }
  // Point to point: a rank's sends and receives of one pattern need a group, except a Pair's
  // single send or receive between two different ranks, which runs as a plain blocking call.
  const bool wrap = !inGroup && p.p2p.size() > 1;
  if (wrap) strataGroupStart();
  strataResult_t rc = strataSuccess;
  for (const Prepared::P2P& x : p.p2p) {
    stats_.calls++;
    strataResult_t r = x.isSend ? strataSend(x.buf, x.count, t, x.peer, p.comm) : strataRecv(x.buf, x.count, t, x.peer, p.comm);
    if (rc == strataSuccess) rc = r;
  }
  if (wrap) {
    strataResult_t r = strataGroupEnd();
    if (rc == strataSuccess) rc = r;
  }
  return rc;
}

void RankRunner::wrong(const Prepared& p, const Step& step, const std::string& what) {
  if (++wrongReports_ > 20) return;
  std::fprintf(stderr, "strata-soak: rank %d: WRONG RESULT in step #%llu%s: %s: %s\n", rank_,
               static_cast<unsigned long long>(step.index), step.grouped ? " (in a group)" : "",
               itemText(*p.it, p.n, p.r).c_str(), what.c_str());
  if (wrongReports_ == 20) std::fprintf(stderr, "strata-soak: rank %d: further wrong results not shown\n", rank_);
  std::fflush(stderr);
}

void RankRunner::verify(Prepared& p, const Step& step) {
  const Item& it = *p.it;
  const strataDataType_t t = it.dtype;
  const size_t c = it.count, n = static_cast<size_t>(p.n), r = static_cast<size_t>(p.r), es = p.es;
  const int op = isReduction(it.kind) ? it.op : strataSum;
  std::string bad;
  // Checks cnt elements at `base` against f(i); records the first difference.
  auto check = [&](const void* base, size_t cnt, const char* what, auto f) {
    if (!bad.empty() || !base) return;
    for (size_t i = 0; i < cnt; ++i) {
      const double got = testing::loadValue(t, base, i), want = f(i);
      if (!testing::valueMatches(t, op, got, want)) {
        bad = fmt::format("{} element {} is {} but should be {}", what, i, got, testing::roundToType(t, want));
        return;
      }
    }
    stats_.checkedBytes += cnt * es;
  };
  const int ri = p.r, root = p.root;
  const bool isRoot = ri == root;
  const void* out = p.recv;
  auto inputOf = [&](int q) { return [&p, q](size_t i) { return p.input(q, i); }; };
  switch (it.kind) {
    case Kind::AllReduce:
      check(out, c, "output", [&](size_t i) { return p.expect(i); });
      if (!it.inPlace) check(p.send, c, "input (after the call)", inputOf(ri));
      break;
    case Kind::Reduce:
      if (isRoot) check(out, c, "output", [&](size_t i) { return p.expect(i); });
      if (!isRoot || !it.inPlace) check(p.send, c, "input (after the call)", inputOf(ri));
      break;
    case Kind::ReduceScatter:
      check(out, c, "output", [&](size_t i) { return p.expect(r * c + i); });
      if (!it.inPlace) check(p.send, n * c, "input (after the call)", inputOf(ri));
      break;
    case Kind::AllGather:
      check(out, n * c, "output", [&](size_t j) { return p.input(static_cast<int>(j / c), j % c); });
      if (!it.inPlace) check(p.send, c, "input (after the call)", inputOf(ri));
      break;
    case Kind::Broadcast:
      check(out, c, "output", inputOf(root));
      if (isRoot && !it.inPlace) check(p.send, c, "input (after the call)", inputOf(ri));
      break;
    case Kind::AllToAll:
      check(out, n * c, "output", [&](size_t j) { return p.input(static_cast<int>(j / c), r * c + j % c); });
      if (!it.inPlace) check(p.send, n * c, "input (after the call)", inputOf(ri));
      break;
    case Kind::Gather:
      if (isRoot) check(out, n * c, "output", [&](size_t j) { return p.input(static_cast<int>(j / c), j % c); });
      if (!(isRoot && it.inPlace)) check(p.send, c, "input (after the call)", inputOf(ri));
      break;
    case Kind::Scatter:
      check(out, c, "output", [&](size_t i) { return p.input(root, r * c + i); });
      if (isRoot) check(p.send, n * c, "input (after the call)", inputOf(root));
      break;
    case Kind::Shift:
      check(p.p2p[1].buf, c, "received", [&](size_t i) { return p.p2pValue(p.from, ri, i); });
      if (!it.inPlace) check(p.a.data, c, "sent buffer (after the call)", [&](size_t i) { return p.p2pValue(ri, p.to, i); });
      break;
    case Kind::AllToAllV:
      for (int q = 0; q < p.n && bad.empty(); ++q) {
        const std::string from = fmt::format("block from rank {}", q), to = fmt::format("sent block to rank {}", q);
        check(p.b.at(p.recvOff[q], es), p.pairCount(q, ri), from.c_str(), [&](size_t i) { return p.p2pValue(q, ri, i); });
        check(p.a.at(p.sendOff[q], es), p.pairCount(ri, q), to.c_str(), [&](size_t i) { return p.p2pValue(ri, q, i); });
      }
      break;
    case Kind::Pair:
      if (ri == p.to) check(p.b.data, c, "received", [&](size_t i) { return p.p2pValue(p.from, p.to, i); });
      if (ri == p.from && p.a.used())
        check(p.a.data, c, "sent buffer (after the call)", [&](size_t i) { return p.p2pValue(p.from, p.to, i); });
      break;
    default: break;
  }
  if (bad.empty() && p.aUnused && !p.a.untouched()) bad = "a send buffer this rank does not use was written";
  if (bad.empty() && p.bUnused && !p.b.untouched()) bad = "a receive buffer this rank does not use was written";
  if (bad.empty() && !p.a.guardsIntact()) bad = "bytes around the send buffer were overwritten";
  if (bad.empty() && !p.b.guardsIntact()) bad = "bytes around the receive buffer were overwritten";
  if (!bad.empty()) {
    stats_.wrong++;
    wrong(p, step, bad);
  }
}

std::string RankRunner::describe(const Step& step, const std::vector<CommSpec>& specs) const {
  std::string s = fmt::format("step #{}{}", step.index, step.grouped ? (step.nested ? " nested group {" : " group {") : " ");
  for (size_t k = 0; k < step.items.size(); ++k) {
    const Item& it = step.items[k];
    const CommSpec& sp = specs[static_cast<size_t>(it.slot)];
    const int g = sp.groupOf[static_cast<size_t>(rank_)];
    const int n = g < 0 ? 0 : static_cast<int>(sp.groups[static_cast<size_t>(g)].size());
    s += (k ? "; " : "") + itemText(it, n, sp.rankIn[static_cast<size_t>(rank_)]);
  }
  if (step.grouped) s += "}";
  return s;
}

bool RankRunner::run(const Step& step, const std::vector<CommSpec>& specs) {
  stats_.steps++;
  progress_->step.store(step.index, std::memory_order_relaxed);
  if (step.resplit > 0) {
    {
      std::lock_guard<std::mutex> lock(progress_->m);
      progress_->what = fmt::format("step #{}: re-creating split slot {}", step.index, step.resplit);
      progress_->sinceNs.store(nowNs(), std::memory_order_relaxed);
    }
    const bool ok = resplit(step.resplit, specs);
    progress_->sinceNs.store(0, std::memory_order_relaxed);
    if (!ok) return false;
  }
  arenas_[0].used = arenas_[1].used = 0;
  std::vector<Prepared>& prep = prepared_;
  prep.resize(step.items.size());
  bool ok = true;
  for (size_t k = 0; k < step.items.size() && ok; ++k) ok = prepare(step.items[k], specs, &prep[k]);
  if (ok) {
    int comms = 0;
    for (size_t k = 0; k < prep.size(); ++k) {
      bool seen = false;
      for (size_t j = 0; j < k; ++j) seen = seen || prep[j].comm == prep[k].comm;
      if (prep[k].comm && !seen) ++comms;
    }
    if (step.grouped) stats_.groups++;
    if (comms > 1) stats_.multiComm++;
    {
      std::lock_guard<std::mutex> lock(progress_->m);
      progress_->step.store(step.index, std::memory_order_relaxed);
      progress_->current = &step;
      progress_->specs = &specs;
      progress_->what.clear();
      progress_->sinceNs.store(nowNs(), std::memory_order_relaxed);
    }
    strataResult_t rc = strataSuccess;
    strataComm_t failedOn = nullptr;
    if (step.grouped) {
      strataGroupStart();
      if (step.nested) strataGroupStart();
      for (Prepared& p : prep)
        if (p.comm) {
          strataResult_t r = issue(p, true);
          if (r != strataSuccess && rc == strataSuccess) rc = r, failedOn = p.comm;
        }
      if (step.nested) strataGroupEnd();  // the inner end only counts down
      strataResult_t r = strataGroupEnd();
      if (r != strataSuccess && rc == strataSuccess) {
        rc = r;
        for (Prepared& p : prep)
          if (p.comm && !failedOn) failedOn = p.comm;
      }
    } else if (prep[0].comm) {
      rc = issue(prep[0], false);
      failedOn = prep[0].comm;
    }
    {
      std::lock_guard<std::mutex> lock(progress_->m);
      progress_->sinceNs.store(0, std::memory_order_relaxed);
      progress_->current = nullptr;
    }
    if (rc != strataSuccess) {
      if (rc == strataTimeout) stats_.hangs++;
      ok = fail(fmt::format("{} failed: {}: {}", describe(step, specs), strataGetErrorString(rc),
                            strataGetLastError(failedOn)),
                rc);
    } else {
      for (Prepared& p : prep) {
        // --faults corrupt: changes the first element of the first result this rank checks
        // (every element of `recv` is an output or a checked input; else a receive's data).
        if (!corrupt_ || !p.comm) continue;
        unsigned char* target = p.recv && p.it->count > 0 ? static_cast<unsigned char*>(p.recv) : nullptr;
        for (const Prepared::P2P& x : p.p2p)
          if (!target && !x.isSend && x.count > 0) target = static_cast<unsigned char*>(x.buf);
        if (!target) continue;
        const strataDataType_t t = p.it->dtype;
        testing::storeValue(t, target, 0, testing::loadValue(t, target, 0) + 3);  // beyond any tolerance
        corrupt_ = false;
      }
      for (Prepared& p : prep)
        if (p.comm) {
          verify(p, step);
          if (p.r == 0) stats_.ops[static_cast<int>(p.it->kind)]++;
        }
    }
  }
  for (Prepared& p : prep)
    if (p.customOp) strataRedOpDestroy(p.rop, p.comm), p.customOp = false;
  return ok;
}

std::string RankRunner::describeCurrent() {
  std::lock_guard<std::mutex> lock(progress_->m);
  if (!progress_->current) return progress_->what;
  return describe(*progress_->current, *progress_->specs);
}

}  // namespace strata::soak
