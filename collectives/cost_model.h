// cost_model.h: the alpha-beta cost model. Each link class (same process, shared memory, NVLink,
// rail, cross-rail) has a latency and a bandwidth (topology defaults, or the topology file's); the
// communicator's layout says which class joins each pair of ranks and which rail a message between
// nodes takes. Timing a schedule with it (the simulator's timed mode) predicts an algorithm's time
// including contention on shared rails; the tuner picks the fastest, and a planner can reuse it to
// cost whole training steps.
#pragma once

#include <array>
#include <cstddef>

#include "collectives/schedule.h"
#include "collectives/simulator.h"
#include "topology/layout.h"
#include "topology/model.h"

namespace strata {

class CostModel : public LinkModel {
 public:
  using Costs = std::array<topology::LinkCost, topology::kLinkClassCount>;
  CostModel(const topology::CommLayout& layout, const Costs& costs);

  double latency(int a, int b) const override;
  double secondsPerByte(int a, int b) const override;
  int resources(int a, int b, int out[2]) const override;
  int resourceCount() const override { return resources_; }
  double localSecondsPerByte(int r) const override;

  /// Predicted seconds of `algo` on this layout (the simulator's timed mode); a negative value
  /// when the algorithm does not implement the collective or its schedule is invalid.
  double predict(Algo algo, CollType coll, size_t count, size_t elemBytes, int root = 0) const;
  const topology::CommLayout& layout() const { return layout_; }
  const Costs& costs() const { return costs_; }

 private:
  const topology::CommLayout& layout_;
  Costs costs_;
  int rails_ = 1;
  int resources_ = 0;
};

}  // namespace strata
