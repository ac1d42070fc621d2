// model.cc: forward and backward of a pipeline chunk: embedding, blocks, tied head and loss.
#include "model.h"

#include <stdexcept>

#include <fmt/format.h>

#include "cp.h"
#include "dp.h"
#include "kernels.h"
#include "tp.h"

namespace trainer {

namespace {
void zeros(Buf& v, size_t n) { v.assign(n, 0.f); }
std::string spanArgs(int mb, int layer) { return fmt::format("\"mb\": {}, \"layer\": {}", mb, layer); }
uint64_t mix64(uint64_t z) {  // splitmix64 finaliser
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
}  // namespace

std::vector<float> dropoutMask(const Config& cfg, const MicroBatch& mb, int layer, int site, int rf, int Nr) {
  const int C = cfg.hidden;
  const float p = cfg.dropout, scale = 1.f / (1.f - p);
  const uint64_t threshold = uint64_t(double(p) * 16777216.0);  // keep when 24 hash bits >= p * 2^24
  std::vector<float> m(size_t(Nr) * size_t(C));
  uint64_t base = mix64(cfg.seed ^ 0xd50bd50bULL);
  base = mix64(base ^ uint64_t(mb.step));
  base = mix64(base ^ (uint64_t(layer + 1) * 4 + uint64_t(site)));
  for (int r = 0; r < Nr; ++r) {
    const int n = rf + r;
    const uint64_t seq = uint64_t(mb.seq0 + n / mb.Tl), pos = uint64_t(mb.pos[size_t(n)]);
    const uint64_t row = mix64(mix64(base ^ seq) ^ pos);
    for (int f = 0; f < C; ++f)
      m[size_t(r) * C + size_t(f)] = (mix64(row ^ uint64_t(f)) >> 40) >= threshold ? scale : 0.f;
  }
  return m;
}

Buf Model::mask(const MicroBatch& mb, int layer, int site, int rf, int Nr) const {
  Buf m;
  m.upload(dropoutMask(c_.cfg, mb, layer, site, rf, Nr));
  return m;
}

void Model::beginStep(const std::vector<MicroBatch>* mbs, double scoredTokens) {
  mbs_ = mbs;
  ints_.resize(mbs->size());
  for (size_t i = 0; i < mbs->size(); ++i) {
    ints_[i].tok.upload((*mbs)[i].tok);
    ints_[i].tgt.upload((*mbs)[i].tgt);
    ints_[i].pos.upload((*mbs)[i].pos);
  }
  ceSum = auxSum = 0;
  ceScale_ = float(1.0 / scoredTokens);
  auxScale_ = 1.f / float(c_.cfg.microbatches * c_.cfg.dataRanks());
  weightCount_.assign(size_t(c_.cfg.virtualStages), 0);
  acts_.clear();
}

void Model::layerFwd(int l, LayerAct& a, const MicroBatch& mb, const MbInts& in, const float* x, float* out) {
  ParamStore& ps = *c_.ps;
  Ops& o = *c_.ops;
  const LayerIdx& li = ps.layers[size_t(l)];
  const int N = mb.rows(), Nr = tp::resRows(c_, N), C = c_.C, Cl = c_.Cl, Fl = c_.Fl;
  a.x.assign(x, size_t(Nr) * C);
  // attention
  a.ln1.resize(size_t(Nr) * C), a.ln1m.resize(size_t(Nr)), a.ln1r.resize(size_t(Nr));
  o.layernormFwd(a.ln1.data(), a.ln1m.data(), a.ln1r.data(), x, ps.P(li.ln1w), ps.P(li.ln1b), Nr, C);
  a.ain.resize(size_t(N) * C);
  tp::enterFwd(c_, a.ln1.data(), a.ain.data(), N);
  a.qkv.resize(size_t(N) * 3 * Cl);
  o.matmulFwd(a.qkv.data(), a.ain.data(), ps.P(li.qkvw), ps.P(li.qkvb), N, C, 3 * Cl);
  a.att.resize(size_t(N) * Cl), a.lse.resize(size_t(N) * c_.Hl);
  cp::attentionFwd(c_, a.qkv.data(), in.pos.data(), mb.b, mb.Tl, a.att.data(), a.lse.data());
  Buf proj(size_t(N) * C);
  o.matmulFwd(proj.data(), a.att.data(), ps.P(li.attw), nullptr, N, Cl, C);
  a.x2.resize(size_t(Nr) * C);
  tp::exitFwd(c_, proj.data(), a.x2.data(), N);
  const bool drop = dropping();
  const int rf = tp::resFirst(c_, N);
  if (!drop) {
    o.add(a.x2.data(), x, a.x2.size());
    o.biasFwd(a.x2.data(), ps.P(li.attb), Nr, C);
  } else {  // x2 = x + dropout(proj + b), on this rank's residual rows (its SP slice)
    o.biasFwd(a.x2.data(), ps.P(li.attb), Nr, C);
    const Buf m = mask(mb, l, 1, rf, Nr);
    o.mulAdd(a.x2.data(), m.data(), x, a.x2.size());
  }
  // feed-forward
  a.ln2.resize(size_t(Nr) * C), a.ln2m.resize(size_t(Nr)), a.ln2r.resize(size_t(Nr));
  o.layernormFwd(a.ln2.data(), a.ln2m.data(), a.ln2r.data(), a.x2.data(), ps.P(li.ln2w), ps.P(li.ln2b), Nr, C);
  if (!c_.cfg.moe()) {
    a.min.resize(size_t(N) * C);
    tp::enterFwd(c_, a.ln2.data(), a.min.data(), N);
    a.h.resize(size_t(N) * Fl), a.g.resize(size_t(N) * Fl);
    o.matmulFwd(a.h.data(), a.min.data(), ps.P(li.fcw), ps.P(li.fcb), N, C, Fl);
    o.geluFwd(a.g.data(), a.h.data(), a.h.size());
    Buf y(size_t(N) * C);
    o.matmulFwd(y.data(), a.g.data(), ps.P(li.fcpw), nullptr, N, Fl, C);
    tp::exitFwd(c_, y.data(), out, N);
    if (!drop) {
      o.add(out, a.x2.data(), size_t(Nr) * C);
      o.biasFwd(out, ps.P(li.fcpb), Nr, C);
    } else {
      o.biasFwd(out, ps.P(li.fcpb), Nr, C);
      const Buf m = mask(mb, l, 2, rf, Nr);
      o.mulAdd(out, m.data(), a.x2.data(), size_t(Nr) * C);
    }
  } else {
    // MoE runs on this tp rank's slice of the rows (its sequence-parallel rows under --sp).
    const bool slice = c_.tp > 1 && !c_.sp;
    const int Ns = c_.tp > 1 ? N / c_.tp : N, s0 = c_.tp > 1 ? c_.tr * Ns : 0;
    std::vector<int> keys(static_cast<size_t>(Ns));
    for (int i = 0; i < Ns; ++i) keys[size_t(i)] = ((s0 + i) / mb.Tl) * c_.T + mb.pos[size_t(s0 + i)];
    const float* u = slice ? a.ln2.data() + size_t(s0) * C : a.ln2.data();
    std::vector<float> ys(size_t(Ns) * C), yfull;
    ep::moeFwd(c_, l, u, ys.data(), Ns, keys, a.moe);
    if (c_.mesh->tpcp.rank == 0) auxSum += a.moe.aux;
    if (slice) {
      yfull.resize(size_t(N) * C);
      c_.allGather(c_.mesh->tp, ys.data(), yfull.data(), ys.size());
    } else {
      yfull.swap(ys);
    }
    if (drop) {
      const std::vector<float> m = dropoutMask(c_.cfg, mb, l, 2, rf, Nr);
      for (size_t i = 0; i < size_t(Nr) * C; ++i) yfull[i] *= m[i];
    }
    const float* x2 = a.x2.data();  // host memory: MoE runs on the host lane only
    for (size_t i = 0; i < size_t(Nr) * C; ++i) out[i] = x2[i] + yfull[i];
  }
}

void Model::layerBwdInput(int l, LayerAct& a, const MicroBatch& mb, const MbInts& in, const float* dout, float* dx) {
  ParamStore& ps = *c_.ps;
  Ops& o = *c_.ops;
  const LayerIdx& li = ps.layers[size_t(l)];
  const int N = mb.rows(), Nr = tp::resRows(c_, N), C = c_.C, Cl = c_.Cl, Fl = c_.Fl;
  Buf dx2;
  dx2.assign(dout, size_t(Nr) * C);
  const bool drop = dropping();
  const int rf = tp::resFirst(c_, N);
  // gradient of the MLP branch before dropout
  a.dmlp.assign(dout, size_t(Nr) * C);
  if (drop) {
    const Buf m = mask(mb, l, 2, rf, Nr);
    o.mul(a.dmlp.data(), m.data(), a.dmlp.size());
  }
  // feed-forward
  if (!c_.cfg.moe()) {
    Buf dg, dmin;
    a.dy.resize(size_t(N) * C);
    tp::exitBwd(c_, a.dmlp.data(), a.dy.data(), N);
    zeros(dg, size_t(N) * Fl);
    o.matmulBwdInput(dg.data(), a.dy.data(), ps.P(li.fcpw), N, Fl, C);
    zeros(a.dh, size_t(N) * Fl);
    o.geluBwd(a.dh.data(), a.h.data(), dg.data(), a.dh.size());
    zeros(dmin, size_t(N) * C);
    o.matmulBwdInput(dmin.data(), a.dh.data(), ps.P(li.fcw), N, C, Fl);
    zeros(a.dln2, size_t(Nr) * C);
    tp::enterBwd(c_, dmin.data(), a.dln2.data(), N);
  } else {
    // The MoE backward (router, gates, experts) computes its weight gradients here, in B: only
    // unsplit schedules run MoE layers (config.cc refuses zb with --experts).
    const bool slice = c_.tp > 1 && !c_.sp;
    const int Ns = c_.tp > 1 ? N / c_.tp : N, s0 = c_.tp > 1 ? c_.tr * Ns : 0;
    const float* u = slice ? a.ln2.data() + size_t(s0) * C : a.ln2.data();
    const float* dys = slice ? a.dmlp.data() + size_t(s0) * C : a.dmlp.data();
    std::vector<float> du(size_t(Ns) * C, 0.f);
    ep::moeBwd(c_, l, u, dys, du.data(), a.moe, auxScale_);
    if (slice) {
      a.dln2.resize(size_t(N) * C);
      c_.allGather(c_.mesh->tp, du.data(), a.dln2.data(), du.size());
    } else {
      a.dln2.upload(du);
    }
  }
  o.layernormBwdInput(dx2.data(), a.dln2.data(), a.x2.data(), ps.P(li.ln2w), a.ln2m.data(), a.ln2r.data(), Nr, C);
  // attention: gradient of the branch before dropout
  a.datb = dx2;
  if (drop) {
    const Buf m = mask(mb, l, 1, rf, Nr);
    o.mul(a.datb.data(), m.data(), a.datb.size());
  }
  Buf datt, dain;
  a.dproj.resize(size_t(N) * C);
  tp::exitBwd(c_, a.datb.data(), a.dproj.data(), N);
  zeros(datt, size_t(N) * Cl);
  o.matmulBwdInput(datt.data(), a.dproj.data(), ps.P(li.attw), N, Cl, C);
  zeros(a.dqkv, size_t(N) * 3 * Cl);
  cp::attentionBwd(c_, a.qkv.data(), in.pos.data(), mb.b, mb.Tl, a.att.data(), a.lse.data(), datt.data(),
                   a.dqkv.data());
  zeros(dain, size_t(N) * C);
  o.matmulBwdInput(dain.data(), a.dqkv.data(), ps.P(li.qkvw), N, C, 3 * Cl);
  zeros(a.dln1, size_t(Nr) * C);
  tp::enterBwd(c_, dain.data(), a.dln1.data(), N);
  o.copy(dx, dx2.data(), dx2.size() * sizeof(float));
  o.layernormBwdInput(dx, a.dln1.data(), a.x.data(), ps.P(li.ln1w), a.ln1m.data(), a.ln1r.data(), Nr, C);
}

void Model::layerBwdWeight(int l, LayerAct& a, const MicroBatch& mb) {
  ParamStore& ps = *c_.ps;
  const LayerIdx& li = ps.layers[size_t(l)];
  const int N = mb.rows(), Nr = tp::resRows(c_, N), C = c_.C, Cl = c_.Cl, Fl = c_.Fl;
  Ops& o = *c_.ops;
  if (!c_.cfg.moe()) {
    o.biasBwd(ps.G(li.fcpb), a.dmlp.data(), Nr, C);
    o.matmulBwdWeight(ps.G(li.fcpw), nullptr, a.dy.data(), a.g.data(), N, Fl, C);
    o.matmulBwdWeight(ps.G(li.fcw), ps.G(li.fcb), a.dh.data(), a.min.data(), N, C, Fl);
  }
  o.layernormBwdWeight(ps.G(li.ln2w), ps.G(li.ln2b), a.dln2.data(), a.x2.data(), a.ln2m.data(), a.ln2r.data(), Nr, C);
  o.biasBwd(ps.G(li.attb), a.datb.data(), Nr, C);
  o.matmulBwdWeight(ps.G(li.attw), nullptr, a.dproj.data(), a.att.data(), N, Cl, C);
  o.matmulBwdWeight(ps.G(li.qkvw), ps.G(li.qkvb), a.dqkv.data(), a.ain.data(), N, C, 3 * Cl);
  o.layernormBwdWeight(ps.G(li.ln1w), ps.G(li.ln1b), a.dln1.data(), a.x.data(), a.ln1m.data(), a.ln1r.data(), Nr, C);
}

void Model::forward(int v, int mbi, const float* xin, Buf& xout) {
  ParamStore& ps = *c_.ps;
  Ops& o = *c_.ops;
  GradSync& sync = *c_.sync;
  const MicroBatch& mb = (*mbs_)[size_t(mbi)];
  const int chunk = chunkOf(v), nChunks = c_.cfg.chunks(), Lc = c_.cfg.layersPerChunk(), L = c_.cfg.layers;
  const int N = mb.rows(), Nr = tp::resRows(c_, N), rf = tp::resFirst(c_, N), C = c_.C;
  const bool z3 = c_.cfg.zero == 3;
  ChunkAct& act = acts_[{v, mbi}];
  act.layers.resize(size_t(Lc));
  const MbInts& in = ints_[size_t(mbi)];
  Buf x(size_t(Nr) * C), y(size_t(Nr) * C);
  if (chunk == 0) {
    Scope span(c_.rec, Kind::Layer, 'F', "F embed", spanArgs(mbi, -1));
    if (z3) sync.gather(-1);
    Buf e(size_t(N) * C);
    o.embedFwd(e.data(), in.tok.data(), ps.P(ps.wte), N, C, c_.vStart, c_.Vl);
    tp::exitFwd(c_, e.data(), x.data(), N);
    o.posFwd(x.data(), ps.P(ps.wpe), in.pos.data() + rf, Nr, C);
    if (dropping()) {
      const Buf m = mask(mb, -1, 0, rf, Nr);
      o.mul(x.data(), m.data(), x.size());
    }
    if (z3) sync.release(-1);
  } else {
    x.assign(xin, x.size());
  }
  for (int i = 0; i < Lc; ++i) {
    const int l = chunk * Lc + i;
    Scope span(c_.rec, Kind::Layer, 'F', fmt::format("F layer {}", l), spanArgs(mbi, l));
    if (z3) sync.gather(l);
    layerFwd(l, act.layers[size_t(i)], mb, in, x.data(), y.data());
    if (z3) sync.release(l);
    x.swap(y);
  }
  xout.clear();
  if (chunk + 1 < nChunks) {
    xout.swap(x);
    return;
  }
  // head: final LayerNorm, tied vocab-parallel logits, cross-entropy
  Scope span(c_.rec, Kind::Layer, 'F', "F head", spanArgs(mbi, L));
  if (z3) sync.gather(L);
  act.xlast = x;
  act.lnf.resize(x.size()), act.lnfm.resize(size_t(Nr)), act.lnfr.resize(size_t(Nr));
  o.layernormFwd(act.lnf.data(), act.lnfm.data(), act.lnfr.data(), x.data(), ps.P(ps.lnfw), ps.P(ps.lnfb), Nr, C);
  if (z3) sync.release(L);
  act.hin.resize(size_t(N) * C);
  tp::enterFwd(c_, act.lnf.data(), act.hin.data(), N);
  act.logits.resize(size_t(N) * c_.Vl);
  o.matmulFwd(act.logits.data(), act.hin.data(), ps.P(ps.wte), nullptr, N, C, c_.Vl);
  double s = tp::crossEntropyFwd(c_, act.logits.data(), in.tgt.data(), mb.tgt.data(), N, act.rowMax, act.stats);
  if (c_.tr == 0) ceSum += s;
}

void Model::backward(int v, int mbi, const float* dxout, Buf& dxin) {
  backwardImpl(v, mbi, dxout, dxin, true);
}

void Model::backwardInput(int v, int mbi, const float* dxout, Buf& dxin) {
  backwardImpl(v, mbi, dxout, dxin, false);
}

// weightsToo: each part's W right after its B (unsplit schedules). The sync hooks around the
// parameter gradients: beforeBackward zeroes a unit's scratch (and, ZeRO-2/3, waits for its last
// reduce-scatter), afterBackward adds it up and hands the bucket to the communication thread.
void Model::backwardImpl(int v, int mbi, const float* dxout, Buf& dxin, bool weightsToo) {
  GradSync& sync = *c_.sync;
  Ops& o = *c_.ops;
  const MicroBatch& mb = (*mbs_)[size_t(mbi)];
  const MbInts& in = ints_[size_t(mbi)];
  const int chunk = chunkOf(v), nChunks = c_.cfg.chunks(), Lc = c_.cfg.layersPerChunk(), L = c_.cfg.layers;
  const int N = mb.rows(), Nr = tp::resRows(c_, N), rf = tp::resFirst(c_, N), C = c_.C;
  const bool z3 = c_.cfg.zero == 3;
  const bool last = weightsToo && ++weightCount_[size_t(v)] == c_.cfg.microbatches;
  ChunkAct& act = acts_[{v, mbi}];
  Buf dx(size_t(Nr) * C), dprev(size_t(Nr) * C);
  if (chunk + 1 == nChunks) {
    ParamStore& ps = *c_.ps;
    if (weightsToo) sync.beforeBackward(L);
    {
      Scope span(c_.rec, Kind::Layer, 'B', "B head", spanArgs(mbi, L));
      if (z3) sync.gather(L);
      Buf dhin(size_t(N) * C);
      act.dlogits.resize(act.logits.size());
      zeros(act.dlnf, size_t(Nr) * C);
      o.ceBwd(act.dlogits.data(), act.logits.data(), act.rowMax.data(), act.stats.data(), in.tgt.data(), N, c_.Vl,
              c_.vStart, ceScale_);
      o.matmulBwdInput(dhin.data(), act.dlogits.data(), ps.P(ps.wte), N, C, c_.Vl);
      tp::enterBwd(c_, dhin.data(), act.dlnf.data(), N);
      o.layernormBwdInput(dx.data(), act.dlnf.data(), act.xlast.data(), ps.P(ps.lnfw), act.lnfm.data(),
                           act.lnfr.data(), Nr, C);
      if (z3) sync.release(L);
    }
    if (weightsToo) {
      headWeight(act, mbi);
      sync.afterBackward(L, last);
      if (c_.mesh->coord[PP] != 0) sync.embDone(mbi);  // this rank has no chunk 0: last use
    }
  } else {
    dx.assign(dxout, dx.size());
  }
  for (int i = Lc - 1; i >= 0; --i) {
    const int l = chunk * Lc + i;
    LayerAct& a = act.layers[size_t(i)];
    if (weightsToo) sync.beforeBackward(l);
    {
      Scope span(c_.rec, Kind::Layer, 'B', fmt::format("B layer {}", l), spanArgs(mbi, l));
      if (z3) sync.gather(l);
      layerBwdInput(l, a, mb, in, dx.data(), dprev.data());
      if (z3) sync.release(l);
    }
    if (weightsToo) {
      Scope span(c_.rec, Kind::Layer, 'W', fmt::format("W layer {}", l), spanArgs(mbi, l));
      layerBwdWeight(l, a, mb);
      sync.afterBackward(l, last);
    } else {  // W needs only the layer's inputs and the output gradients B kept
      for (Buf* t : {&a.ln1, &a.qkv, &a.lse, &a.ln2, &a.h}) t->releaseMemory();
    }
    dx.swap(dprev);
  }
  dxin.clear();
  if (chunk == 0) {
    if (weightsToo) sync.beforeBackward(-1);
    {
      Scope span(c_.rec, Kind::Layer, 'B', "B embed", spanArgs(mbi, -1));
      if (dropping()) {
        const Buf m = mask(mb, -1, 0, rf, Nr);
        o.mul(dx.data(), m.data(), dx.size());
      }
      act.dpos = dx;
      act.demb.resize(size_t(N) * C);
      tp::exitBwd(c_, dx.data(), act.demb.data(), N);
    }
    if (weightsToo) {
      embedWeight(act, mb, mbi);
      sync.afterBackward(-1, last);
      sync.embDone(mbi);
    }
  } else {
    dxin.swap(dx);
  }
  if (weightsToo) acts_.erase({v, mbi});
}

void Model::headWeight(ChunkAct& act, int mbi) {
  ParamStore& ps = *c_.ps;
  const MicroBatch& mb = (*mbs_)[size_t(mbi)];
  const int N = mb.rows(), Nr = tp::resRows(c_, N), C = c_.C;
  Scope span(c_.rec, Kind::Layer, 'W', "W head", spanArgs(mbi, c_.cfg.layers));
  float* dwte = c_.sync->embScratch(mbi) + ps.tensors[size_t(ps.wte)].offset;
  c_.ops->matmulBwdWeight(dwte, nullptr, act.dlogits.data(), act.hin.data(), N, C, c_.Vl);
  c_.ops->layernormBwdWeight(ps.G(ps.lnfw), ps.G(ps.lnfb), act.dlnf.data(), act.xlast.data(), act.lnfm.data(),
                        act.lnfr.data(), Nr, C);
}

void Model::embedWeight(ChunkAct& act, const MicroBatch& mb, int mbi) {
  ParamStore& ps = *c_.ps;
  const int N = mb.rows(), Nr = tp::resRows(c_, N), rf = tp::resFirst(c_, N), C = c_.C;
  Scope span(c_.rec, Kind::Layer, 'W', "W embed", spanArgs(mbi, -1));
  const MbInts& in = ints_[size_t(mbi)];
  c_.ops->posBwd(ps.G(ps.wpe), act.dpos.data(), in.pos.data() + rf, Nr, C);
  c_.ops->embedBwd(c_.sync->embScratch(mbi) + ps.tensors[size_t(ps.wte)].offset, act.demb.data(), in.tok.data(), N,
                   C, c_.vStart, c_.Vl);
}

void Model::backwardWeight(int v, int mbi) {
  GradSync& sync = *c_.sync;
  const MicroBatch& mb = (*mbs_)[size_t(mbi)];
  const int chunk = chunkOf(v), Lc = c_.cfg.layersPerChunk(), L = c_.cfg.layers;
  const bool last = ++weightCount_[size_t(v)] == c_.cfg.microbatches;
  auto it = acts_.find({v, mbi});
  if (it == acts_.end()) throw std::logic_error(fmt::format("W of microbatch {} chunk {} before its B", mbi, chunk));
  ChunkAct& act = it->second;
  if (chunk + 1 == c_.cfg.chunks()) {
    sync.beforeBackward(L);
    headWeight(act, mbi);
    sync.afterBackward(L, last);
    if (c_.mesh->coord[PP] != 0) sync.embDone(mbi);
  }
  for (int i = Lc - 1; i >= 0; --i) {
    const int l = chunk * Lc + i;
    Scope span(c_.rec, Kind::Layer, 'W', fmt::format("W layer {}", l), spanArgs(mbi, l));
    sync.beforeBackward(l);
    layerBwdWeight(l, act.layers[size_t(i)], mb);
    sync.afterBackward(l, last);
  }
  if (chunk == 0) {
    sync.beforeBackward(-1);
    embedWeight(act, mb, mbi);
    sync.afterBackward(-1, last);
    sync.embDone(mbi);
  }
  acts_.erase(it);
}

}  // namespace trainer
