// soak_plan.cc: the deterministic draw of strata-soak's steps and split communicators.
#include "tools/soak_plan.h"

#include <algorithm>
#include <tuple>

#include "kernels/host_reduce.h"

namespace strata::soak {

const char* kindName(Kind k) {
  switch (k) {
    case Kind::AllReduce: return "all_reduce";
    case Kind::ReduceScatter: return "reduce_scatter";
    case Kind::AllGather: return "all_gather";
    case Kind::Broadcast: return "broadcast";
    case Kind::Reduce: return "reduce";
    case Kind::AllToAll: return "all_to_all";
    case Kind::Gather: return "gather";
    case Kind::Scatter: return "scatter";
    case Kind::Shift: return "send_recv_shift";
    case Kind::AllToAllV: return "all_to_all_v";
    case Kind::Pair: return "send_recv_pair";
    case Kind::Barrier: return "barrier";
    default: return "?";
  }
}

bool isReduction(Kind k) { return k == Kind::AllReduce || k == Kind::ReduceScatter || k == Kind::Reduce; }
bool isRooted(Kind k) {
  return k == Kind::Broadcast || k == Kind::Reduce || k == Kind::Gather || k == Kind::Scatter;
}
bool perRankCount(Kind k) {
  return k == Kind::ReduceScatter || k == Kind::AllGather || k == Kind::AllToAll || k == Kind::Gather ||
         k == Kind::Scatter || k == Kind::AllToAllV;
}

const char* opName(int op) {
  switch (op) {
    case strataSum: return "sum";
    case strataProd: return "prod";
    case strataMax: return "max";
    case strataMin: return "min";
    case strataAvg: return "avg";
    case kPreMulSum: return "premulsum";
    default: return "?";
  }
}

namespace {
uint64_t splitmix(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(uint64_t seed) {
  for (uint64_t& s : s_) s = splitmix(seed);
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

uint64_t Rng::below(uint64_t n) {
  if (n == 0) return 0;
  // Rejection keeps it unbiased; the bound is a pure function of n, so every rank draws alike.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t v;
  do v = next();
  while (v >= limit);
  return v % n;
}

bool exactReduction(int op, strataDataType_t t, int n) {
  if (n <= 8) return true;  // reduceInput's promise
  const size_t es = kernels::dtypeSize(t);
  if (es < 4) return false;
  if (op == strataProd) return n <= 60;  // at most 2^(n/3 + 1)
  return true;
}

Planner::Planner(uint64_t seed, int worldSize, const PlanOptions& opt)
    : rng_(seed), world_(worldSize), opt_(opt) {
  opt_.slots = std::max(1, opt_.slots);
  opt_.maxGroupItems = std::max(1, opt_.maxGroupItems);
}

namespace {
void finish(CommSpec& s, int world) {
  s.groupOf.assign(static_cast<size_t>(world), -1);
  s.rankIn.assign(static_cast<size_t>(world), -1);
  s.maxSize = 0;
  for (size_t g = 0; g < s.groups.size(); ++g) {
    s.maxSize = std::max(s.maxSize, static_cast<int>(s.groups[g].size()));
    for (size_t i = 0; i < s.groups[g].size(); ++i) {
      s.groupOf[static_cast<size_t>(s.groups[g][i])] = static_cast<int>(g);
      s.rankIn[static_cast<size_t>(s.groups[g][i])] = static_cast<int>(i);
    }
  }
}
}  // namespace

std::vector<CommSpec> Planner::initialSpecs() {
  std::vector<CommSpec> specs(1);
  CommSpec& w = specs[0];
  w.groups.resize(1);
  for (int r = 0; r < world_; ++r) w.groups[0].push_back(r);
  w.color.assign(static_cast<size_t>(world_), 0);
  w.key.assign(static_cast<size_t>(world_), 0);
  finish(w, world_);
  for (int s = 1; s < opt_.slots; ++s) specs.push_back(drawSplit(s, specs));
  return specs;
}

CommSpec Planner::drawSplit(int slot, const std::vector<CommSpec>& specs) {
  CommSpec s;
  s.parent = rng_.chance(50) ? 0 : static_cast<int>(rng_.below(static_cast<uint64_t>(slot)));
  const CommSpec& par = specs[static_cast<size_t>(s.parent)];
  const uint64_t mode = rng_.below(4);  // 0: a copy, 1: 2-4 colours, 2: parity, 3: colours and opt-outs
  const uint64_t ncolors = 2 + rng_.below(3);
  s.color.assign(static_cast<size_t>(world_), -1);
  s.key.assign(static_cast<size_t>(world_), 0);
  for (int w = 0; w < world_; ++w) {
    // Every rank draws for every rank, members of the parent or not, to stay in step.
    int c = 0;
    switch (mode) {
      case 0: c = 0; break;
      case 1: c = static_cast<int>(rng_.below(ncolors)); break;
      case 2: c = w % 2; break;
      default: c = rng_.chance(25) ? STRATA_SPLIT_NOCOLOR : static_cast<int>(rng_.below(ncolors)); break;
    }
    const int key = static_cast<int>(rng_.below(5)) - 2;  // ties (common) keep the parent's order
    if (par.groupOf[static_cast<size_t>(w)] < 0) continue;
    s.color[static_cast<size_t>(w)] = c;
    s.key[static_cast<size_t>(w)] = key;
  }
  // Within each parent communicator, one new communicator per colour: by key, then parent rank.
  for (const std::vector<int>& pg : par.groups) {
    std::vector<int> colors;
    for (int w : pg)
      if (s.color[static_cast<size_t>(w)] >= 0) colors.push_back(s.color[static_cast<size_t>(w)]);
    std::sort(colors.begin(), colors.end());
    colors.erase(std::unique(colors.begin(), colors.end()), colors.end());
    for (int c : colors) {
      std::vector<std::tuple<int, int, int>> m;  // key, parent rank, world rank
      for (int w : pg)
        if (s.color[static_cast<size_t>(w)] == c)
          m.emplace_back(s.key[static_cast<size_t>(w)], par.rankIn[static_cast<size_t>(w)], w);
      std::sort(m.begin(), m.end());
      std::vector<int> g;
      for (const auto& e : m) g.push_back(std::get<2>(e));
      s.groups.push_back(std::move(g));
    }
  }
  finish(s, world_);
  return s;
}

size_t Planner::drawCount(size_t maxElems) {
  if (maxElems == 0) return 0;
  const uint64_t u = rng_.below(100);
  size_t c;
  if (u < 6) c = 0;
  else if (u < 12) c = 1;
  else if (u < 40) c = 2 + rng_.below(63);
  else if (u < 72) c = 65 + rng_.below(8128);
  else {  // log-uniform from 8 Ki elements up to the bound: a uniform bit length, then uniform within
    int bits = 0;
    while (bits < 63 && (size_t{1} << bits) <= maxElems) ++bits;
    if (bits <= 13) c = 1 + rng_.below(maxElems);
    else {
      const int b = 14 + static_cast<int>(rng_.below(static_cast<uint64_t>(bits - 13)));
      c = (size_t{1} << (b - 1)) + rng_.below(size_t{1} << (b - 1));
    }
  }
  return std::min(c, maxElems);
}

Item Planner::drawItem(const std::vector<CommSpec>& specs) {
  Item it;
  do it.slot = static_cast<int>(rng_.below(specs.size()));
  while (specs[static_cast<size_t>(it.slot)].maxSize == 0 && it.slot != 0);
  const int n = specs[static_cast<size_t>(it.slot)].maxSize;
  const uint64_t k = rng_.below(100);  // 10 % each collective, 5 % each point-to-point pattern, 5 % barrier
  it.kind = k < 80 ? static_cast<Kind>(k / 10) : k < 95 ? static_cast<Kind>(8 + (k - 80) / 5) : Kind::Barrier;
  static const int kOps[] = {strataSum, strataProd, strataMax, strataMin, strataAvg, kPreMulSum};
  do {
    it.dtype = static_cast<strataDataType_t>(rng_.below(strataNumTypes));
    it.op = isReduction(it.kind) ? kOps[rng_.below(6)] : strataSum;
  } while (isReduction(it.kind) && !exactReduction(it.op, it.dtype, n));
  size_t maxElems = opt_.maxBytes / kernels::dtypeSize(it.dtype);
  if (perRankCount(it.kind)) maxElems /= static_cast<size_t>(n);
  it.count = it.kind == Kind::Barrier ? 0 : drawCount(maxElems);
  it.rootDraw = static_cast<uint32_t>(rng_.next());
  it.peerDraw = static_cast<uint32_t>(rng_.next());
  it.inPlace = rng_.chance(50);
  it.nullUnused = rng_.chance(50);
  it.arena = static_cast<uint8_t>(rng_.below(2));
  it.misalign = rng_.chance(50) ? 0 : static_cast<uint8_t>(rng_.below(8));
  it.salt = rng_.below(1u << 20);
  return it;
}

Step Planner::next(std::vector<CommSpec>& specs) {
  Step s;
  s.index = steps_++;
  if (specs.size() > 1 && rng_.below(1000) < opt_.resplitPerMille) {
    s.resplit = 1 + static_cast<int>(rng_.below(specs.size() - 1));
    const int gen = specs[static_cast<size_t>(s.resplit)].generation + 1;
    specs[static_cast<size_t>(s.resplit)] = drawSplit(s.resplit, specs);
    specs[static_cast<size_t>(s.resplit)].generation = gen;
  }
  const uint64_t mode = rng_.below(100);  // 45 %: one plain call; 15 %: one call in a group; 40 %: 2+ calls
  size_t items = 1;
  if (mode >= 60 && opt_.maxGroupItems > 1) items = 2 + rng_.below(static_cast<uint64_t>(opt_.maxGroupItems - 1));
  s.grouped = mode >= 45 || items > 1;
  s.nested = s.grouped && rng_.chance(20);
  for (size_t i = 0; i < items; ++i) s.items.push_back(drawItem(specs));
  return s;
}

}  // namespace strata::soak
