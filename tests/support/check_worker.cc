// check_worker.cc: one rank of the multi-process tests. Joins from the launch environment
// (strata-run, torchrun, mpirun or srun), runs the standard correctness sweep, prints
// "rank R: N checks passed" and exits 1 on any failure (listing what differed).
//
//   strata-run -n 4 -- ./strata_check_worker [--quick] [--split] [--memalloc]
// --memalloc: instead of the standard sweep, every collective on strataMemAlloc buffers (the
// single-copy path between processes).
#include <cstdio>
#include <cstring>

#include "strata/strata.h"
#include "support/coll_checks.h"
#include "support/memalloc_checks.h"

int main(int argc, char** argv) {
  bool quick = false, split = false, memalloc = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    if (!std::strcmp(argv[i], "--split")) split = true;
    if (!std::strcmp(argv[i], "--memalloc")) memalloc = true;
  }
  strataComm_t comm = nullptr;
  if (strataCommInitFromEnv(&comm, nullptr) != strataSuccess) {
    std::fprintf(stderr, "init failed: %s\n", strataGetLastError(nullptr));
    return 2;
  }
  int rank = 0, n = 0;
  strataCommUserRank(comm, &rank);
  strataCommCount(comm, &n);
  strata::testing::CheckReport rep;
  if (memalloc)
    strata::testing::runMemAllocSweep(comm, quick, &rep);
  else
    strata::testing::runStandardSweep(comm, quick, &rep);
  if (split && n > 1) {
    strataComm_t sub = nullptr;
    if (strataCommSplit(comm, rank % 2, -rank, &sub, nullptr) != strataSuccess) {
      rep.fail(std::string("split failed: ") + strataGetLastError(comm));
    } else {
      strata::testing::runStandardSweep(sub, true, &rep);
      strataCommDestroy(sub);
    }
  }
  strataCommDestroy(comm);
  for (const auto& f : rep.failures) std::fprintf(stderr, "FAIL %s\n", f.c_str());
  std::printf("rank %d: %d checks passed, %zu failed\n", rank, rep.passed, rep.failures.size());
  return rep.ok() ? 0 : 1;
}
