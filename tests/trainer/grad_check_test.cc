// grad_check_test.cc: every layer's backward against central finite differences (in double), the
// block (ring) attention against a plain reference, the schedules' shape (and ZB-H1's dependencies,
// peak in-flight microbatches and bubble), the per-step breakdown of spans, the whole model's
// gradient (one rank, float) against finite differences of its loss, and the zero-bubble split
// producing exactly 1F1B's gradients on two pipeline ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "dp.h"
#include "kernels.h"
#include "model.h"
#include "pp.h"
#include "strata/strata.hpp"
#include "schedule.h"
#include "tp.h"
#include "trace.h"

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

// The B and W halves of the linear and LayerNorm backward give exactly the whole backward's results.
TEST(KernelGrad, SplitBackwardEqualsWhole) {
  std::mt19937 g(7);
  auto f = [&](size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = float(std::normal_distribution<double>(0, 1)(g));
    return v;
  };
  const int N = 5, K = 19, O = 13;
  std::vector<float> in = f(N * K), w = f(O * K), d = f(N * O), din = f(N * K), dw = f(O * K), db = f(O);
  std::vector<float> din2 = din, dw2 = dw, db2 = db;
  k::matmulBwd(din.data(), dw.data(), db.data(), d.data(), in.data(), w.data(), N, K, O);
  k::matmulBwdInput(din2.data(), d.data(), w.data(), N, K, O);
  k::matmulBwdWeight(dw2.data(), db2.data(), d.data(), in.data(), N, K, O);
  EXPECT_EQ(din, din2);
  EXPECT_EQ(dw, dw2);
  EXPECT_EQ(db, db2);
  std::vector<float> x = f(N * K), lw = f(K), dout = f(N * K), mean(N), rstd(N), out(N * K), lb = f(K);
  k::layernormFwd(out.data(), mean.data(), rstd.data(), x.data(), lw.data(), lb.data(), N, K);
  std::vector<float> dx = f(N * K), gw = f(K), gb = f(K);
  std::vector<float> dx2 = dx, gw2 = gw, gb2 = gb;
  k::layernormBwd(dx.data(), gw.data(), gb.data(), dout.data(), x.data(), lw.data(), mean.data(), rstd.data(), N, K);
  k::layernormBwdInput(dx2.data(), dout.data(), x.data(), lw.data(), mean.data(), rstd.data(), N, K);
  k::layernormBwdWeight(gw2.data(), gb2.data(), dout.data(), x.data(), mean.data(), rstd.data(), N, K);
  EXPECT_EQ(dx, dx2);
  EXPECT_EQ(gw, gw2);
  EXPECT_EQ(gb, gb2);
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
  for (const char* s : {"gpipe", "1f1b", "interleaved", "zb"}) {
    Config c;
    c.pp = 4, c.microbatches = 8, c.schedule = s, c.virtualStages = std::string(s) == "interleaved" ? 2 : 1;
    const int passes = std::string(s) == "zb" ? 3 : 2;  // F, B (and W)
    for (int st = 0; st < c.pp; ++st) {
      auto acts = scheduleFor(c, st);
      ASSERT_EQ(int(acts.size()), passes * c.microbatches * c.virtualStages) << s;
      std::set<std::tuple<char, int, int>> seen;
      for (auto& a : acts) seen.insert({char(a.op), a.mb, a.v});
      EXPECT_EQ(seen.size(), acts.size()) << s;
    }
  }
  Config c;
  c.pp = 4, c.microbatches = 8;
  EXPECT_NEAR(theoreticalBubble(c), 3.0 / 11.0, 1e-12);
  c.schedule = "zb";
  EXPECT_NEAR(theoreticalBubble(c), 3.0 / 27.0, 1e-12);
}

