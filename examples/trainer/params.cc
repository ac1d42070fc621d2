// params.cc: tensor pieces per rank, class buffers and deterministic initialisation.
#include "params.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

namespace trainer {

size_t TensorSpec::globalIndex(size_t i) const {
  size_t r = i / size_t(colCount), c = i % size_t(colCount);
  for (auto& rr : rowRanges) {
    if (r < size_t(rr.second)) return (size_t(rr.first) + r) * size_t(cols) + size_t(colStart) + c;
    r -= size_t(rr.second);
  }
  return 0;
}

std::vector<std::pair<int, int>> ParamStore::unitsOf(int key) const {
  std::vector<std::pair<int, int>> out;
  for (int c = 0; c < NCLS; ++c)
    for (size_t u = 0; u < cls[c].units.size(); ++u)
      if (cls[c].units[u].key == key) out.push_back({c, int(u)});
  return out;
}

static uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

float initNormal(uint64_t seed, const std::string& name, uint64_t index) {
  uint64_t h = 1469598103934665603ull;
  for (char ch : name) h = (h ^ uint8_t(ch)) * 1099511628211ull;
  uint64_t a = splitmix(seed * 0x100000001b3ull ^ h ^ splitmix(index));
  uint64_t b = splitmix(a);
  double u1 = (double(a >> 11) + 0.5) / 9007199254740992.0, u2 = double(b >> 11) / 9007199254740992.0;
  return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

std::vector<TensorSpec> rankTensors(const Config& cfg, const Mesh& m) {
  const int C = cfg.hidden, V = cfg.vocab, T = cfg.seq, F = cfg.ffn(), L = cfg.layers;
  const int tp = m.size[TP], tr = m.coord[TP], Cl = C / tp, Fl = F / tp, Vl = V / tp;
  const int P = m.size[PP], s = m.coord[PP], Vs = cfg.virtualStages, Lc = cfg.layersPerChunk();
  const bool sp = cfg.sp && tp > 1;
  const int repCls = sp ? CR : CD;  // tp-replicated tensors: partial gradients under sp
  const float projStd = 0.02f / std::sqrt(2.f * L);
  std::vector<TensorSpec> out;
  auto add = [&](std::string name, int rows, int cols, std::vector<std::pair<int, int>> rr, int c0, int cn, int cls,
                 int key, bool decay, int init, float sd, bool tpRep) {
    TensorSpec t;
    t.name = std::move(name);
    t.rows = rows;
    t.cols = cols;
    t.rowRanges = rr.empty() ? std::vector<std::pair<int, int>>{{0, rows}} : std::move(rr);
    t.colStart = c0;
    t.colCount = cn ? cn : cols;
    t.cls = cls;
    t.key = key;
    t.decay = decay;
    t.init = init;
    t.std = sd;
    // A tp-replicated tensor in the dense class is identical on every tp rank: count it once.
    t.countInNorm = !(tpRep && cls == CD && tr != 0);
    out.push_back(std::move(t));
  };
  if (s == 0) add("wpe", T, C, {}, 0, 0, repCls, -1, true, 0, 0.01f, true);
  if (s == 0 || s == P - 1) add("wte", V, C, {{tr * Vl, Vl}}, 0, 0, CE, L + 1, true, 0, 0.02f, false);
  for (int v = 0; v < Vs; ++v) {
    int chunk = v * P + s;
    for (int l = chunk * Lc; l < (chunk + 1) * Lc; ++l) {
      std::string p = fmt::format("h{}.", l);
      std::vector<std::pair<int, int>> qkvRows = {{tr * Cl, Cl}, {C + tr * Cl, Cl}, {2 * C + tr * Cl, Cl}};
      add(p + "ln1.w", C, 1, {}, 0, 0, repCls, l, false, 1, 0, true);
      add(p + "ln1.b", C, 1, {}, 0, 0, repCls, l, false, 2, 0, true);
      add(p + "attn.qkv.w", 3 * C, C, qkvRows, 0, 0, CD, l, true, 0, 0.02f, false);
      add(p + "attn.qkv.b", 3 * C, 1, qkvRows, 0, 0, CD, l, false, 2, 0, false);
      add(p + "attn.proj.w", C, C, {}, tr * Cl, Cl, CD, l, true, 0, projStd, false);
      add(p + "attn.proj.b", C, 1, {}, 0, 0, repCls, l, false, 2, 0, true);
      add(p + "ln2.w", C, 1, {}, 0, 0, repCls, l, false, 1, 0, true);
      add(p + "ln2.b", C, 1, {}, 0, 0, repCls, l, false, 2, 0, true);
      if (!cfg.moe()) {
        add(p + "mlp.fc.w", F, C, {{tr * Fl, Fl}}, 0, 0, CD, l, true, 0, 0.02f, false);
        add(p + "mlp.fc.b", F, 1, {{tr * Fl, Fl}}, 0, 0, CD, l, false, 2, 0, false);
        add(p + "mlp.proj.w", C, F, {}, tr * Fl, Fl, CD, l, true, 0, projStd, false);
        add(p + "mlp.proj.b", C, 1, {}, 0, 0, repCls, l, false, 2, 0, true);
      } else {
        add(p + "moe.router.w", cfg.experts, C, {}, 0, 0, CR, l, true, 0, 0.02f, true);
        const int El = cfg.experts / m.size[EP];
        for (int e = m.coord[EP] * El; e < (m.coord[EP] + 1) * El; ++e) {
          std::string q = fmt::format("{}moe.expert{}.", p, e);
          add(q + "fc.w", F, C, {}, 0, 0, CX, l, true, 0, 0.02f, true);
          add(q + "fc.b", F, 1, {}, 0, 0, CX, l, false, 2, 0, true);
          add(q + "proj.w", C, F, {}, 0, 0, CX, l, true, 0, projStd, true);
          add(q + "proj.b", C, 1, {}, 0, 0, CX, l, false, 2, 0, true);
        }
      }
    }
  }
  if (s == P - 1) {
    add("lnf.w", C, 1, {}, 0, 0, repCls, L, false, 1, 0, true);
    add("lnf.b", C, 1, {}, 0, 0, repCls, L, false, 2, 0, true);
  }
  return out;
}

void buildStore(ParamStore& ps, const Config& cfg, const Mesh& m, int zero) {
  ps.tensors = rankTensors(cfg, m);
  ps.layers.assign(size_t(cfg.layers), LayerIdx{});
  ps.firstExpert = cfg.moe() ? m.coord[EP] * (cfg.experts / m.size[EP]) : 0;
  // Initial values and masks are made on the host, then go to the buffers' lane (backend.h).
  std::vector<float> param[NCLS];
  std::vector<uint8_t> decay[NCLS], count[NCLS];
  // Units per class in first-appearance order (the forward order of this rank's tensors).
  for (int c = 0; c < NCLS; ++c) {
    ClassBuf& cb = ps.cls[c];
    cb.shards = m.red[c].size;
    cb.shardRank = m.red[c].rank;
    const size_t align = size_t(kNormBlock) * size_t(cb.shards);
    size_t off = 0;
    std::map<int, bool> seen;
    std::vector<int> keys;
    for (auto& t : ps.tensors)
      if (t.cls == c && !seen[t.key]) seen[t.key] = true, keys.push_back(t.key);
    for (int key : keys) {
      Unit u;
      u.key = key;
      u.begin = off;
      for (auto& t : ps.tensors)
        if (t.cls == c && t.key == key) t.offset = off, off += t.size();
      off = (off + align - 1) / align * align;
      u.end = off;
      cb.units.push_back(u);
    }
    cb.size = off;
    param[c].assign(off, 0.f);
    cb.scratch.assign(off, 0.f);
    cb.grad.assign(off, 0.f);  // full; under ZeRO only the shard ranges hold reduced values
    cb.m.assign(zero >= 1 ? cb.shardSize() : off, 0.f);
    cb.v.assign(cb.m.size(), 0.f);
    decay[c].assign(off, 0);
    count[c].assign(off, 0);
  }
  for (int i = 0; i < int(ps.tensors.size()); ++i) {
    TensorSpec& t = ps.tensors[size_t(i)];
    ps.byName[t.name] = i;
    float* p = param[t.cls].data() + t.offset;
    for (size_t j = 0; j < t.size(); ++j) {
      p[j] = t.init == 1 ? 1.f : t.init == 2 ? 0.f : t.std * initNormal(cfg.seed, t.name, t.globalIndex(j));
      decay[t.cls][t.offset + j] = t.decay;
      count[t.cls][t.offset + j] = t.countInNorm;
    }
  }
  for (int c = 0; c < NCLS; ++c) {
    ClassBuf& cb = ps.cls[c];
    if (zero == 3) {  // keep only the owned shard of every unit
      std::vector<float> shard(cb.shardSize());
      for (const Unit& u : cb.units)
        std::copy_n(param[c].begin() + ptrdiff_t(cb.shardBegin(u)), cb.shardLen(u),
                    shard.begin() + ptrdiff_t(cb.shardIndex(u)));
      param[c].swap(shard);
      cb.sharded = true;
    }
    cb.param.upload(param[c]);
    cb.decay.upload(decay[c]);
    cb.count.upload(count[c]);
  }
  auto id = [&](const std::string& n) {
    auto it = ps.byName.find(n);
    return it == ps.byName.end() ? -1 : it->second;
  };
  ps.wte = id("wte");
  ps.wpe = id("wpe");
  ps.lnfw = id("lnf.w");
  ps.lnfb = id("lnf.b");
  for (int l = 0; l < cfg.layers; ++l) {
    std::string p = fmt::format("h{}.", l);
    LayerIdx& li = ps.layers[size_t(l)];
    li.ln1w = id(p + "ln1.w");
    if (li.ln1w < 0) continue;
    li.ln1b = id(p + "ln1.b");
    li.qkvw = id(p + "attn.qkv.w");
    li.qkvb = id(p + "attn.qkv.b");
    li.attw = id(p + "attn.proj.w");
    li.attb = id(p + "attn.proj.b");
    li.ln2w = id(p + "ln2.w");
    li.ln2b = id(p + "ln2.b");
    li.fcw = id(p + "mlp.fc.w");
    li.fcb = id(p + "mlp.fc.b");
    li.fcpw = id(p + "mlp.proj.w");
    li.fcpb = id(p + "mlp.proj.b");
    li.router = id(p + "moe.router.w");
    if (cfg.moe()) {
      const int El = cfg.experts / m.size[EP];
      for (int e = ps.firstExpert; e < ps.firstExpert + El; ++e) {
        std::string q = fmt::format("{}moe.expert{}.", p, e);
        li.experts.push_back({id(q + "fc.w"), id(q + "fc.b"), id(q + "proj.w"), id(q + "proj.b")});
      }
    }
  }
}

}  // namespace trainer
