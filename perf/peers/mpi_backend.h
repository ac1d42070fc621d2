// mpi_backend.h: runs the perf sweep's collectives with MPI (MPI_Allreduce, MPI_Reduce_scatter_block,
// MPI_Allgather, MPI_Bcast, MPI_Reduce, MPI_Alltoall, MPI_Gather, MPI_Scatter, MPI_Sendrecv).
#pragma once

#include <mpi.h>

#include "perf/common/backend.h"

namespace strata::perf {

class MpiBackend : public Backend {
 public:
  explicit MpiBackend(MPI_Comm comm);
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  std::string describe() const override;
  std::string unsupported(Coll coll, DType dtype, Op op) const override;
  void run(const CollCall& call) override;
  /// MPI's in-place reduce-scatter leaves the result at the start of the buffer.
  const void* result(const CollCall& call) const override;
  void barrier() override;
  double allReduce(double v, Agg how) override;
  void allGather(const void* mine, void* all, size_t bytes) override;

 private:
  MPI_Comm comm_;
  int rank_ = 0, nranks_ = 1;
};

}  // namespace strata::perf
