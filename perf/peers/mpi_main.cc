// mpi_main.cc: main() of the Open MPI peer tools (mpi_all_reduce_perf, ...): the strata tools'
// sweep and output, measuring MPI's collectives. Built once per collective with PERF_COLL.
//
//   mpirun --allow-run-as-root --oversubscribe -n 4 build/perf/mpi_all_reduce_perf -b 8 -e 64M -f 2
#include <mpi.h>

#include <cstdio>

#include "perf/common/tool.h"
#include "perf/peers/mpi_backend.h"

namespace {

int launchMpiRank(const strata::perf::Options& o, const strata::perf::RankBody& body) {
  using namespace strata::perf;
  if (o.nThreads != 1) {
    std::fprintf(stderr, "%s: -t/--nthreads must be 1 (one MPI rank per process)\n", PERF_TOOL_NAME);
    return kExitUsage;
  }
  MPI_Init(nullptr, nullptr);
  int nprocs = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  int rc = kExitError;
  {
    MpiBackend backend(MPI_COMM_WORLD);
    rc = body(backend, nprocs, 0);
  }
  if (rc == kExitError) MPI_Abort(MPI_COMM_WORLD, rc);  // peers may be waiting in a collective
  MPI_Finalize();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace strata::perf;
  const ToolInfo tool{Coll::PERF_COLL, PERF_TOOL_NAME, "Open MPI",
                      "Launch: mpirun --allow-run-as-root --oversubscribe -n N " PERF_TOOL_NAME " [flags].\n"
                      "Reductions: int8..uint64, float, double with sum, prod, max, min (MPI has no fp16/bf16/fp8\n"
                      "reductions, avg or mulsum; -d all / -o all skip them).",
                      {},
                      {"host"},
                      {}};
  return toolMain(argc, argv, tool, launchMpiRank);
}
