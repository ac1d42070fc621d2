// grad_check_test.cc: every layer's backward against central finite differences (in double), the
// block (ring) attention against a plain reference, the schedules' shape, and the whole model's
// gradient (one rank, float) against finite differences of its loss.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "dp.h"
#include "kernels.h"
#include "model.h"
#include "pp.h"
#include "strata/strata.hpp"
#include "tp.h"

namespace {

using V = std::vector<double>;
using namespace trainer;

V randn(size_t n, std::mt19937& g, double s = 1.0) {
  std::normal_distribution<double> d(0, s);
  V v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// Loss = sum(out * R) for a fixed random R; checks d loss / d x for every element of x.
void checkGrad(const char* what, V& x, const V& analytic, const std::function<double()>& loss, double tol = 1e-6) {
  const double eps = 1e-6;
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + eps;
    const double lp = loss();
    x[i] = keep - eps;
    const double lm = loss();
    x[i] = keep;
    const double fd = (lp - lm) / (2 * eps);
    ASSERT_NEAR(analytic[i], fd, tol * (1 + std::abs(fd))) << what << " element " << i;
  }
}

double dot(const V& a, const V& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

TEST(KernelGrad, Matmul) {
  std::mt19937 g(1);
  const int N = 3, K = 4, O = 5;
  V in = randn(N * K, g), w = randn(O * K, g), b = randn(O, g), R = randn(N * O, g), out(N * O);
  auto loss = [&] {
    k::matmulFwd(out.data(), in.data(), w.data(), b.data(), N, K, O);
    return dot(out, R);
  };
  V din(in.size(), 0), dw(w.size(), 0), db(b.size(), 0);
  k::matmulBwd(din.data(), dw.data(), db.data(), R.data(), in.data(), w.data(), N, K, O);
  checkGrad("matmul din", in, din, loss);
  checkGrad("matmul dw", w, dw, loss);
  checkGrad("matmul db", b, db, loss);
}

TEST(KernelGrad, LayerNorm) {
  std::mt19937 g(2);
  const int N = 3, C = 6;
  V x = randn(N * C, g), w = randn(C, g), b = randn(C, g), R = randn(N * C, g), out(N * C), mean(N), rstd(N);
  auto loss = [&] {
    k::layernormFwd(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    return dot(out, R);
  };
  loss();
  V dx(x.size(), 0), dw(C, 0), db(C, 0);
  k::layernormBwd(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C);
  checkGrad("layernorm dx", x, dx, loss);
  checkGrad("layernorm dw", w, dw, loss);
  checkGrad("layernorm db", b, db, loss);
}

TEST(KernelGrad, Gelu) {
  std::mt19937 g(3);
  V x = randn(20, g, 2.0), R = randn(20, g), out(20);
  auto loss = [&] {
    k::geluFwd(out.data(), x.data(), x.size());
    return dot(out, R);
  };
  V dx(20, 0);
  k::geluBwd(dx.data(), x.data(), R.data(), x.size());
  checkGrad("gelu", x, dx, loss);
}

TEST(KernelGrad, EmbeddingAndPositions) {
  std::mt19937 g(4);
  const int N = 5, C = 3, Vl = 4, vStart = 2;
  std::vector<int> tok = {2, 5, 0, 3, 2}, pos = {0, 1, 2, 0, 1};
  V wte = randn(Vl * C, g), wpe = randn(3 * C, g), R = randn(N * C, g), out(N * C);
  auto loss = [&] {
    k::embedFwd(out.data(), tok.data(), wte.data(), N, C, vStart, Vl);
    k::posFwd(out.data(), wpe.data(), pos.data(), N, C);
    return dot(out, R);
  };
  V dwte(wte.size(), 0), dwpe(wpe.size(), 0);
  k::embedBwd(dwte.data(), R.data(), tok.data(), N, C, vStart, Vl);
  k::posBwd(dwpe.data(), R.data(), pos.data(), N, C);
  checkGrad("wte", wte, dwte, loss);
  checkGrad("wpe", wpe, dwpe, loss);
}

TEST(KernelGrad, CrossEntropy) {
  std::mt19937 g(5);
  const int N = 4, Vv = 7;
  std::vector<int> tgt = {1, -1, 6, 0};
  V logits = randn(N * Vv, g), mx(N), st(2 * N);
  auto loss = [&] {
    k::ceLocalMax(mx.data(), logits.data(), N, Vv);
    k::ceLocalStats(st.data(), logits.data(), mx.data(), tgt.data(), N, Vv, 0);
    double s = 0;
    for (int n = 0; n < N; ++n)
      if (tgt[n] >= 0) s += std::log(st[2 * n]) - st[2 * n + 1];
    return s * 0.5;
  };
  loss();
  V d(logits.size());
  k::ceBwd(d.data(), logits.data(), mx.data(), st.data(), tgt.data(), N, Vv, 0, 0.5);
  checkGrad("cross-entropy", logits, d, loss);
}

TEST(KernelGrad, Softmax) {
  std::mt19937 g(6);
  const int N = 3, E = 4;
  V x = randn(N * E, g), R = randn(N * E, g), p(N * E);
  auto loss = [&] {
    k::softmaxFwd(p.data(), x.data(), N, E);
    return dot(p, R);
  };
  loss();
  V dx(x.size());
  k::softmaxBwd(dx.data(), p.data(), R.data(), N, E);
  checkGrad("softmax", x, dx, loss);
}

// Causal attention over two heads, keys split into two blocks with interleaved positions (the
// shape ring attention sees under context parallelism).
struct AttnSetup {
  int Nq = 6, H = 2, hs = 3;
  std::vector<int> qpos = {0, 1, 2, 9, 10, 11}, k1 = {0, 1, 2}, k2 = {9, 10, 11};
  V q, k, v;  // q: (Nq, H*hs); k, v: (Nq, H*hs) with the same rows as q
  explicit AttnSetup(std::mt19937& g) : q(randn(6 * 6, g)), k(randn(6 * 6, g)), v(randn(6 * 6, g)) {}
  int C() const { return H * hs; }
  V forward(V* lse = nullptr) {
    V o(size_t(Nq) * C(), 0), m(size_t(Nq) * H, -INFINITY), l(size_t(Nq) * H, 0), ls(size_t(Nq) * H);
    k::attnBlockFwd(q.data(), C(), qpos.data(), Nq, k.data() + 3 * C(), v.data() + 3 * C(), C(), k2.data(), 3, H, hs,
                    o.data(), m.data(), l.data());
    k::attnBlockFwd(q.data(), C(), qpos.data(), Nq, k.data(), v.data(), C(), k1.data(), 3, H, hs, o.data(), m.data(),
                    l.data());
    k::attnFinalize(o.data(), m.data(), l.data(), ls.data(), Nq, H, hs);
    if (lse) *lse = ls;
    return o;
  }
};

TEST(KernelGrad, BlockAttentionMatchesReference) {
  std::mt19937 g(7);
  AttnSetup a(g);
  V o = a.forward(), ref(o.size());
  k::attnReference(ref.data(), a.q.data(), a.C(), a.qpos.data(), a.Nq, a.k.data(), a.v.data(), a.C(), a.qpos.data(),
                   a.Nq, a.H, a.hs);
  for (size_t i = 0; i < o.size(); ++i) EXPECT_NEAR(o[i], ref[i], 1e-12) << i;
}

TEST(KernelGrad, BlockAttentionBackward) {
  std::mt19937 g(8);
  AttnSetup a(g);
  V R = randn(size_t(a.Nq) * a.C(), g), lse;
  V o = a.forward(&lse);
  V Dd(size_t(a.Nq) * a.H), dq(a.q.size(), 0), dk(a.k.size(), 0), dv(a.v.size(), 0);
  k::attnBwdPrep(Dd.data(), o.data(), R.data(), a.Nq, a.H, a.hs);
  for (int blk = 0; blk < 2; ++blk) {
    const int off = blk * 3 * a.C();
    k::attnBlockBwd(a.q.data(), a.C(), a.qpos.data(), a.Nq, a.k.data() + off, a.v.data() + off, a.C(),
                    (blk ? a.k2 : a.k1).data(), 3, a.H, a.hs, R.data(), lse.data(), Dd.data(), dq.data(),
                    dk.data() + off, dv.data() + off);
  }
  auto loss = [&] { return dot(a.forward(), R); };
  checkGrad("attention dq", a.q, dq, loss);
  checkGrad("attention dk", a.k, dk, loss);
  checkGrad("attention dv", a.v, dv, loss);
}

TEST(Schedules, EveryActionOnceAndBubbleFormula) {
  for (const char* s : {"gpipe", "1f1b", "interleaved"}) {
    Config c;
    c.pp = 4, c.microbatches = 8, c.schedule = s, c.virtualStages = std::string(s) == "interleaved" ? 2 : 1;
    for (int st = 0; st < c.pp; ++st) {
      auto acts = scheduleFor(c, st);
      ASSERT_EQ(int(acts.size()), 2 * c.microbatches * c.virtualStages) << s;
      std::set<std::tuple<bool, int, int>> seen;
      for (auto& a : acts) seen.insert({a.fwd, a.mb, a.v});
      EXPECT_EQ(seen.size(), acts.size()) << s;
    }
  }
  Config c;
  c.pp = 4, c.microbatches = 8;
  EXPECT_NEAR(theoreticalBubble(c), 3.0 / 11.0, 1e-12);
}

// Every valid (schedule, pp, microbatches, virtual stages) completes, every forward of chunk c+1
// runs after chunk c's, and each rank's transfers pair up (one send, one receive per transfer).
TEST(Schedules, SimulationCompletesWithoutStall) {
  for (const char* s : {"gpipe", "1f1b", "interleaved"})
    for (int P = 1; P <= 4; ++P)
      for (int M = 1; M <= 9; ++M)
        for (int V = 1; V <= 3; ++V) {
          Config c;
          c.pp = P, c.microbatches = M, c.schedule = s, c.virtualStages = V, c.layers = P * V, c.batch = M;
          if (!validate(c, P).empty()) continue;
          std::vector<int> ticks;
          std::vector<std::vector<Transfer>> xfers;
          ASSERT_NO_THROW(simulateSchedule(c, 0, &ticks, &xfers)) << s << " P" << P << " M" << M << " V" << V;
          size_t n = 0;
          for (auto& t : xfers) n += t.size();
          EXPECT_EQ(n, size_t(2 * M * (P * V - 1))) << s << " P" << P << " M" << M << " V" << V;
        }
}

TEST(Validation, RefusesBadLayouts) {
  Config c;
  c.tp = 3;
  EXPECT_NE(validate(c, 3).find("heads 4 are not divisible by tp 3"), std::string::npos);
  c = Config{};
  EXPECT_NE(validate(c, 2).find("world size 2"), std::string::npos);
  c = Config{};
  c.pp = 2, c.microbatches = 1;
  EXPECT_NE(validate(c, 2).find("1f1b needs microbatches >= pp"), std::string::npos);
  c = Config{};
  c.pp = 2, c.layers = 3, c.microbatches = 2;
  EXPECT_NE(validate(c, 2).find("layers 3 are not divisible"), std::string::npos);
  c = Config{};
  c.experts = 3, c.ep = 2;
  EXPECT_NE(validate(c, 2).find("experts 3 are not divisible by ep 2"), std::string::npos);
  c = Config{};
  c.tp = 2, c.vocab = 63;
  EXPECT_NE(validate(c, 2).find("vocab 63 is not divisible by tp 2"), std::string::npos);
  EXPECT_EQ(validate(Config{}, 1), "");
}

// The whole model on one rank: analytic gradient of the loss against finite differences of the
// loss itself, for the largest-gradient elements of every tensor (dense and MoE).
void wholeModelCheck(Config cfg) {
  std::vector<strata::Communicator> comms = strata::Communicator::threads(1);
  Mesh mesh = buildMesh(cfg, comms[0]);
  Data data(cfg);
  ParamStore ps;
  buildStore(ps, cfg, mesh, 0);
  Ctx c;
  c.init(cfg, mesh, ps, data);
  GradSync sync(c);
  c.sync = &sync;
  Model model(c);
  Pipeline pipe(c, model);
  std::vector<MicroBatch> mbs;
  for (int mb = 0; mb < cfg.microbatches; ++mb) mbs.push_back(makeMicroBatch(data, cfg, mesh, 0, mb));
  const double scored = double(cfg.batch) * double(data.scoredPerSequence());
  auto run = [&] {
    sync.beginStep(cfg.microbatches);
    model.beginStep(&mbs, scored);
    pipe.run(mbs[0].rows());
    sync.finish();
    return model.ceSum / scored + model.auxSum / cfg.microbatches;
  };
  run();
  std::vector<float> grads[NCLS];
  for (int k = 0; k < NCLS; ++k) grads[k] = ps.cls[k].grad;
  int checked = 0;
  for (const TensorSpec& t : ps.tensors) {
    const float* g = grads[t.cls].data() + t.offset;
    std::vector<size_t> order(t.size());
    for (size_t j = 0; j < order.size(); ++j) order[j] = j;
    std::partial_sort(order.begin(), order.begin() + std::min<size_t>(2, order.size()), order.end(),
                      [&](size_t a, size_t b) { return std::abs(g[a]) > std::abs(g[b]); });
    for (size_t n = 0; n < std::min<size_t>(2, order.size()); ++n) {
      const size_t j = order[n];
      float* p = ps.cls[t.cls].param.data() + t.offset + j;
      const float keep = *p, eps = 1e-2f;
      *p = keep + eps;
      const double lp = run();
      *p = keep - eps;
      const double lm = run();
      *p = keep;
      const double fd = (lp - lm) / (2.0 * eps);
      EXPECT_NEAR(g[j], fd, 2e-3 + 0.05 * std::abs(fd)) << t.name << " element " << j;
      ++checked;
    }
  }
  EXPECT_GT(checked, 20);
}

TEST(ModelGrad, DenseWholeModel) {
  Config cfg;
  cfg.layers = 2, cfg.hidden = 16, cfg.heads = 2, cfg.seq = 8, cfg.vocab = 16, cfg.batch = 2, cfg.microbatches = 2;
  wholeModelCheck(cfg);
}

// Dropout 0.1 with the mask fixed (it depends only on seed, step, sequence, layer, site, position,
// feature): the loss is smooth in the parameters and its gradient must match finite differences.
TEST(ModelGrad, DenseWholeModelDropout) {
  Config cfg;
  cfg.layers = 2, cfg.hidden = 16, cfg.heads = 2, cfg.seq = 8, cfg.vocab = 16, cfg.batch = 2, cfg.microbatches = 2;
  cfg.dropout = 0.1f;
  wholeModelCheck(cfg);
}

TEST(ModelGrad, MoEWholeModelDropout) {
  Config cfg;
  cfg.layers = 1, cfg.hidden = 16, cfg.heads = 2, cfg.seq = 8, cfg.vocab = 16, cfg.batch = 2;
  cfg.experts = 4, cfg.topk = 4, cfg.auxCoef = 0.5f, cfg.dropout = 0.1f;
  wholeModelCheck(cfg);
}

// A sequence-parallel slice of the mask is exactly the same rows of the full mask, positions are
// global (a CP layout with permuted positions sees the same elements), and about p are dropped.
TEST(Dropout, MaskIsGlobalAndHasRateP) {
  Config cfg;
  cfg.hidden = 32, cfg.dropout = 0.25f;
  MicroBatch mb;
  mb.b = 2, mb.Tl = 8, mb.step = 3, mb.seq0 = 5;
  for (int s = 0; s < 2; ++s)
    for (int t = 0; t < 8; ++t) mb.pos.push_back(t);
  const std::vector<float> full = dropoutMask(cfg, mb, 1, 2, 0, 16);
  const std::vector<float> half = dropoutMask(cfg, mb, 1, 2, 8, 8);
  EXPECT_TRUE(std::equal(half.begin(), half.end(), full.begin() + 8 * 32));
  MicroBatch perm = mb;  // positions reversed: row r of perm is row (7 - r) of mb
  for (int s = 0; s < 2; ++s)
    for (int t = 0; t < 8; ++t) perm.pos[size_t(s * 8 + t)] = 7 - t;
  const std::vector<float> pm = dropoutMask(cfg, perm, 1, 2, 0, 16);
  for (int f = 0; f < 32; ++f) EXPECT_EQ(pm[size_t(2 * 32 + f)], full[size_t(5 * 32 + f)]);
  size_t zeros = 0;
  for (float v : full) {
    zeros += v == 0.f;
    if (v != 0.f) {
      EXPECT_FLOAT_EQ(v, 1.f / 0.75f);
    }
  }
  EXPECT_NEAR(double(zeros) / double(full.size()), 0.25, 0.06);
  EXPECT_NE(full, dropoutMask(cfg, mb, 1, 1, 0, 16));  // sites differ
}

TEST(ModelGrad, MoEWholeModel) {
  Config cfg;
  cfg.layers = 1, cfg.hidden = 16, cfg.heads = 2, cfg.seq = 8, cfg.vocab = 16, cfg.batch = 2;
  // top-k = E: every expert is used, so no routing decision can flip under the perturbation (the
  // loss is then smooth); router, gates, experts and the load-balancing term are all exercised.
  cfg.experts = 4, cfg.topk = 4, cfg.auxCoef = 0.5f;
  wholeModelCheck(cfg);
}

}  // namespace
