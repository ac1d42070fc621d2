// layout.h: one candidate parallel layout of a training job (tp, cp, ep, dp, pp sizes, rank order,
// pipeline schedule and virtual stages, microbatch size, ZeRO stage, recomputation), its checks
// against the model and cluster, and the enumeration of every candidate.
#pragma once

#include <string>
#include <vector>

#include "collectives/parallel_groups.h"
#include "planner/hardware.h"
#include "planner/model_spec.h"

namespace strata::planner {

enum class PipeSchedule { GPipe, OneFOneB, Interleaved, ZeroBubble };
const char* scheduleName(PipeSchedule s);  ///< the trainer's names: gpipe, 1f1b, interleaved, zb

struct Layout {
  int tp = 1, cp = 1, ep = 1, dp = 1, pp = 1;
  int vp = 1;      ///< virtual stages (model chunks) per pipeline rank
  int mbs = 1;     ///< sequences per microbatch
  PipeSchedule schedule = PipeSchedule::OneFOneB;
  int zero = 1;    ///< 0: replicated optimizer, 1: optimizer states sharded over dp (distributed
                   ///< optimizer), 2: + gradients, 3: + weights
  bool sp = true;  ///< sequence parallelism with tp > 1 (reduce-scatter/all-gather instead of all-reduce)
  Recompute recompute = Recompute::None;
  std::string order = kDefaultRankOrder;
  /// MoE with tp > 1: every tp rank holds its experts whole and runs them on its own
  /// sequence-parallel slice of the tokens (expert tensor parallelism 1: no tensor-parallel
  /// collectives around the experts, expert gradients reduced over tp too), as the reference
  /// trainer does; false: experts split over tp like the dense MLP.
  bool wholeExperts = false;

  int world() const { return tp * cp * ep * dp * pp; }
  /// Microbatches per pipeline per step.
  long microbatches(const ModelSpec& m) const { return m.globalBatch / (long(dp) * ep * mbs); }
  ParallelSpec spec() const;
  /// "tp8 cp1 ep1 dp64 pp16 v1 mbs1 1f1b zero1 rc=full", then " order tp-cp-ep-pp-dp" when the
  /// rank order is not the default.
  std::string describe() const;
};

/// Empty when `l` can run the model on `world` GPUs, else the first reason.
std::string checkLayout(const Layout& l, const ModelSpec& m, int world, int gpusPerNode);

struct SearchSpace {
  std::vector<int> zeroStages{0, 1, 3};
  std::vector<int> mbsChoices{1, 2, 4, 8};
  std::vector<int> virtualStages{2, 4};
  bool allSchedules = true;  ///< else 1f1b and interleaved only
  int maxTp = 0;             ///< 0: GPUs per node
  int maxCp = 0;             ///< 0: seq / 2048 (context parallelism for long sequences only)
  /// MoE layouts with tp > 1 hold their experts whole on every tp rank (Layout::wholeExperts).
  bool wholeExperts = false;
  /// Rank orders tried besides the default (tp-cp-ep-dp-pp, Megatron's): pipeline stages inside
  /// the data-parallel replicas (tp-cp-ep-pp-dp, Llama 3's order), kept only where it changes the
  /// shape of some group (which nodes and GPUs it spans).
  bool searchOrders = true;
};

/// The rank order with the pipeline inside the data-parallel dimension.
constexpr const char* kPipelineInsideDataOrder = "tp-cp-ep-pp-dp";

/// Every layout of the search space that passes checkLayout.
std::vector<Layout> enumerateLayouts(const ModelSpec& m, int world, int gpusPerNode, const SearchSpace& space);

}  // namespace strata::planner
