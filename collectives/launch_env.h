// launch_env.h: reads the launch environment (strata-run, torchrun, mpirun, srun) into rank, size
// and a unique id. These variables belong to the launchers, not to strata's configuration registry.
#pragma once

#include <functional>
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

/// What the launcher variables say, before any I/O (resolving the root's host, the user's secret,
/// serving the root).
struct LaunchVars {
  int rank = -1;
  int nranks = 0;
  const char* source = "";
  bool haveId = false;   ///< strata-run: `id` is the job's (STRATA_UNIQUE_ID); the rest is unset
  strataUniqueId id{};
  std::string host;      ///< where rank 0 serves the root
  int port = 0;          ///< its port
  std::string jobKey;    ///< the launcher's job id (part of the derived secret and port)
};

/// The parsing behind readLaunchEnv: the launcher's variables from `lookup` (nullptr or empty:
/// unset), with strata's STRATA_UNIQUE_ID and STRATA_ROOT_PORT as parsed by the configuration.
/// Fails naming what is missing or out of range.
Status parseLaunchVars(const std::function<const char*(const char*)>& lookup, const std::string& uniqueId,
                       int rootPort, LaunchVars* out);

/// Works out rank, size and the rendezvous. With strata-run the id comes from STRATA_UNIQUE_ID;
/// otherwise rank 0 serves the root at MASTER_ADDR:MASTER_PORT (STRATA_ROOT_PORT overrides the
/// port), or, without MASTER_ADDR, at the first host of the job (localhost for single-node mpirun,
/// the first node of SLURM_STEP_NODELIST under srun) on a port derived from the job id.
Status readLaunchEnv(LaunchInfo* out);

/// The first host of a Slurm host list: "node[01-04,07],gpu2" -> "node01",
/// "rack[1-2]-node[01-04]" -> "rack1-node01".
std::string firstSlurmHost(const std::string& nodeList);

}  // namespace strata
