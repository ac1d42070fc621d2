// validation.cc: validation files and their table (see validation.h).
#include "planner/validation.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "topology/json_fields.h"

namespace strata::planner {

namespace jsonf = topology::jsonf;
using jsonf::Json;

double megatronFlops(const ModelSpec& m) {
  const double B = double(m.globalBatch), s = m.seq, l = m.layers, h = m.hidden, V = double(m.vocab);
  return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
}

static Status parseLayout(const Json& j, const std::string& path, Layout* l) {
  STRATA_RETURN_IF_ERROR(jsonf::checkKeys(j, path, {"tp", "cp", "ep", "dp", "pp", "vp", "mbs", "schedule", "zero", "sp",
                                                    "recompute"}));
  STRATA_RETURN_IF_ERROR(jsonf::optInt(j, path, "tp", &l->tp, 1));
  STRATA_RETURN_IF_ERROR(jsonf::optInt(j, path, "cp", &l->cp, 1));
  STRATA_RETURN_IF_ERROR(jsonf::optInt(j, path, "ep", &l->ep, 1));
  STRATA_RETURN_IF_ERROR(jsonf::optInt(j, path, "dp", &l->dp, 1));
  STRATA_RETURN_IF_ERROR(jsonf::optInt(j, path, "pp", &l->pp, 1));
  STRATA_RETURN_IF_ERROR(jsonf::optInt(j, path, "vp", &l->vp, 1));
  STRATA_RETURN_IF_ERROR(jsonf::optInt(j, path, "mbs", &l->mbs, 1));
  STRATA_RETURN_IF_ERROR(jsonf::optInt(j, path, "zero", &l->zero, 0, 3));
  l->sp = l->tp > 1;
  STRATA_RETURN_IF_ERROR(jsonf::optBool(j, path, "sp", &l->sp));
  std::string sched = "1f1b", rc = "none";
  STRATA_RETURN_IF_ERROR(jsonf::optString(j, path, "schedule", &sched));
  if (sched == "gpipe") l->schedule = PipeSchedule::GPipe;
  else if (sched == "1f1b") l->schedule = PipeSchedule::OneFOneB;
  else if (sched == "interleaved") l->schedule = PipeSchedule::Interleaved;
  else if (sched == "zb") l->schedule = PipeSchedule::ZeroBubble;
  else return jsonf::errorAt(jsonf::member(path, "schedule"), fmt::format("unknown schedule \"{}\"", sched));
  STRATA_RETURN_IF_ERROR(jsonf::optString(j, path, "recompute", &rc));
  if (rc == "none") l->recompute = Recompute::None;
  else if (rc == "selective") l->recompute = Recompute::Selective;
  else if (rc == "full") l->recompute = Recompute::Full;
  else return jsonf::errorAt(jsonf::member(path, "recompute"), fmt::format("unknown recompute \"{}\"", rc));
  return OkStatus();
}

static Status parseRows(const Json& j, const std::string& repoRoot, std::vector<ValidationRow>* out) {
  STRATA_RETURN_IF_ERROR(jsonf::checkKeys(j, "", {"version", "description", "runs"}));
  STRATA_RETURN_IF_ERROR(jsonf::require(j, "", "runs"));
  STRATA_RETURN_IF_ERROR(jsonf::expectArray(j["runs"], "runs"));
  for (size_t i = 0; i < j["runs"].size(); ++i) {
    const Json& r = j["runs"][i];
    const std::string path = jsonf::element("runs", i);
    STRATA_RETURN_IF_ERROR(jsonf::expectObject(r, path));
    STRATA_RETURN_IF_ERROR(jsonf::checkKeys(r, path, {"name", "source", "model", "cluster", "nodes", "layout",
                                                      "dp_overlap", "published_tflops_per_gpu", "flops"}));
    for (const char* k : {"model", "cluster", "nodes", "layout", "published_tflops_per_gpu", "source"})
      STRATA_RETURN_IF_ERROR(jsonf::require(r, path, k));
    ValidationRow row;
    STRATA_RETURN_IF_ERROR(jsonf::optString(r, path, "name", &row.name));
    STRATA_RETURN_IF_ERROR(jsonf::optString(r, path, "source", &row.source));
    row.flopsFormula = "model";
    STRATA_RETURN_IF_ERROR(jsonf::optString(r, path, "flops", &row.flopsFormula));
    STRATA_RETURN_IF_ERROR(jsonf::optBool(r, path, "dp_overlap", &row.dpOverlap));
    STRATA_RETURN_IF_ERROR(jsonf::optNumber(r, path, "published_tflops_per_gpu", &row.publishedTflops, 0, true));
    Status st = parseModelJson(r["model"].dump(), jsonf::member(path, "model"), &row.model);
    if (!st.ok()) return st;
    std::string cluster;
    int nodes = 0;
    STRATA_RETURN_IF_ERROR(jsonf::optString(r, path, "cluster", &cluster));
    STRATA_RETURN_IF_ERROR(jsonf::optInt(r, path, "nodes", &nodes, 1));
    if (!cluster.empty() && cluster[0] != '/') cluster = repoRoot + "/" + cluster;
    STRATA_RETURN_IF_ERROR(loadClusterFile(cluster, &row.hw));
    row.hw.setNodes(nodes);
    STRATA_RETURN_IF_ERROR(parseLayout(r["layout"], jsonf::member(path, "layout"), &row.layout));
    const std::string bad = checkLayout(row.layout, row.model, row.hw.gpus(), row.hw.gpusPerNode);
    if (!bad.empty()) return jsonf::errorAt(jsonf::member(path, "layout"), bad);
    out->push_back(std::move(row));
  }
  return OkStatus();
}

Status loadValidationFile(const std::string& path, const std::string& repoRoot, std::vector<ValidationRow>* out) {
  std::ifstream f(path);
  if (!f) return invalidArgument("{}: cannot open the validation file", path);
  std::stringstream ss;
  ss << f.rdbuf();
  Json j;
  STRATA_RETURN_IF_ERROR(jsonf::parse(ss.str(), path, &j));
  Status st = parseRows(j, repoRoot, out);
  if (!st.ok()) return invalidArgument("{}: {}", path, st.message());
  return OkStatus();
}

void runValidation(std::vector<ValidationRow>* rows) {
  for (ValidationRow& r : *rows) {
    StepOptions opt;
    opt.dpOverlap = r.dpOverlap;
    StepModel sm(r.model, r.hw, opt);
    r.prediction = sm.predict(r.layout, true);
    const double flops = r.flopsFormula == "megatron" ? megatronFlops(r.model) : modelFlopsPerStep(r.model);
    r.publishedStep = flops / (double(r.hw.gpus()) * r.publishedTflops * 1e12);
    r.predictedStep = r.prediction.step;
    r.predictedTflops = r.predictedStep > 0 ? flops / (double(r.hw.gpus()) * r.predictedStep) / 1e12 : 0;
    r.error = r.predictedStep > 0 ? (r.predictedStep - r.publishedStep) / r.publishedStep : 0;
  }
}

std::string validationTable(const std::vector<ValidationRow>& rows) {
  std::string s = "| run | GPUs | layout | published TFLOP/s/GPU | step (published) | predicted TFLOP/s/GPU | step (predicted) | "
                  "error | memory/GPU | source |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const ValidationRow& r : rows)
    s += fmt::format("| {} | {} | {} | {:.0f} | {:.2f} s | {:.0f} | {:.2f} s | {:+.1f}% | {:.1f} GiB{} | {} |\n", r.name,
                     r.hw.gpus(), r.layout.describe(), r.publishedTflops, r.publishedStep, r.predictedTflops,
                     r.predictedStep, 100 * r.error, r.prediction.memory.total() / double(1ull << 30),
                     r.prediction.fits ? "" : " (over)", r.source);
  return s;
}

}  // namespace strata::planner
