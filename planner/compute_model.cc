// compute_model.cc: per-layer compute time from FLOPs and memory traffic (see compute_model.h).
#include "planner/compute_model.h"

#include <cmath>
#include <vector>

namespace strata::planner {

double layerForwardFlops(const ModelSpec& m, double tokens, int tp, double* attnCore) {
  const double h = m.hidden;
  const double proj = 2 * tokens * m.attentionParams();
  const double core = 4 * tokens * double(m.seq) * h * (m.flashAttention ? 0.5 : 1.0);  // flash skips masked blocks
  const double mats = m.gatedMlp ? 3 : 2;
  double mlp = 2 * tokens * mats * h * double(m.ffn) * (m.moe() ? m.topk : 1);
  if (m.moe()) mlp += 2 * tokens * h * m.experts;  // router
  if (attnCore) *attnCore = core / tp;
  return (proj + core + mlp) / tp;
}

double layerForwardElementwiseBytes(const ModelSpec& m, const Layout& l, double tokens) {
  const double h = m.hidden, t = l.tp;
  const double seqSplit = l.sp ? t : 1.0;  // norms, residuals, dropout: split over tp with SP
  double elems = (4 + 6 + (m.dropout ? 9 : 0)) * tokens * h / seqSplit;
  const double act = (m.gatedMlp ? 3.0 : 2.0) * tokens * double(m.ffn) * (m.moe() ? m.topk : 1) / t;
  const double kv = double(m.kvHeads) * m.headDim();
  elems += act + 2 * tokens * (h + 2 * kv) / t;  // activation function; bias/rotary on q, k, v
  if (!m.flashAttention)
    elems += (4.0 + (m.dropout ? 2.0 : 0.0)) * tokens * double(m.seq) * (m.heads / t);  // scores: softmax, dropout
  return elems * m.paramBytes;
}

PassCost layerCost(const ModelSpec& m, const Layout& l, const HardwareSpec& hw) {
  const double tokens = double(l.mbs) * m.seq / l.cp;
  double core = 0;
  const double flops = layerForwardFlops(m, tokens, l.tp, &core);
  const double rate = hw.peakFlops * hw.matmulEfficiency, bw = hw.hbmBytesPerSec * hw.hbmEfficiency;
  const double elem = layerForwardElementwiseBytes(m, l, tokens) / bw;
  const double scores = m.flashAttention ? 0 : (4.0 + (m.dropout ? 2.0 : 0.0)) * tokens * m.seq * (m.heads / l.tp) *
                                                   m.paramBytes / bw;
  const double gemm = (flops - core) / rate, attn = core / hw.attentionRate();
  PassCost c;
  c.fwd = gemm + attn + elem;
  // Backward: input gradients (all GEMMs once, attention scores twice) and weight gradients
  // (the weight GEMMs once); element-wise traffic twice the forward's.
  c.bwdInput = gemm + 2 * attn + 2 * elem;
  c.bwdWeight = gemm;
  if (l.recompute == Recompute::Full) c.bwdInput += c.fwd;
  if (l.recompute == Recompute::Selective) c.bwdInput += attn + scores;
  return c;
}

double expertForwardSeconds(const ModelSpec& m, const Layout& l, const HardwareSpec& hw) {
  if (!m.moe()) return 0;
  const double tokens = double(l.mbs) * m.seq / l.cp;
  const double mats = m.gatedMlp ? 3 : 2;
  return 2 * tokens * mats * m.hidden * double(m.ffn) * m.topk / l.tp / (hw.peakFlops * hw.matmulEfficiency);
}

// E[max of n standard normals] = integral of x * n * phi(x) * Phi(x)^(n-1) dx (midpoint rule).
static double expectedMaxOfNormals(int n) {
  constexpr double kPi = 3.14159265358979323846;
  double e = 0;
  const double lo = -8, hi = 8, dx = 1.0 / 64;
  for (double x = lo + dx / 2; x < hi; x += dx) {
    const double phi = std::exp(-x * x / 2) / std::sqrt(2 * kPi), cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    e += x * n * phi * std::pow(cdf, n - 1) * dx;
  }
  return e;
}

double expertImbalance(int ep, double assignments) {
  if (ep <= 1 || assignments <= 0) return 1;
  static const std::vector<double> table = [] {  // a plan asks for the same few ep sizes thousands of times
    std::vector<double> t(257);
    for (int n = 1; n <= 256; ++n) t[size_t(n)] = expectedMaxOfNormals(n);
    return t;
  }();
  const double emax = ep <= 256 ? table[size_t(ep)] : expectedMaxOfNormals(ep);
  const double mean = assignments / ep;
  return 1 + emax * std::sqrt((1 - 1.0 / ep) / mean);
}

PassCost logitsCost(const ModelSpec& m, const Layout& l, const HardwareSpec& hw) {
  const double tokens = double(l.mbs) * m.seq / l.cp;
  const double flops = 2 * tokens * m.hidden * double(m.vocab) / l.tp;
  const double rate = hw.peakFlops * hw.matmulEfficiency, bw = hw.hbmBytesPerSec * hw.hbmEfficiency;
  const double softmax = 4.0 * 3 * tokens * double(m.vocab) / l.tp / bw;  // fp32 logits: read, write, grad
  PassCost c;
  c.fwd = flops / rate + softmax / 2;
  c.bwdInput = flops / rate + softmax / 2;
  c.bwdWeight = flops / rate;
  return c;
}

double optimizerSeconds(double localParams, const Layout& l, const ModelSpec& m, const HardwareSpec& hw) {
  // Adam: read gradient, master, two moments; write master, two moments, bf16 weights.
  const double bytes = localParams * (m.gradBytes + 2.0 * m.optimizerBytes + m.paramBytes);
  const double shard = l.zero >= 1 ? double(l.dp) * l.cp * l.ep : 1.0;
  const double rate = hw.optimizerBytesPerSec > 0 ? hw.optimizerBytesPerSec : hw.hbmBytesPerSec * hw.hbmEfficiency;
  return bytes / shard / rate;
}

double modelFlopsPerStep(const ModelSpec& m) {
  const double tokens = double(m.globalBatch) * m.seq;
  return tokens * (6 * m.activeParamsPerToken() + 12.0 * m.layers * m.hidden * m.seq);
}

}  // namespace strata::planner
