// plan.h: the planner: predict every candidate layout, rank those that fit by step time, and
// report the ranking, the winner against the runner-up, its placement and how to launch it.
#pragma once

#include <string>
#include <vector>

#include "planner/layout.h"
#include "planner/step_model.h"

namespace strata::planner {

struct PlanResult {
  std::vector<Prediction> ranked;    ///< layouts that fit, fastest first
  std::vector<Prediction> rejected;  ///< layouts that do not fit (memory figure in `reject`)
  int candidates = 0;
  int simulations = 0;               ///< cost-model simulations run (fits of group shapes)
  double seconds = 0;                ///< wall time of the plan
};

PlanResult makePlan(const ModelSpec& m, const HardwareSpec& hw, const SearchSpace& space, const StepOptions& opt);

/// The ranking (top `top` rows), rejected count with the smallest rejected figure, the winner's
/// breakdown and placement, and why it beats the runner-up.
std::string planReport(const PlanResult& r, const ModelSpec& m, const HardwareSpec& hw, int top);
/// One layout's breakdown (compute, bubble, each dimension's communication, memory).
std::string predictionDetail(const Prediction& p, const ModelSpec& m, const HardwareSpec& hw);
/// Why `a` is faster than `b`: the terms that differ most.
std::string explainWinner(const Prediction& a, const Prediction& b);
/// strata-train flags reproducing the layout (with the model's shape).
std::string trainerFlags(const Prediction& p, const ModelSpec& m);
/// Per world rank: "rank node local tp cp ep dp pp", node-major placement (the launcher's).
std::string rankTable(const Layout& l, int gpusPerNode);
/// Each group kind's size, count, link classes and nodes (from the group shapes; fast at 16K).
std::string placementSummary(const Layout& l, const HardwareSpec& hw);

}  // namespace strata::planner
