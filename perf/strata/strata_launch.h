// strata_launch.h: creates this process's strata ranks for a perf tool: one rank per process under
// strata-run / mpirun / torchrun / srun (strataCommInitFromEnv), or -t N rank threads per process
// (strataGetUniqueId + strataCommInitRank per thread; world = processes x threads).
#pragma once

#include "perf/common/tool.h"

namespace strata::perf {

int launchStrataRanks(const Options& options, const RankBody& body);

}  // namespace strata::perf