// Every valid (schedule, pp, microbatches, virtual stages) completes, every forward of chunk c+1
// runs after chunk c's, and each rank's transfers pair up (one send, one receive per transfer).
TEST(Schedules, SimulationCompletesWithoutStall) {
  for (const char* s : {"gpipe", "1f1b", "interleaved", "zb"})
    for (int P = 1; P <= 4; ++P)
      for (int M = 1; M <= 9; ++M)
        for (int V = 1; V <= 3; ++V) {
          Config c;
          c.pp = P, c.microbatches = M, c.schedule = s, c.virtualStages = V, c.layers = P * V, c.batch = M;
          if (!validate(c, P).empty()) continue;
          std::vector<int> ticks;
          std::vector<std::vector<Transfer>> xfers;
          ASSERT_NO_THROW(simulateSchedule(c, 0, &ticks, &xfers)) << s << " P" << P << " M" << M << " V" << V;
          ASSERT_NO_THROW(simulateTimeline(c)) << s << " P" << P << " M" << M << " V" << V;
          size_t n = 0;
          for (auto& t : xfers) n += t.size();
          EXPECT_EQ(n, size_t(2 * M * (P * V - 1))) << s << " P" << P << " M" << M << " V" << V;
        }
}

// ZB-H1's lists on every stage: each microbatch's F, B and W once, B after F, W after B, W in
// microbatch order (so gradients are summed in 1F1B's order); on the timed simulation (F = B = W
// = 1) a B never starts before the next stage's B of the same microbatch has ended.
TEST(ZeroBubble, DependenciesHold) {
  for (int P = 2; P <= 4; ++P)
    for (int M = P; M <= 9; ++M) {
      Config c;
      c.pp = P, c.microbatches = M, c.schedule = "zb";
      ASSERT_TRUE(splitBackward(c));
      const Timeline tl = simulateTimeline(c);
      std::map<std::pair<char, std::pair<int, int>>, double> start, end;  // (op, (stage, mb))
      for (int s = 0; s < P; ++s) {
        const std::vector<Action> acts = scheduleFor(c, s);
        std::map<int, int> fAt, bAt, wAt;
        int lastW = -1;
        for (int i = 0; i < int(acts.size()); ++i) {
          const Action& a = acts[size_t(i)];
          auto& at = a.op == Op::F ? fAt : a.op == Op::B ? bAt : wAt;
          EXPECT_EQ(at.count(a.mb), 0u) << "P" << P << " M" << M << " stage " << s;
          at[a.mb] = i;
          if (a.op == Op::W) {
            EXPECT_EQ(a.mb, lastW + 1);
            lastW = a.mb;
          }
        }
        for (int m = 0; m < M; ++m) {
          ASSERT_TRUE(fAt.count(m) && bAt.count(m) && wAt.count(m)) << "P" << P << " M" << M << " stage " << s;
          EXPECT_LT(fAt[m], bAt[m]);
          EXPECT_LT(bAt[m], wAt[m]);
        }
        for (const TimedPass& p : tl.stages[size_t(s)]) {
          const Action& a = acts[size_t(p.index)];
          start[{char(a.op), {s, a.mb}}] = p.start, end[{char(a.op), {s, a.mb}}] = p.end;
        }
      }
      for (int s = 0; s + 1 < P; ++s)
        for (int m = 0; m < M; ++m) {
          const double bStart = start[{'B', {s, m}}], bNext = end[{'B', {s + 1, m}}];
          const double fNext = start[{'F', {s + 1, m}}], fEnd = end[{'F', {s, m}}];
          EXPECT_GE(bStart, bNext) << "P" << P << " M" << M;
          EXPECT_GE(fNext, fEnd) << "P" << P << " M" << M;
        }
    }
}

// ZB-H1 holds at most as many microbatches' activations as 1F1B's peak (p, on stage 0), and
// reaches it; a microbatch is held from its F until its W.
TEST(ZeroBubble, PeakInFlightEqualsOneFOneB) {
  for (int P = 2; P <= 4; ++P)
    for (int M = P; M <= 9; ++M) {
      Config c;
      c.pp = P, c.microbatches = M;
      const std::vector<int> base = peakInFlight(c);
      c.schedule = "zb";
      const std::vector<int> zb = peakInFlight(c);
      EXPECT_EQ(base[0], P);
      EXPECT_EQ(*std::max_element(zb.begin(), zb.end()), *std::max_element(base.begin(), base.end()))
          << "P" << P << " M" << M;
      for (int s = 0; s < P; ++s) EXPECT_EQ(base[size_t(s)], P - s);
    }
}

