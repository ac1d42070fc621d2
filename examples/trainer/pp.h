// pp.h: the pipeline executor: runs this rank's part of a schedule (schedule.h) over send/recv.
//
// Every rank simulates all ranks' pass lists in unit ticks (schedule.h), which yields, per tick,
// what this rank computes and which activations/gradients cross between neighbours at the end of
// the tick. Each tick's transfers run as one strata group (sends and receives together), so no
// ordering of blocking calls can deadlock, and both sides of every transfer agree on it by
// construction. F runs a chunk's forward; B its backward (only the input gradient in a schedule
// with W passes, zb); W its weight gradients.
#pragma once

#include <vector>

#include "context.h"
#include "model.h"
#include "schedule.h"

namespace trainer {

class Pipeline {
 public:
  /// Simulates the schedule (throws std::logic_error if it cannot complete).
  Pipeline(Ctx& c, Model& m);
  /// Runs this rank's part of one step's schedule.
  void run(int rowsPerMicro);
  int ticks() const { return int(tickAction_.size()); }

 private:
  Ctx& c_;
  Model& model_;
  bool split_;
  std::vector<Action> mine_;
  std::vector<int> tickAction_;                  // this rank's action index per tick, or -1
  std::vector<std::vector<Transfer>> tickMsgs_;  // every transfer at the end of each tick
};

}  // namespace trainer
