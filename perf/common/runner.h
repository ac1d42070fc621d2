// runner.h: one rank's sweep: for each dtype, op and root, warm up, then per size time the
// out-of-place and in-place collective, aggregate the time over ranks (-a) and verify (-c).
// With --memory device the collectives run on device buffers and the host buffers stage the
// inputs and results of the check.
#pragma once

#include <cstdint>
#include <vector>

#include "perf/common/backend.h"
#include "perf/common/buffers.h"
#include "perf/common/options.h"
#include "perf/common/report.h"

namespace strata::perf {

class DeviceRank;
class Values;

class Runner {
 public:
  /// `device`: the rank's device buffers and stream (--memory device), else null.
  Runner(const Options& options, Coll coll, Backend& backend, const DeviceRank* device = nullptr);
  /// Throws UsageError for an explicitly requested type, op or root the backend cannot run.
  void checkRequest() const;
  /// Runs the sweep; returns the number of wrong elements over all ranks. `report` is non-null on
  /// the rank that prints (rank 0).
  int64_t run(Report* report);

 private:
  CollCall makeCall(size_t bytes, DType dtype, Op op, int root, bool inPlace) const;
  /// The same call on the host buffers (itself for host memory).
  CollCall hostView(const CollCall& call) const;
  void fill(const CollCall& call, const Values& values);
  int64_t wrongElements(const CollCall& call, const Values& values);
  void sync();  ///< waits for the device stream (nothing for host memory)
  void warmUp(DType dtype, Op op, int root);
  Measure bench(const CollCall& call, const Values& values);
  double timeLoop(const CollCall& call);
  std::vector<int> roots() const;

  const Options& o_;
  Coll coll_;
  Backend& b_;
  Report* report_ = nullptr;
  Buffers buffers_;
  const DeviceRank* dev_;
};

}  // namespace strata::perf