// Timed simulation at F = B = W = 1 (an unsplit backward costs 2): 1F1B and GPipe idle 3(p-1)
// units per stage, bubble (p-1)/(m+p-1); ZB-H1 idles p-1 units, a third, bubble (p-1)/(3m+p-1).
TEST(ZeroBubble, SimulatedBubbleIsAThirdOfOneFOneB) {
  for (int P = 2; P <= 4; ++P)
    for (int M = P; M <= 12; ++M) {
      Config c;
      c.pp = P, c.microbatches = M;
      auto idle = [](const Timeline& t, int stages, double work) { return t.makespan - work / stages; };
      const Timeline one = simulateTimeline(c);
      EXPECT_NEAR(one.bubble(), theoreticalBubble(c), 1e-12) << "1f1b P" << P << " M" << M;
      EXPECT_NEAR(idle(one, P, 3.0 * M * P), 3.0 * (P - 1), 1e-9);
      c.schedule = "gpipe";
      EXPECT_NEAR(simulateTimeline(c).bubble(), theoreticalBubble(c), 1e-12) << "gpipe P" << P << " M" << M;
      c.schedule = "zb";
      const Timeline zb = simulateTimeline(c);
      EXPECT_NEAR(zb.bubble(), double(P - 1) / (3.0 * M + P - 1), 1e-12) << "zb P" << P << " M" << M;
      EXPECT_NEAR(zb.bubble(), theoreticalBubble(c), 1e-12);
      EXPECT_NEAR(idle(zb, P, 3.0 * M * P), idle(one, P, 3.0 * M * P) / 3.0, 1e-9) << "zb P" << P << " M" << M;
    }
}

TEST(ZeroBubble, DrawnGrid) {
  Config c;
  c.pp = 2, c.microbatches = 4, c.schedule = "zb";
  const std::string g = drawSchedule(c);
  EXPECT_NE(g.find("stage 1 "), std::string::npos) << g;
  EXPECT_NE(g.find("W3"), std::string::npos) << g;
  EXPECT_NE(g.find("bubble 0.077 (formula 0.077)"), std::string::npos) << g;
  EXPECT_NE(g.find("peak in-flight microbatches per stage: 2 2"), std::string::npos) << g;
  c.schedule = "1f1b";  // an unsplit backward takes two columns, the second in lower case
  EXPECT_NE(drawSchedule(c).find("b0"), std::string::npos);
}

// The per-step breakdown from spans: exposed = training-thread collectives and waits, bubble =
// pipeline transfers, overlap = the communication thread's calls during B/W passes.
TEST(Trace, BreakdownOfSpans) {
  std::vector<Span> s = {
      {0.0, 10.0, Lane::Main, Kind::Phase, 0, "pipeline", ""},
      {0.0, 2.0, Lane::Main, Kind::Pass, 'F', "F mb 0", ""},
      {1.0, 1.5, Lane::Main, Kind::Collective, 0, "all_reduce", ""},  // inside the forward
      {2.0, 3.0, Lane::Main, Kind::Pipe, 0, "send/recv", ""},
      {3.0, 5.0, Lane::Main, Kind::Pass, 'B', "B mb 0", ""},
      {5.0, 7.0, Lane::Main, Kind::Pass, 'W', "W mb 0", ""},
      {4.0, 8.0, Lane::Comm, Kind::Collective, 0, "all_reduce", ""},  // 3 of 4 during B/W
      {10.0, 11.0, Lane::Main, Kind::GradWait, 0, "wait", ""},
      {-1.0, 0.5, Lane::Main, Kind::Collective, 0, "before the step", ""},
  };
  const StepBreakdown b = breakdown(s, 0.0, 12.0);
  EXPECT_DOUBLE_EQ(b.wall, 12.0);
  EXPECT_DOUBLE_EQ(b.passes, 6.0);
  EXPECT_DOUBLE_EQ(b.exposed, 1.5);
  EXPECT_DOUBLE_EQ(b.bubble, 1.0);
  EXPECT_DOUBLE_EQ(b.reduce, 4.0);
  EXPECT_DOUBLE_EQ(b.overlap, 3.0);
  EXPECT_DOUBLE_EQ(b.compute(), 9.5);
  EXPECT_DOUBLE_EQ(b.bubbleFraction(), 0.4);
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
  c.schedule = "zb";
  EXPECT_NE(validate(c, 2).find("zb needs microbatches >= pp"), std::string::npos);
  c.microbatches = 2, c.experts = 2;
  EXPECT_NE(validate(c, 2).find("zb splits the backward of dense layers only"), std::string::npos);
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
  for (int k = 0; k < NCLS; ++k) grads[k] = ps.cls[k].grad.vec();
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

// One step's reduced gradients (every class, every rank) of a pipeline layout run as threads.
std::vector<std::vector<float>> stepGradients(const Config& cfg) {
  const int n = cfg.worldSize();
  std::vector<strata::Communicator> comms = strata::Communicator::threads(n);
  std::vector<std::vector<float>> out(static_cast<size_t>(n));
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      Mesh mesh = buildMesh(cfg, comms[size_t(r)]);
      Data data(cfg);
      ParamStore ps;
      buildStore(ps, cfg, mesh, cfg.zero);
      Ctx c;
      c.init(cfg, mesh, ps, data);
      GradSync sync(c);
      c.sync = &sync;
      Model model(c);
      Pipeline pipe(c, model);
      std::vector<MicroBatch> mbs;
      for (int mb = 0; mb < cfg.microbatches; ++mb) mbs.push_back(makeMicroBatch(data, cfg, mesh, 0, mb));
      sync.beginStep(cfg.microbatches);
      model.beginStep(&mbs, double(cfg.batch) * double(data.scoredPerSequence()));
      pipe.run(tp::resRows(c, mbs[0].rows()));
      sync.finish();
      for (int k = 0; k < NCLS; ++k) out[size_t(r)].insert(out[size_t(r)].end(), ps.cls[k].grad.vec().begin(), ps.cls[k].grad.vec().end());
    });
  for (auto& t : ts) t.join();
  return out;
}

