// launch_env.h: reads the launch environment (strata-run, torchrun, mpirun, srun) into rank, size
// and a unique id. These variables belong to the launchers, not to strata's configuration registry.
#pragma once

#include <string>

#include "strata/strata.h"
#include "transport/status.h"

namespace strata {

struct LaunchInfo {
  int rank = -1;
  int nranks = 0;
  strataUniqueId id{};
  const char* source = "";  ///< "strata-run", "torchrun", "mpirun", "srun"
};

/// Works out rank, size and the rendezvous. With strata-run the id comes from STRATA_UNIQUE_ID;
/// otherwise rank 0 serves the root at MASTER_ADDR:MASTER_PORT (STRATA_ROOT_PORT overrides the
/// port), or, without MASTER_ADDR, at the first host of the job (localhost for single-node mpirun,
/// the first node of SLURM_STEP_NODELIST under srun) on a port derived from the job id.
Status readLaunchEnv(LaunchInfo* out);

/// The first host of a Slurm host list: "node[01-04,07],gpu2" -> "node01".
std::string firstSlurmHost(const std::string& nodeList);

}  // namespace strata
