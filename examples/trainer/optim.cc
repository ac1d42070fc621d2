// optim.cc: gradient norm, clipping and AdamW (sharded under ZeRO).
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
    for (const Owned& o : owned(cb, cfg.zero))
      for (size_t b = 0; b < o.len; b += kNormBlock) {
        double s = 0;
        for (size_t i = o.begin + b; i < o.begin + b + kNormBlock; ++i)
          if (cb.count[i]) s += double(cb.grad[i]) * double(cb.grad[i]);
        blocks.push_back(s);
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
  for (int k = 0; k < NCLS; ++k) {
    ClassBuf& cb = c.ps->cls[k];
    if (cb.size == 0 || (k == CE && !m.inClass[CE])) continue;
    for (const Owned& o : owned(cb, cfg.zero))
      for (size_t i = 0; i < o.len; ++i) {
        const size_t pi = o.begin + i, mi = o.mOffset + i;
        const float g = cb.grad[pi] * scale;
        cb.m[mi] = b1 * cb.m[mi] + (1.f - b1) * g;
        cb.v[mi] = b2 * cb.v[mi] + (1.f - b2) * g * g;
        const float mh = cb.m[mi] / c1, vh = cb.v[mi] / c2;
        float& p = cb.param[cb.sharded ? mi : pi];
        p -= lr * (mh / (std::sqrt(vh) + eps) + (cb.decay[pi] ? wd * p : 0.f));
      }
    // 3. ZeRO-1/2: every rank gets the updated full parameters back (ZeRO-3 gathers before use).
    if (cfg.zero == 1 || cfg.zero == 2)
      for (const Unit& u : cb.units)
        c.allGather(m.gat[k], cb.param.data() + cb.shardBegin(u), cb.param.data() + u.begin, cb.shardLen(u));
  }
  return norm;
}

}  // namespace trainer