// ZB-H1 hands the gradient clipping and the optimizer exactly 1F1B's gradients: two pipeline
// stages x two data ranks (buckets reduced by the communication thread), with dropout, and with
// tensor + sequence parallelism; every element of every rank's reduced gradient is equal.
TEST(ZeroBubble, SameGradientsAsOneFOneB) {
  for (int variant = 0; variant < 2; ++variant) {
    Config cfg;
    cfg.layers = 4, cfg.hidden = 16, cfg.heads = 2, cfg.seq = 8, cfg.vocab = 16, cfg.batch = 8;
    cfg.pp = 2, cfg.microbatches = 4;
    if (variant == 0) cfg.dp = 2, cfg.dropout = 0.1f;
    else cfg.tp = 2, cfg.sp = true;
    ASSERT_EQ(validate(cfg, cfg.worldSize()), "");
    const auto base = stepGradients(cfg);
    cfg.schedule = "zb";
    const auto zb = stepGradients(cfg);
    for (size_t r = 0; r < base.size(); ++r) {
      ASSERT_FALSE(base[r].empty());
      EXPECT_EQ(base[r], zb[r]) << "variant " << variant << " rank " << r;
      EXPECT_GT(*std::max_element(base[r].begin(), base[r].end()), 0.f);
    }
  }
}

}  // namespace

// ---- the compute seam (backend.h): the host lane and the math the CUDA lane shares ----------------

