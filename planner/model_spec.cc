// model_spec.cc: model files (JSON) into ModelSpec, with checked fields (see model_spec.h).
#include "planner/model_spec.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "topology/json_fields.h"

namespace strata::planner {

namespace jsonf = topology::jsonf;
using jsonf::Json;

const char* recomputeName(Recompute r) {
  switch (r) {
    case Recompute::None: return "none";
    case Recompute::Selective: return "selective";
    case Recompute::Full: return "full";
  }
  return "?";
}

double ModelSpec::attentionParams() const {
  const double h = hidden, kv = double(kvHeads) * headDim();
  return h * h * 2 + 2 * h * kv;  // q and output projections, k and v
}

double ModelSpec::mlpParams() const {
  const double one = double(gatedMlp ? 3 : 2) * hidden * double(ffn);
  return moe() ? one * experts + double(hidden) * experts : one;
}

double ModelSpec::embeddingParams() const { return double(vocab) * hidden; }

double ModelSpec::totalParams() const {
  return layers * (attentionParams() + mlpParams()) + embeddingParams() * (tiedEmbeddings ? 1 : 2);
}

double ModelSpec::activeParamsPerToken() const {
  const double mlp = moe() ? double(gatedMlp ? 3 : 2) * hidden * double(ffn) * topk : mlpParams();
  return layers * (attentionParams() + mlp) + embeddingParams();
}

static Status dtypeBytes(const Json& obj, const std::string& key, int* out) {
  std::string s;
  STRATA_RETURN_IF_ERROR(jsonf::optString(obj, "", key, &s));
  if (s.empty()) return OkStatus();
  if (s == "bf16" || s == "fp16") *out = 2;
  else if (s == "fp32") *out = 4;
  else if (s == "fp8") *out = 1;
  else return jsonf::errorAt(key, fmt::format("unknown dtype \"{}\" (expected bf16, fp16, fp32 or fp8)", s));
  return OkStatus();
}

static Status parseFields(const Json& j, ModelSpec* m) {
  STRATA_RETURN_IF_ERROR(jsonf::expectObject(j, ""));
  STRATA_RETURN_IF_ERROR(jsonf::checkKeys(
      j, "", {"version", "name", "description", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq",
              "mlp", "experts", "topk", "tied_embeddings", "dropout", "attention", "param_dtype", "grad_dtype",
              "optimizer_bytes_per_param", "global_batch", "recompute"}));
  for (const char* k : {"version", "layers", "hidden", "heads", "ffn", "vocab", "seq", "global_batch"})
    STRATA_RETURN_IF_ERROR(jsonf::require(j, "", k));
  int version = 0;
  STRATA_RETURN_IF_ERROR(jsonf::optInt(j, "", "version", &version, 1, 1));
  STRATA_RETURN_IF_ERROR(jsonf::optString(j, "", "name", &m->name));
  STRATA_RETURN_IF_ERROR(jsonf::optString(j, "", "description", &m->description));
  STRATA_RETURN_IF_ERROR(jsonf::optInt(j, "", "layers", &m->layers, 1));
  STRATA_RETURN_IF_ERROR(jsonf::optInt(j, "", "hidden", &m->hidden, 1));
  STRATA_RETURN_IF_ERROR(jsonf::optInt(j, "", "heads", &m->heads, 1));
  STRATA_RETURN_IF_ERROR(jsonf::optInt(j, "", "kv_heads", &m->kvHeads, 0));
  double ffn = 0, vocab = 0, batch = 0;
  STRATA_RETURN_IF_ERROR(jsonf::optNumber(j, "", "ffn", &ffn, 0, true));
  STRATA_RETURN_IF_ERROR(jsonf::optNumber(j, "", "vocab", &vocab, 0, true));
  STRATA_RETURN_IF_ERROR(jsonf::optNumber(j, "", "global_batch", &batch, 0, true));
  m->ffn = long(ffn), m->vocab = long(vocab), m->globalBatch = long(batch);
  STRATA_RETURN_IF_ERROR(jsonf::optInt(j, "", "seq", &m->seq, 1));
  std::string mlp = "gelu", attn = "flash", rc;
  STRATA_RETURN_IF_ERROR(jsonf::optString(j, "", "mlp", &mlp));
  if (mlp != "gelu" && mlp != "swiglu") return jsonf::errorAt("mlp", fmt::format("\"{}\" is not gelu or swiglu", mlp));
  m->gatedMlp = mlp == "swiglu";
  STRATA_RETURN_IF_ERROR(jsonf::optInt(j, "", "experts", &m->experts, 0));
  STRATA_RETURN_IF_ERROR(jsonf::optInt(j, "", "topk", &m->topk, 1));
  STRATA_RETURN_IF_ERROR(jsonf::optBool(j, "", "tied_embeddings", &m->tiedEmbeddings));
  STRATA_RETURN_IF_ERROR(jsonf::optBool(j, "", "dropout", &m->dropout));
  STRATA_RETURN_IF_ERROR(jsonf::optString(j, "", "attention", &attn));
  if (attn != "flash" && attn != "unfused")
    return jsonf::errorAt("attention", fmt::format("\"{}\" is not flash or unfused", attn));
  m->flashAttention = attn == "flash";
  STRATA_RETURN_IF_ERROR(dtypeBytes(j, "param_dtype", &m->paramBytes));
  STRATA_RETURN_IF_ERROR(dtypeBytes(j, "grad_dtype", &m->gradBytes));
  STRATA_RETURN_IF_ERROR(jsonf::optInt(j, "", "optimizer_bytes_per_param", &m->optimizerBytes, 0));
  STRATA_RETURN_IF_ERROR(jsonf::optString(j, "", "recompute", &rc));
  if (!rc.empty() && rc != "auto") {
    m->recomputeFixed = true;
    if (rc == "none") m->recompute = Recompute::None;
    else if (rc == "selective") m->recompute = Recompute::Selective;
    else if (rc == "full") m->recompute = Recompute::Full;
    else return jsonf::errorAt("recompute", fmt::format("\"{}\" is not none, selective, full or auto", rc));
  }
  if (m->kvHeads == 0) m->kvHeads = m->heads;
  if (m->hidden % m->heads)
    return jsonf::errorAt("heads", fmt::format("hidden {} is not divisible by heads {}", m->hidden, m->heads));
  if (m->heads % m->kvHeads)
    return jsonf::errorAt("kv_heads", fmt::format("heads {} are not divisible by kv_heads {}", m->heads, m->kvHeads));
  if (m->experts > 0 && (m->topk < 1 || m->topk > m->experts))
    return jsonf::errorAt("topk", fmt::format("{} is not in 1 .. experts ({})", m->topk, m->experts));
  return OkStatus();
}

Status parseModelJson(const std::string& text, const std::string& name, ModelSpec* out) {
  Json j;
  STRATA_RETURN_IF_ERROR(jsonf::parse(text, name, &j));
  ModelSpec m;
  Status st = parseFields(j, &m);
  if (!st.ok()) return invalidArgument("{}: {}", name, st.message());
  m.source = name;
  if (m.name.empty()) m.name = name;
  *out = m;
  return OkStatus();
}

Status loadModelFile(const std::string& path, ModelSpec* out) {
  std::ifstream f(path);
  if (!f) return invalidArgument("{}: cannot open the model file", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return parseModelJson(ss.str(), path, out);
}

}  // namespace strata::planner
