// host.cc: this machine as the planner's hardware for CPU ranks (see host.h).
#include "planner/host.h"

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <vector>

#include "planner/compute_model.h"
#include "planner/step_model.h"
#include "backend.h"  // examples/trainer: the host lane the trainer runs its layers on
#include "params.h"   // examples/trainer: kNormBlock

namespace strata::planner {

namespace {

template <class Fn>
double bestSeconds(int reps, Fn&& fn) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

int usableCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, int(sysconf(_SC_NPROCESSORS_ONLN)));
}

}  // namespace

HostCalibration calibrateHost(const ModelSpec& m) {
  // One layer's four GEMMs (qkv, attention output, MLP up, MLP down) forward and backward at one
  // sequence's tokens, through the trainer's own host lane (its -O3 loops, as it runs them).
  trainer::Ops& ops = trainer::hostOps();
  HostCalibration c;
  c.gemmTokens = int(std::min<long>(m.seq, 512));
  c.gemmIn = int(std::min<long>(m.hidden, 1024));
  c.gemmOut = int(std::min<long>(m.ffn > 0 ? m.ffn : 4 * m.hidden, 4096));
  const int N = c.gemmTokens, H = c.gemmIn, F = c.gemmOut;
  const int shapes[4][2] = {{H, 3 * H}, {H, H}, {H, F}, {F, H}};  // (K, O)
  const size_t most = size_t(std::max(3 * H, F));
  std::vector<float> in(size_t(N) * most, 0.5f), w(most * most, 0.25f), out(size_t(N) * most), dout(size_t(N) * most, 1e-3f),
      din(size_t(N) * most), dw(most * most), db(most);
  double flops = 0;
  for (const auto& kO : shapes) flops += 6.0 * N * kO[0] * kO[1];
  const double seconds = bestSeconds(3, [&] {
    for (const auto& kO : shapes) {
      const int K = kO[0], O = kO[1];
      ops.matmulFwd(out.data(), in.data(), w.data(), db.data(), N, K, O);
      ops.matmulBwdInput(din.data(), dout.data(), w.data(), N, K, O);
      ops.matmulBwdWeight(dw.data(), db.data(), dout.data(), in.data(), N, K, O);
    }
  });
  c.gemmFlops = flops / seconds;
  // Causal attention of one sequence over all heads, forward and backward, as the trainer's
  // context-parallel code calls it (one key block; K and V inside the fused qkv rows).
  const int heads = int(std::max<long>(1, m.heads)), hs = std::max(1, H / heads), T = N;
  std::vector<float> qkv(size_t(T) * 3 * H, 0.1f), att(size_t(T) * H), datt(size_t(T) * H, 1e-3f),
      dqkv(size_t(T) * 3 * H), mx(size_t(T) * heads), l(size_t(T) * heads), lse(size_t(T) * heads), dd(size_t(T) * heads);
  std::vector<int> pos(static_cast<size_t>(T));
  for (int i = 0; i < T; ++i) pos[size_t(i)] = i;
  const double attn = bestSeconds(3, [&] {
    std::fill(mx.begin(), mx.end(), -std::numeric_limits<float>::infinity());
    std::fill(l.begin(), l.end(), 0.f);
    ops.fill(att.data(), 0.f, att.size());
    ops.attnBlockFwd(qkv.data(), 3 * H, pos.data(), T, qkv.data() + H, qkv.data() + 2 * H, 3 * H, pos.data(), T, heads, hs,
                     att.data(), mx.data(), l.data());
    ops.attnFinalize(att.data(), mx.data(), l.data(), lse.data(), T, heads, hs);
    ops.attnBwdPrep(dd.data(), att.data(), datt.data(), T, heads, hs);
    ops.attnBlockBwd(qkv.data(), 3 * H, pos.data(), T, qkv.data() + H, qkv.data() + 2 * H, 3 * H, pos.data(), T, heads,
                     hs, datt.data(), lse.data(), dd.data(), dqkv.data(), dqkv.data() + H, dqkv.data() + 2 * H);
  });
  c.attnFlops = 3.0 * (4.0 * T * T * double(heads * hs) * 0.5) / attn;  // the planner's causal count, fwd + 2x bwd

  // A layer's element-wise work as the trainer runs it (two layer norms, GELU, two residual adds,
  // forward and backward), expressed as the planner's own byte count for it at this rate: on a
  // CPU these loops are bound by their arithmetic (tanh, rsqrt), not by memory.
  const size_t nh = size_t(N) * H, nf = size_t(N) * F;
  std::vector<float> x(nh, 0.5f), y(nh), g(nh, 1e-3f), dx(nh), lw(static_cast<size_t>(H), 1.f), lb(static_cast<size_t>(H)), dlw(static_cast<size_t>(H)),
      dlb(static_cast<size_t>(H)), mean(static_cast<size_t>(N)), rstd(static_cast<size_t>(N)), u(nf, 0.3f), gu(nf), du(nf, 1e-3f);
  const double elem = bestSeconds(3, [&] {
    for (int i = 0; i < 2; ++i) {
      ops.layernormFwd(y.data(), mean.data(), rstd.data(), x.data(), lw.data(), lb.data(), N, H);
      ops.add(y.data(), x.data(), nh);
      ops.layernormBwdInput(dx.data(), g.data(), x.data(), lw.data(), mean.data(), rstd.data(), N, H);
      ops.layernormBwdWeight(dlw.data(), dlb.data(), g.data(), x.data(), mean.data(), rstd.data(), N, H);
      ops.add(dx.data(), g.data(), nh);
    }
    ops.geluFwd(gu.data(), u.data(), nf);
    ops.geluBwd(gu.data(), u.data(), du.data(), nf);
  });
  Layout one;
  c.memBytes = 3.0 * layerForwardElementwiseBytes(m, one, N) / elem;  // the planner counts backward as 2x forward

  // The optimizer step as the trainer runs it over a flat block (the gradient norm's block sums,
  // then AdamW), in the planner's optimizer byte count (gradient, master, two moments, weights)
  // per parameter.
  const size_t n = size_t(1) << 20;
  std::vector<float> p(n, 0.1f), gr(n, 1e-3f), m1(n), m2(n);
  std::vector<uint8_t> decay(n, 1), counted(n, 1);
  std::vector<double> sums(n / trainer::kNormBlock + 1);
  const trainer::math::AdamArgs args{1.f, 0.9f, 0.95f, 0.1f, 0.05f, 1e-4f, 0.1f, 1e-8f};
  const double adam = bestSeconds(3, [&] {
    ops.normBlocks(sums.data(), gr.data(), counted.data(), n, trainer::kNormBlock);
    ops.adamw(p.data(), gr.data(), m1.data(), m2.data(), decay.data(), n, args);
  });
  c.optimizerBytes = double(n) * (m.gradBytes + 2.0 * m.optimizerBytes + m.paramBytes) / adam;
  return c;
}

