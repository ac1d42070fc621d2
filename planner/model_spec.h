// model_spec.h: the model a plan is made for (a transformer: layers, widths, heads, vocabulary,
// sequence, experts, dtypes, batch, recomputation), read from a model file (JSON, planner/models/).
// docs/PLANNER.md describes the format; every error names the file and the JSON path.
#pragma once

#include <string>

#include "transport/status.h"

namespace strata::planner {

enum class Recompute { None, Selective, Full };
const char* recomputeName(Recompute r);  ///< "none", "selective", "full"

struct ModelSpec {
  std::string name, description, source;
  int layers = 0, hidden = 0, heads = 0, kvHeads = 0;  ///< kvHeads 0 in the file: = heads
  long ffn = 0;                 ///< MLP width (per expert for MoE)
  long vocab = 0;
  int seq = 0;
  bool gatedMlp = false;        ///< "mlp": "swiglu" (3 matrices) or "gelu" (2)
  int experts = 0, topk = 1;    ///< experts 0: dense
  bool tiedEmbeddings = false;
  bool dropout = false;         ///< dropout masks stored (GPT-3-era training)
  bool flashAttention = true;   ///< "attention": "flash" or "unfused" (scores in memory)
  int paramBytes = 2;           ///< bf16 weights and activations
  int gradBytes = 4;            ///< main gradients (fp32 in Megatron); also the reduction dtype
  int optimizerBytes = 12;      ///< Adam: fp32 master weights, first and second moment
  long globalBatch = 0;         ///< sequences per step
  bool recomputeFixed = false;  ///< the file names one; else the planner tries all three
  Recompute recompute = Recompute::None;

  bool moe() const { return experts > 0; }
  int headDim() const { return hidden / heads; }
  /// Parameters of one layer's attention (q, k, v, output projections), MLP or experts (all
  /// experts, with the router), and of the embedding and output layer.
  double attentionParams() const;
  double mlpParams() const;  ///< all experts + router for MoE
  double embeddingParams() const;  ///< one vocab x hidden matrix
  double totalParams() const;
  double activeParamsPerToken() const;  ///< dense parts + topk experts (for MFU and FLOPs)
};

/// Reads a model file. On failure the message names the file and the field.
Status loadModelFile(const std::string& path, ModelSpec* out);
Status parseModelJson(const std::string& text, const std::string& name, ModelSpec* out);

}  // namespace strata::planner
