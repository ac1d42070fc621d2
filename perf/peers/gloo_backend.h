// gloo_backend.h: runs the perf sweep's collectives with Gloo (tcp transport): all-reduce with
// its ring, halving-doubling or bcube algorithm, reduce-scatter (halving-doubling), all-gather,
// broadcast, reduce, all-to-all, gather, scatter, and send/recv over unbound buffers.
#pragma once

#include <gloo/context.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "perf/common/backend.h"

namespace strata::perf {

class GlooBackend : public Backend {
 public:
  /// algo: the all-reduce algorithm, "ring", "halving_doubling" or "bcube".
  GlooBackend(std::shared_ptr<gloo::Context> context, std::string algo);
  int rank() const override { return context_->rank; }
  int nranks() const override { return context_->size; }
  std::string describe() const override;
  std::string unsupported(Coll coll, DType dtype, Op op) const override;
  void prepare(const CollCall& call) override;
  void finish(const CollCall& call) override;
  void run(const CollCall& call) override { call_(); }
  /// Gloo's reduce-scatter (halving-doubling, in place) leaves the result at the buffer's start.
  const void* result(const CollCall& call) const override;
  void barrier() override;
  double allReduce(double v, Agg how) override;
  void allGather(const void* mine, void* all, size_t bytes) override;

 private:
  std::function<void()> prepareReduction(const CollCall& call);  // gloo_reductions.cc
  std::function<void()> prepareMovement(const CollCall& call);   // gloo_movement.cc
  std::shared_ptr<gloo::Context> context_;
  std::string algo_;
  std::vector<char> scratch_;   // staging for the variants Gloo cannot run in place
  std::function<void()> call_;  // the prepared collective
};

}  // namespace strata::perf
