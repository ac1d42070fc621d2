// auto_bind.h: ranks started without CPU binding (torchrun, srun without --cpu-bind, a user's own
// fork loop) bind themselves. Two unbound ranks that wake each other through futexes are sometimes
// placed on one CPU by the scheduler (wake-affine) and then run several times slower until they
// are moved apart (docs/PERFORMANCE.md, "Unbound launches"). strata-run and mpirun avoid it by
// binding each rank to a CPU; here the runtime does the same for the thread that creates the
// communicator, under the same rule as strata-run --bind core: every local rank a process of its
// own, all with the same (unbound) mask, and no more of them than CPUs. STRATA_AUTO_BIND=0 opts out.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "transport/bootstrap.h"

namespace strata {

struct AutoBindPlan {
  int cpu = -1;         ///< the CPU to bind this rank's calling thread to; -1: leave it as it is
  std::string reason;   ///< why (or why not), for the log
  std::string warning;  ///< non-empty: local ranks are bound to one and the same CPU (a bad launch)
};

/// CPU order of a mask (topology::cpusInBindOrder; replaceable in tests).
using CpuOrderFn = std::function<std::vector<int>(const uint64_t mask[4])>;

/// The plan for `rank` from every rank's reported CPU mask, host and process.
AutoBindPlan planAutoBind(const std::vector<RankInfo>& infos, int rank, const CpuOrderFn& order);

/// Plans with the machine's core topology and, under STRATA_AUTO_BIND (default on), binds the
/// calling thread. Logs the first binding and the first shared-CPU warning of the process once.
void autoBindCallingThread(const std::vector<RankInfo>& infos, int rank);

}  // namespace strata
