// strata_backend.h: runs the perf sweep's collectives through strata's public C API.
#pragma once

#include "perf/common/backend.h"
#include "strata/strata.h"

namespace strata::perf {

class StrataBackend : public Backend {
 public:
  explicit StrataBackend(strataComm_t comm);
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  std::string describe() const override;
  void prepare(const CollCall& call) override;
  void finish(const CollCall& call) override;
  void run(const CollCall& call) override;
  void groupStart() override;
  void groupEnd() override;
  void barrier() override;
  double allReduce(double v, Agg how) override;
  void allGather(const void* mine, void* all, size_t bytes) override;

 private:
  void check(strataResult_t rc, const char* what) const;
  strataComm_t comm_;
  int rank_ = 0, nranks_ = 1;
  strataRedOp_t op_ = strataSum;  // the call's op (a pre-multiplied sum between prepare and finish)
  bool customOp_ = false;
};

}  // namespace strata::perf