namespace trainer {
namespace {

std::vector<float> randomVec(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = initNormal(seed, "seam", i);
  return v;
}

// The CUDA kernels sum columns one thread per column over rows in ascending order (layer_math.h's
// *Col functions); run on the host they must give kernels.h's row-loop results bitwise.
TEST(Seam, ColumnFunctionsEqualTheHostLoops) {
  const int N = 7, C = 12, V = 5;
  const std::vector<float> d = randomVec(size_t(N) * C, 1), x = randomVec(size_t(N) * C, 2);
  std::vector<float> mean(N), rstd(N), ln(size_t(N) * C), w = randomVec(C, 3), b = randomVec(C, 4);
  k::layernormFwd(ln.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  std::vector<float> dw1(C, 0.5f), db1(C, -0.25f), dw2 = dw1, db2 = db1;
  k::layernormBwdWeight(dw1.data(), db1.data(), d.data(), x.data(), mean.data(), rstd.data(), N, C);
  for (int c = 0; c < C; ++c) math::layernormBwdWeightCol(dw2.data(), db2.data(), d.data(), x.data(), mean.data(), rstd.data(), N, C, c);
  EXPECT_EQ(dw1, dw2);
  EXPECT_EQ(db1, db2);
  std::vector<float> bb1(C, 1.f), bb2 = bb1;
  k::biasBwd(bb1.data(), d.data(), N, C);
  for (int c = 0; c < C; ++c) math::biasBwdCol(bb2.data(), d.data(), N, C, c);
  EXPECT_EQ(bb1, bb2);
  const std::vector<int> tok = {3, 1, 3, 7, 0, 4, 3}, pos = {0, 2, 1, 2, 0, 1, 2};  // repeats sum in order
  std::vector<float> e1(size_t(V) * C, 0.f), e2 = e1, p1(size_t(3) * C, 0.f), p2 = p1;
  k::embedBwd(e1.data(), d.data(), tok.data(), N, C, 1, V);
  k::posBwd(p1.data(), d.data(), pos.data(), N, C);
  for (int c = 0; c < C; ++c) {
    math::embedBwdCol(e2.data(), d.data(), tok.data(), N, C, 1, V, c);
    math::posBwdCol(p2.data(), d.data(), pos.data(), N, C, c);
  }
  EXPECT_EQ(e1, e2);
  EXPECT_EQ(p1, p2);
  EXPECT_NE(e1, std::vector<float>(e1.size(), 0.f));
}

// The CUDA attention backward runs two passes (dq per (query, head), dk and dv per (key, head))
// over math::attnPair; on the host they must equal kernels.h's single loop bitwise.
TEST(Seam, TwoPassAttentionBackwardEqualsTheHostLoop) {
  const int Nq = 6, Nk = 6, H = 2, hs = 4, C = H * hs;
  const std::vector<float> q = randomVec(size_t(Nq) * C, 5), kk = randomVec(size_t(Nk) * C, 6),
                           v = randomVec(size_t(Nk) * C, 7), dO = randomVec(size_t(Nq) * C, 8);
  const std::vector<int> qpos = {0, 5, 1, 4, 2, 3}, kpos = {0, 1, 2, 3, 4, 5};
  std::vector<float> o(size_t(Nq) * C, 0.f), m(size_t(Nq) * H, -INFINITY), l(size_t(Nq) * H, 0.f), lse(size_t(Nq) * H),
      Dd(size_t(Nq) * H);
  k::attnBlockFwd(q.data(), C, qpos.data(), Nq, kk.data(), v.data(), C, kpos.data(), Nk, H, hs, o.data(), m.data(), l.data());
  k::attnFinalize(o.data(), m.data(), l.data(), lse.data(), Nq, H, hs);
  k::attnBwdPrep(Dd.data(), o.data(), dO.data(), Nq, H, hs);
  std::vector<float> dq1(size_t(Nq) * C, 0.f), dk1(size_t(Nk) * C, 0.f), dv1(size_t(Nk) * C, 0.f), dq2 = dq1, dk2 = dk1,
                                                dv2 = dv1;
  k::attnBlockBwd(q.data(), C, qpos.data(), Nq, kk.data(), v.data(), C, kpos.data(), Nk, H, hs, dO.data(), lse.data(),
                  Dd.data(), dq1.data(), dk1.data(), dv1.data());
  const float scale = 1.f / std::sqrt(float(hs));
  for (int i = 0; i < Nq; ++i)
    for (int h = 0; h < H; ++h)
      for (int j = 0; j < Nk; ++j) {
        if (kpos[j] > qpos[i]) continue;
        float p, ds;
        const size_t ih = size_t(i) * H + h;
        math::attnPair(&q[size_t(i) * C + h * hs], &kk[size_t(j) * C + h * hs], &v[size_t(j) * C + h * hs], &dO[ih * hs],
                       hs, scale, lse[ih], Dd[ih], &p, &ds);
        for (int d = 0; d < hs; ++d) dq2[size_t(i) * C + h * hs + d] += ds * kk[size_t(j) * C + h * hs + d];
      }
  for (int j = 0; j < Nk; ++j)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < Nq; ++i) {
        if (kpos[j] > qpos[i]) continue;
        float p, ds;
        const size_t ih = size_t(i) * H + h;
        math::attnPair(&q[size_t(i) * C + h * hs], &kk[size_t(j) * C + h * hs], &v[size_t(j) * C + h * hs], &dO[ih * hs],
                       hs, scale, lse[ih], Dd[ih], &p, &ds);
        for (int d = 0; d < hs; ++d) {
          dv2[size_t(j) * C + h * hs + d] += p * dO[ih * hs + d];
          dk2[size_t(j) * C + h * hs + d] += ds * q[size_t(i) * C + h * hs + d];
        }
      }
  EXPECT_EQ(dq1, dq2);
  EXPECT_EQ(dk1, dk2);
  EXPECT_EQ(dv1, dv2);
}

// The host lane is kernels.h (so the CPU path is unchanged), and host Bufs behave as vectors.
TEST(Seam, HostLaneRunsTheHostKernelsAndBufsAreVectors) {
  std::unique_ptr<Ops> ops = makeOps(Device::Host, 0);
  ASSERT_FALSE(ops->device());
  EXPECT_EQ(ops->stream(), nullptr);
  const int N = 5, K = 9, O = 7;
  const std::vector<float> in = randomVec(size_t(N) * K, 9), w = randomVec(size_t(O) * K, 10), bias = randomVec(O, 11),
                           d = randomVec(size_t(N) * O, 12);
  std::vector<float> a(size_t(N) * O), b(size_t(N) * O);
  k::matmulFwd(a.data(), in.data(), w.data(), bias.data(), N, K, O);
  ops->matmulFwd(b.data(), in.data(), w.data(), bias.data(), N, K, O);
  EXPECT_EQ(a, b);
  std::vector<float> g1(size_t(O) * K, 0.f), g2 = g1, gb1(O, 0.f), gb2 = gb1;
  k::matmulBwdWeight(g1.data(), gb1.data(), d.data(), in.data(), N, K, O);
  ops->matmulBwdWeight(g2.data(), gb2.data(), d.data(), in.data(), N, K, O);
  EXPECT_EQ(g1, g2);
  EXPECT_EQ(gb1, gb2);
  // AdamW and the norm blocks: the optimizer's arithmetic through the lane.
  std::vector<float> p(128, 0.5f), gr = randomVec(128, 13), mm(128, 0.f), vv(128, 0.f);
  std::vector<uint8_t> decay(128, 1), count(128, 1);
  count[3] = 0;
  ops->adamw(p.data(), gr.data(), mm.data(), vv.data(), decay.data(), p.size(), {1.f, 0.9f, 0.95f, 0.1f, 0.05f, 1e-3f, 0.1f, 1e-8f});
  EXPECT_NE(p[0], 0.5f);
  double blocks[2];
  ops->normBlocks(blocks, gr.data(), count.data(), 128, 64);
  double want = 0;
  for (int i = 0; i < 64; ++i)
    if (i != 3) want += double(gr[size_t(i)]) * double(gr[size_t(i)]);
  EXPECT_EQ(blocks[0], want);
  // Bufs on the host lane: vector semantics, zero-filled growth, deep copies.
  UseOps use(ops.get());
  Buf x(4);
  EXPECT_FALSE(x.onDevice());
  x.vec() = {1, 2, 3, 4};
  x.resize(6);
  EXPECT_EQ(x.vec(), (std::vector<float>{1, 2, 3, 4, 0, 0}));
  Buf y = x;
  y.vec()[0] = 9;
  EXPECT_EQ(x.vec()[0], 1.f);
  EXPECT_EQ(y.toHost()[0], 9.f);
}

TEST(Seam, CudaDeviceRefusedWhereUnavailable) {
  Config c;
  c.device = "cuda", c.experts = 4;
  EXPECT_NE(validate(c, 1).find("--device cuda runs dense models only"), std::string::npos);
  c = Config{};
  c.device = "cuda", c.save = "/tmp/x";
  EXPECT_NE(validate(c, 1).find("cannot --save or --load"), std::string::npos);
  const std::string why = deviceUnavailable(Device::Cuda);
  EXPECT_EQ(deviceUnavailable(Device::Host), "");
  if (why.empty()) GTEST_SKIP() << "a CUDA device is present: nothing to refuse";
  EXPECT_NE(why.find("--device cuda"), std::string::npos) << why;
  EXPECT_THROW(makeOps(Device::Cuda, 0), std::runtime_error);
}

}  // namespace
}  // namespace trainer
