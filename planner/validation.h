// validation.h: predictions against published training runs. A validation file (JSON) lists runs:
// the model (a model file's fields inline), the cluster file and node count, the layout used, the
// published throughput (TFLOP/s per GPU under the source's FLOP accounting), and the source. Each
// row's published step time is the source's FLOPs per step over GPUs x TFLOP/s; the error is the
// predicted step time's relative difference from it.
#pragma once

#include <string>
#include <vector>

#include "planner/step_model.h"

namespace strata::planner {

struct ValidationRow {
  std::string name, source, flopsFormula;  ///< flopsFormula: "megatron" (recomputation counted) or "model"
  ModelSpec model;
  HardwareSpec hw;
  Layout layout;
  bool dpOverlap = false;
  double publishedTflops = 0;
  // Results
  double publishedStep = 0, predictedStep = 0, predictedTflops = 0, error = 0;
  Prediction prediction;
};

/// Megatron-LM's FLOPs per step with full recomputation (Narayanan et al. 2021, eq. 3):
/// 96 B s l h^2 (1 + s / 6h + V / 16 l h).
double megatronFlops(const ModelSpec& m);

/// Reads the rows (cluster files relative to `repoRoot` when not absolute).
Status loadValidationFile(const std::string& path, const std::string& repoRoot, std::vector<ValidationRow>* out);
/// Predicts every row and fills the results.
void runValidation(std::vector<ValidationRow>* rows);
/// A Markdown table of the rows with their errors.
std::string validationTable(const std::vector<ValidationRow>& rows);

}  // namespace strata::planner
