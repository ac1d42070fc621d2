// optim.cc: gradient norm, clipping and AdamW (sharded under ZeRO), on the rank's lane: the norm
// blocks and the update run where the gradients live (layer_math.h's normBlock and adamw); the
// block sums come to the host (a read that waits for the lane) and are summed there in a fixed order.
#include "optim.h"

#include <cmath>

namespace trainer {

namespace {

// Where the reduced gradient of this rank's elements lives: [begin, end) of each unit.
struct Owned {
  size_t begin, len, mOffset;  // param/grad index, count, index into m/v
};

std::vector<Owned> owned(const ClassBuf& cb, int zero) {
  std::vector<Owned> out;
  for (const Unit& u : cb.units) {
    if (zero == 0) out.push_back({u.begin, u.end - u.begin, u.begin});
    else out.push_back({cb.shardBegin(u), cb.shardLen(u), u.begin / size_t(cb.shards)});
  }
  return out;
}

}  // namespace

double optimizerStep(Ctx& c, int t) {
  const Config& cfg = c.cfg;
  Mesh& m = *c.mesh;
  // 1. global norm
  double mine = 0;
  for (int k = 0; k < NCLS; ++k) {
    ClassBuf& cb = c.ps->cls[k];
    if (cb.size == 0 || (k == CE && !m.inClass[CE])) continue;
    std::vector<double> blocks;
    for (const Owned& o : owned(cb, cfg.zero)) {
      const size_t at = blocks.size();
      blocks.resize(at + o.len / kNormBlock);
      c.ops->normBlocks(blocks.data() + at, cb.grad.data() + o.begin, cb.count.data() + o.begin, o.len, kNormBlock);
    }
    std::vector<double> all = blocks;
    Group& g = m.gat[k];
    if (cfg.zero >= 1 && g.active()) {
      all.resize(blocks.size() * size_t(g.size));
      c.allGather(g, blocks.data(), all.data(), blocks.size());
    }
    // Sum in unit order: unit u's blocks are shard 0's, shard 1's, ... of that unit.
    double total = 0;
    const int S = cfg.zero >= 1 ? g.size : 1;
    size_t per = blocks.size(), at = 0;
    for (const Unit& u : cb.units) {
      size_t nb = (u.end - u.begin) / size_t(S) / kNormBlock;
      for (int r = 0; r < S; ++r)
        for (size_t b = 0; b < nb; ++b) total += all[size_t(r) * per + at + b];
      at += nb;
    }
    if (g.rank == 0) mine += total;
  }
  c.allReduce(m.all, &mine, 1);
  const double norm = std::sqrt(mine);
  const float scale = (cfg.clip > 0 && norm > cfg.clip) ? float(cfg.clip / (norm + 1e-6)) : 1.f;
  // 2. AdamW on owned elements
  const float b1 = cfg.beta1, b2 = cfg.beta2, eps = 1e-8f, lr = cfg.lr, wd = cfg.weightDecay;
  const float c1 = 1.f - std::pow(b1, float(t)), c2 = 1.f - std::pow(b2, float(t));
  const math::AdamArgs args{scale, b1, b2, c1, c2, lr, wd, eps};
  for (int k = 0; k < NCLS; ++k) {
    ClassBuf& cb = c.ps->cls[k];
    if (cb.size == 0 || (k == CE && !m.inClass[CE])) continue;
    for (const Owned& o : owned(cb, cfg.zero))
      c.ops->adamw(cb.param.data() + (cb.sharded ? o.mOffset : o.begin), cb.grad.data() + o.begin,
                   cb.m.data() + o.mOffset, cb.v.data() + o.mOffset, cb.decay.data() + o.begin, o.len, args);
    // 3. ZeRO-1/2: every rank gets the updated full parameters back (ZeRO-3 gathers before use).
    if (cfg.zero == 1 || cfg.zero == 2)
      for (const Unit& u : cb.units)
        c.allGather(m.gat[k], cb.param.data() + cb.shardBegin(u), cb.param.data() + u.begin, cb.shardLen(u));
  }
  return norm;
}

}  // namespace trainer