HardwareSpec hostHardware(int ranks, int cores, const HostCalibration& cal, const HostNetwork& net) {
  HardwareSpec h;
  h.nodes = std::max(net.nodes, 1);
  h.gpusPerNode = std::max(ranks / h.nodes, 1);
  h.rails = h.nodes > 1 ? std::max(net.rails, 1) : 0;
  h.sharedCores = cores > 0 ? cores : usableCpus();
  h.gpuName = "CPU rank";
  h.peakFlops = cal.gemmFlops;
  h.matmulEfficiency = 1.0;  // measured, not a peak
  h.attentionFlops = cal.attnFlops;
  h.hbmBytesPerSec = cal.memBytes;
  h.hbmEfficiency = 1.0;
  h.optimizerBytesPerSec = cal.optimizerBytes;
  const double ram = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  h.memoryBytes = ram / std::max(ranks, 1);
  for (int k = 0; k < topology::kLinkClassCount; ++k)
    h.costs[size_t(k)] = topology::defaultLinkCost(static_cast<topology::LinkClass>(k));
  std::string network = "1 machine";
  if (h.nodes > 1) {
    for (auto c : {topology::LinkClass::Rail, topology::LinkClass::CrossRail}) {
      topology::LinkCost& lc = h.costs[size_t(c)];
      lc.latencyUs = net.latencyUs;
      if (net.railBitsPerSec > 0) lc.bandwidthGBps = net.railBitsPerSec / 8 * kTcpPayloadShare / 1e9;
    }
    network = fmt::format("virtual cluster of {} nodes x {} ranks, {} rail{} of {} ({:.4f} GB/s payload, {:g} us)",
                          h.nodes, h.gpusPerNode, h.rails, h.rails == 1 ? "" : "s",
                          net.railBitsPerSec > 0 ? fmt::format("{:g} Mbit/s", net.railBitsPerSec / 1e6) : "unshaped",
                          h.costs[size_t(topology::LinkClass::Rail)].bandwidthGBps, net.latencyUs);
  }
  h.description = fmt::format("{}, {} CPU ranks sharing {:.0f} cores; one core: {:.2f} GFLOP/s in the trainer's "
                              "layer GEMMs ({} tokens, hidden {}, ffn {}), {:.2f} GFLOP/s in its attention, {:.1f} GB/s "
                              "element-wise, {:.1f} GB/s in its optimizer",
                              network, ranks, h.sharedCores, cal.gemmFlops / 1e9, cal.gemmTokens, cal.gemmIn, cal.gemmOut,
                              cal.attnFlops / 1e9, cal.memBytes / 1e9, cal.optimizerBytes / 1e9);
  return h;
}

double oneRankStep(const ModelSpec& m, const HostCalibration& cal) {
  StepModel sm(m, hostHardware(1, 1, cal));
  Layout one;
  return sm.predict(one, true).step;
}

}  // namespace strata::planner
