// memory_model.cc: per-GPU memory of a layout (see memory_model.h).
#include "planner/memory_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace strata::planner {

static constexpr double kGiB = double(1ull << 30);

std::string MemoryBreakdown::describe() const {
  return fmt::format("{:.1f} GiB = weights {:.1f} + grads {:.1f} + optimizer {:.1f} + activations {:.1f} + logits {:.1f} "
                     "+ reserve {:.1f}",
                     total() / kGiB, weights / kGiB, grads / kGiB, optimizer / kGiB, activations / kGiB,
                     logits / kGiB, reserve / kGiB);
}

double layerActivationBytes(const ModelSpec& m, const Layout& l) {
  const double tokens = double(l.mbs) * m.seq / l.cp, h = m.hidden, t = l.tp;
  const double seqSplit = l.sp ? t : 1.0;
  if (l.recompute == Recompute::Full) return 2.0 * tokens * h / seqSplit;  // the layer's input only
  const double kv = double(m.kvHeads) * m.headDim();
  const double drop = m.dropout ? 1.0 : 0.0;
  // In units of tokens * h bytes (bf16 = 2 bytes per element): what the backward reads.
  const double replicated = 4 /*two norm inputs*/ + 2 /*qkv input*/ + 2 /*mlp input*/ + 2 * drop /*masks*/;
  const double act = (m.gatedMlp ? 6.0 : 4.0) * double(m.ffn) / h * (m.moe() ? m.topk : 1);
  double split = 2 /*q*/ + 4 * kv / h /*k, v*/ + 2 /*projection input*/ + act;
  const bool scores = !m.flashAttention && l.recompute == Recompute::None;
  if (scores) split += (m.dropout ? 5.0 : 2.0) * m.heads * double(m.seq) / h;
  return tokens * h * (replicated / seqSplit + split / t) * (m.paramBytes / 2.0);
}

static int stageLayers(const ModelSpec& m, const Layout& l, int stage) {
  const int base = m.layers / l.pp, extra = m.layers % l.pp;
  return base + (stage < extra ? 1 : 0);
}

static double layerExpertParams(const ModelSpec& m, const Layout& l) {
  if (!m.moe()) return 0;
  const double experts = m.mlpParams() - double(m.hidden) * m.experts;  // the router is dense
  return experts / (double(l.wholeExperts ? 1 : l.tp) * l.ep);
}

double layerParams(const ModelSpec& m, const Layout& l) {
  const double dense = m.attentionParams() + (m.moe() ? double(m.hidden) * m.experts : m.mlpParams());
  return dense / l.tp + layerExpertParams(m, l);
}

double stageExpertParams(const ModelSpec& m, const Layout& l, int stage) {
  return stageLayers(m, l, stage) * layerExpertParams(m, l);
}

double stageParams(const ModelSpec& m, const Layout& l, int stage) {
  double p = stageLayers(m, l, stage) * layerParams(m, l);
  const double emb = m.embeddingParams() / l.tp;
  if (stage == 0) p += emb;
  if (stage == l.pp - 1 && !(m.tiedEmbeddings && l.pp == 1)) p += emb;
  return p;
}

double memoryReserve(const HardwareSpec& hw) { return 0.05 * hw.memoryBytes + 2 * kGiB; }

MemoryBreakdown memoryPerGpu(const ModelSpec& m, const Layout& l, const HardwareSpec& hw, int inFlightChunks) {
  MemoryBreakdown b;
  // The heaviest stage: the first (embedding, most activations in flight) or the last (output layer).
  const double p0 = stageParams(m, l, 0), pLast = stageParams(m, l, l.pp - 1);
  b.localParams = std::max(p0, pLast);
  b.localExpertParams = stageExpertParams(m, l, p0 >= pLast ? 0 : l.pp - 1);
  const double shard = double(l.dp) * l.cp * l.ep;  // data-parallel replicas of dense weights
  b.weights = b.localParams * m.paramBytes / (l.zero >= 3 ? shard : 1.0);
  if (l.zero >= 3) {  // two layers gathered at a time (the current one and the prefetched one)
    b.weights += 2 * layerParams(m, l) * m.paramBytes;
  }
  b.grads = b.localParams * m.gradBytes / (l.zero >= 2 ? shard : 1.0);
  b.optimizer = b.localParams * m.optimizerBytes / (l.zero >= 1 ? shard : 1.0);
  const int chunks = l.pp * l.vp;
  const double layersPerChunk = std::ceil(double(m.layers) / chunks);
  b.activations = inFlightChunks * layersPerChunk * layerActivationBytes(m, l);
  if (l.recompute == Recompute::Full) {  // one layer's full activations while it is recomputed
    Layout none = l;
    none.recompute = Recompute::None;
    b.activations += layerActivationBytes(m, none);
  }
  const double tokens = double(l.mbs) * m.seq / l.cp;
  // fp32 logits and their gradient (last stage; counted with the first stage's activations, a
  // conservative sum when pp > 1).
  b.logits = 2 * 4.0 * tokens * double(m.vocab) / l.tp;
  b.reserve = memoryReserve(hw);
  return b;
}

}  // namespace strata::planner
