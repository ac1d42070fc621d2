// model.cc: forward and backward of a pipeline chunk: embedding, blocks, tied head and loss.
#include "model.h"

#include "cp.h"
#include "dp.h"
#include "kernels.h"
#include "tp.h"

namespace trainer {

namespace {
void zeros(std::vector<float>& v, size_t n) { v.assign(n, 0.f); }
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

void Model::beginStep(const std::vector<MicroBatch>* mbs, double scoredTokens) {
  mbs_ = mbs;
  ceSum = auxSum = 0;
  ceScale_ = float(1.0 / scoredTokens);
  auxScale_ = 1.f / float(c_.cfg.microbatches * c_.cfg.dataRanks());
  backwardCount_.assign(size_t(c_.cfg.virtualStages), 0);
  acts_.clear();
}

void Model::layerFwd(int l, LayerAct& a, const MicroBatch& mb, const float* x, float* out) {
  ParamStore& ps = *c_.ps;
  const LayerIdx& li = ps.layers[size_t(l)];
  const int N = mb.rows(), Nr = tp::resRows(c_, N), C = c_.C, Cl = c_.Cl, Fl = c_.Fl;
  a.x.assign(x, x + size_t(Nr) * C);
  // attention
  a.ln1.resize(size_t(Nr) * C), a.ln1m.resize(size_t(Nr)), a.ln1r.resize(size_t(Nr));
  k::layernormFwd(a.ln1.data(), a.ln1m.data(), a.ln1r.data(), x, ps.P(li.ln1w), ps.P(li.ln1b), Nr, C);
  a.ain.resize(size_t(N) * C);
  tp::enterFwd(c_, a.ln1.data(), a.ain.data(), N);
  a.qkv.resize(size_t(N) * 3 * Cl);
  k::matmulFwd(a.qkv.data(), a.ain.data(), ps.P(li.qkvw), ps.P(li.qkvb), N, C, 3 * Cl);
  a.att.resize(size_t(N) * Cl), a.lse.resize(size_t(N) * c_.Hl);
  cp::attentionFwd(c_, a.qkv.data(), mb.pos.data(), mb.b, mb.Tl, a.att.data(), a.lse.data());
  std::vector<float> proj(size_t(N) * C);
  k::matmulFwd(proj.data(), a.att.data(), ps.P(li.attw), static_cast<const float*>(nullptr), N, Cl, C);
  a.x2.resize(size_t(Nr) * C);
  tp::exitFwd(c_, proj.data(), a.x2.data(), N);
  const bool drop = dropping();
  const int rf = tp::resFirst(c_, N);
  if (!drop) {
    for (size_t i = 0; i < a.x2.size(); ++i) a.x2[i] += x[i];
    k::biasFwd(a.x2.data(), ps.P(li.attb), Nr, C);
  } else {  // x2 = x + dropout(proj + b), on this rank's residual rows (its SP slice)
    k::biasFwd(a.x2.data(), ps.P(li.attb), Nr, C);
    const std::vector<float> m = dropoutMask(c_.cfg, mb, l, 1, rf, Nr);
    for (size_t i = 0; i < a.x2.size(); ++i) a.x2[i] = a.x2[i] * m[i] + x[i];
  }
  // feed-forward
  a.ln2.resize(size_t(Nr) * C), a.ln2m.resize(size_t(Nr)), a.ln2r.resize(size_t(Nr));
  k::layernormFwd(a.ln2.data(), a.ln2m.data(), a.ln2r.data(), a.x2.data(), ps.P(li.ln2w), ps.P(li.ln2b), Nr, C);
  if (!c_.cfg.moe()) {
    a.min.resize(size_t(N) * C);
    tp::enterFwd(c_, a.ln2.data(), a.min.data(), N);
    a.h.resize(size_t(N) * Fl), a.g.resize(size_t(N) * Fl);
    k::matmulFwd(a.h.data(), a.min.data(), ps.P(li.fcw), ps.P(li.fcb), N, C, Fl);
    k::geluFwd(a.g.data(), a.h.data(), a.h.size());
    std::vector<float> y(size_t(N) * C);
    k::matmulFwd(y.data(), a.g.data(), ps.P(li.fcpw), static_cast<const float*>(nullptr), N, Fl, C);
    tp::exitFwd(c_, y.data(), out, N);
    if (!drop) {
      for (size_t i = 0; i < size_t(Nr) * C; ++i) out[i] += a.x2[i];
      k::biasFwd(out, ps.P(li.fcpb), Nr, C);
    } else {
      k::biasFwd(out, ps.P(li.fcpb), Nr, C);
      const std::vector<float> m = dropoutMask(c_.cfg, mb, l, 2, rf, Nr);
      for (size_t i = 0; i < size_t(Nr) * C; ++i) out[i] = out[i] * m[i] + a.x2[i];
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
    for (size_t i = 0; i < size_t(Nr) * C; ++i) out[i] = a.x2[i] + yfull[i];
  }
}

void Model::layerBwd(int l, LayerAct& a, const MicroBatch& mb, const float* dout, float* dx) {
  ParamStore& ps = *c_.ps;
  const LayerIdx& li = ps.layers[size_t(l)];
  const int N = mb.rows(), Nr = tp::resRows(c_, N), C = c_.C, Cl = c_.Cl, Fl = c_.Fl;
  std::vector<float> dx2(dout, dout + size_t(Nr) * C), dln2, tmp;
  const bool drop = dropping();
  const int rf = tp::resFirst(c_, N);
  std::vector<float> dmasked;  // gradient of the MLP branch before dropout
  const float* dbr = dout;
  if (drop) {
    const std::vector<float> m = dropoutMask(c_.cfg, mb, l, 2, rf, Nr);
    dmasked.resize(size_t(Nr) * C);
    for (size_t i = 0; i < dmasked.size(); ++i) dmasked[i] = dout[i] * m[i];
    dbr = dmasked.data();
  }
  // feed-forward
  if (!c_.cfg.moe()) {
    k::biasBwd(ps.G(li.fcpb), dbr, Nr, C);
    std::vector<float> dy(size_t(N) * C), dg, dh, dmin;
    tp::exitBwd(c_, dbr, dy.data(), N);
    zeros(dg, size_t(N) * Fl);
    k::matmulBwd(dg.data(), ps.G(li.fcpw), static_cast<float*>(nullptr), dy.data(), a.g.data(), ps.P(li.fcpw), N, Fl, C);
    zeros(dh, size_t(N) * Fl);
    k::geluBwd(dh.data(), a.h.data(), dg.data(), dh.size());
    zeros(dmin, size_t(N) * C);
    k::matmulBwd(dmin.data(), ps.G(li.fcw), ps.G(li.fcb), dh.data(), a.min.data(), ps.P(li.fcw), N, C, Fl);
    zeros(dln2, size_t(Nr) * C);
    tp::enterBwd(c_, dmin.data(), dln2.data(), N);
  } else {
    const bool slice = c_.tp > 1 && !c_.sp;
    const int Ns = c_.tp > 1 ? N / c_.tp : N, s0 = c_.tp > 1 ? c_.tr * Ns : 0;
    const float* u = slice ? a.ln2.data() + size_t(s0) * C : a.ln2.data();
    const float* dys = slice ? dbr + size_t(s0) * C : dbr;
    std::vector<float> du(size_t(Ns) * C, 0.f);
    ep::moeBwd(c_, l, u, dys, du.data(), a.moe, auxScale_);
    if (slice) {
      dln2.resize(size_t(N) * C);
      c_.allGather(c_.mesh->tp, du.data(), dln2.data(), du.size());
    } else {
      dln2.swap(du);
    }
  }
  k::layernormBwd(dx2.data(), ps.G(li.ln2w), ps.G(li.ln2b), dln2.data(), a.x2.data(), ps.P(li.ln2w), a.ln2m.data(),
                  a.ln2r.data(), Nr, C);
  // attention
  const float* dab = dx2.data();  // gradient of the attention branch before dropout
  if (drop) {
    const std::vector<float> m = dropoutMask(c_.cfg, mb, l, 1, rf, Nr);
    dmasked.resize(size_t(Nr) * C);
    for (size_t i = 0; i < dmasked.size(); ++i) dmasked[i] = dx2[i] * m[i];
    dab = dmasked.data();
  }
  k::biasBwd(ps.G(li.attb), dab, Nr, C);
  std::vector<float> dproj(size_t(N) * C), datt, dqkv, dain, dln1;
  tp::exitBwd(c_, dab, dproj.data(), N);
  zeros(datt, size_t(N) * Cl);
  k::matmulBwd(datt.data(), ps.G(li.attw), static_cast<float*>(nullptr), dproj.data(), a.att.data(), ps.P(li.attw), N,
               Cl, C);
  zeros(dqkv, size_t(N) * 3 * Cl);
  cp::attentionBwd(c_, a.qkv.data(), mb.pos.data(), mb.b, mb.Tl, a.att.data(), a.lse.data(), datt.data(), dqkv.data());
  zeros(dain, size_t(N) * C);
  k::matmulBwd(dain.data(), ps.G(li.qkvw), ps.G(li.qkvb), dqkv.data(), a.ain.data(), ps.P(li.qkvw), N, C, 3 * Cl);
  zeros(dln1, size_t(Nr) * C);
  tp::enterBwd(c_, dain.data(), dln1.data(), N);
  std::copy(dx2.begin(), dx2.end(), dx);
  k::layernormBwd(dx, ps.G(li.ln1w), ps.G(li.ln1b), dln1.data(), a.x.data(), ps.P(li.ln1w), a.ln1m.data(),
                  a.ln1r.data(), Nr, C);
}

void Model::forward(int v, int mbi, const float* xin, std::vector<float>& xout) {
  ParamStore& ps = *c_.ps;
  GradSync& sync = *c_.sync;
  const MicroBatch& mb = (*mbs_)[size_t(mbi)];
  const int chunk = chunkOf(v), nChunks = c_.cfg.chunks(), Lc = c_.cfg.layersPerChunk(), L = c_.cfg.layers;
  const int N = mb.rows(), Nr = tp::resRows(c_, N), rf = tp::resFirst(c_, N), C = c_.C;
  const bool z3 = c_.cfg.zero == 3;
  ChunkAct& act = acts_[{v, mbi}];
  act.layers.resize(size_t(Lc));
  std::vector<float> x(size_t(Nr) * C), y(size_t(Nr) * C);
  if (chunk == 0) {
    if (z3) sync.gather(-1);
    std::vector<float> e(size_t(N) * C);
    k::embedFwd(e.data(), mb.tok.data(), ps.P(ps.wte), N, C, c_.vStart, c_.Vl);
    tp::exitFwd(c_, e.data(), x.data(), N);
    k::posFwd(x.data(), ps.P(ps.wpe), mb.pos.data() + rf, Nr, C);
    if (dropping()) {
      const std::vector<float> m = dropoutMask(c_.cfg, mb, -1, 0, rf, Nr);
      for (size_t i = 0; i < x.size(); ++i) x[i] *= m[i];
    }
    if (z3) sync.release(-1);
  } else {
    std::copy(xin, xin + x.size(), x.begin());
  }
  for (int i = 0; i < Lc; ++i) {
    const int l = chunk * Lc + i;
    if (z3) sync.gather(l);
    layerFwd(l, act.layers[size_t(i)], mb, x.data(), y.data());
    if (z3) sync.release(l);
    x.swap(y);
  }
  xout.clear();
  if (chunk + 1 < nChunks) {
    xout.swap(x);
    return;
  }
  // head: final LayerNorm, tied vocab-parallel logits, cross-entropy
  if (z3) sync.gather(L);
  act.xlast = x;
  act.lnf.resize(x.size()), act.lnfm.resize(size_t(Nr)), act.lnfr.resize(size_t(Nr));
  k::layernormFwd(act.lnf.data(), act.lnfm.data(), act.lnfr.data(), x.data(), ps.P(ps.lnfw), ps.P(ps.lnfb), Nr, C);
  if (z3) sync.release(L);
  act.hin.resize(size_t(N) * C);
  tp::enterFwd(c_, act.lnf.data(), act.hin.data(), N);
  act.logits.resize(size_t(N) * c_.Vl);
  k::matmulFwd(act.logits.data(), act.hin.data(), ps.P(ps.wte), static_cast<const float*>(nullptr), N, C, c_.Vl);
  double s = tp::crossEntropyFwd(c_, act.logits.data(), mb.tgt.data(), N, act.rowMax, act.stats);
  if (c_.tr == 0) ceSum += s;
}

void Model::backward(int v, int mbi, const float* dxout, std::vector<float>& dxin) {
  ParamStore& ps = *c_.ps;
  GradSync& sync = *c_.sync;
  const MicroBatch& mb = (*mbs_)[size_t(mbi)];
  const int chunk = chunkOf(v), nChunks = c_.cfg.chunks(), Lc = c_.cfg.layersPerChunk(), L = c_.cfg.layers;
  const int N = mb.rows(), Nr = tp::resRows(c_, N), rf = tp::resFirst(c_, N), C = c_.C;
  const bool z3 = c_.cfg.zero == 3;
  const bool last = ++backwardCount_[size_t(v)] == c_.cfg.microbatches;
  ChunkAct& act = acts_[{v, mbi}];
  std::vector<float> dx(size_t(Nr) * C, 0.f), dprev(size_t(Nr) * C);
  auto dwteOf = [&] { return sync.embScratch(mbi) + ps.tensors[size_t(ps.wte)].offset; };
  if (chunk + 1 == nChunks) {
    float* dwte = dwteOf();
    sync.beforeBackward(L);
    if (z3) sync.gather(L);
    std::vector<float> dlogits(act.logits.size()), dhin(size_t(N) * C, 0.f), dlnf(size_t(Nr) * C, 0.f);
    k::ceBwd(dlogits.data(), act.logits.data(), act.rowMax.data(), act.stats.data(), mb.tgt.data(), N, c_.Vl, c_.vStart,
             ceScale_);
    k::matmulBwd(dhin.data(), dwte, static_cast<float*>(nullptr), dlogits.data(), act.hin.data(), ps.P(ps.wte), N, C,
                 c_.Vl);
    tp::enterBwd(c_, dhin.data(), dlnf.data(), N);
    k::layernormBwd(dx.data(), ps.G(ps.lnfw), ps.G(ps.lnfb), dlnf.data(), act.xlast.data(), ps.P(ps.lnfw),
                    act.lnfm.data(), act.lnfr.data(), Nr, C);
    if (z3) sync.release(L);
    sync.afterBackward(L, last);
    if (c_.mesh->coord[PP] != 0) sync.embDone(mbi);  // this rank has no chunk 0: last use
  } else {
    std::copy(dxout, dxout + dx.size(), dx.begin());
  }
  for (int i = Lc - 1; i >= 0; --i) {
    const int l = chunk * Lc + i;
    sync.beforeBackward(l);
    if (z3) sync.gather(l);
    layerBwd(l, act.layers[size_t(i)], mb, dx.data(), dprev.data());
    if (z3) sync.release(l);
    sync.afterBackward(l, last);
    dx.swap(dprev);
  }
  dxin.clear();
  if (chunk == 0) {
    sync.beforeBackward(-1);
    if (dropping()) {
      const std::vector<float> m = dropoutMask(c_.cfg, mb, -1, 0, rf, Nr);
      for (size_t i = 0; i < dx.size(); ++i) dx[i] *= m[i];
    }
    k::posBwd(ps.G(ps.wpe), dx.data(), mb.pos.data() + rf, Nr, C);
    std::vector<float> dfull(size_t(N) * C);
    tp::exitBwd(c_, dx.data(), dfull.data(), N);
    k::embedBwd(dwteOf(), dfull.data(), mb.tok.data(), N, C, c_.vStart, c_.Vl);
    sync.afterBackward(-1, last);
    sync.embDone(mbi);
  } else {
    dxin.swap(dx);
  }
  acts_.erase({v, mbi});
}

}  // namespace trainer
