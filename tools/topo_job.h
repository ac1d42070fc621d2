// topo_job.h: `strata-topo --job`: run as every rank of a job (under strata-run, mpirun, srun or
// torchrun variables), join the world communicator and print, on rank 0, which rank sits where:
// node, local rank, rail and the address it uses there, and the link classes between nodes.
#pragma once

namespace strata::tools {

/// Returns the process exit code (0 on success).
int runJobReport();

}  // namespace strata::tools
