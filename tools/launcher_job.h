// launcher_job.h: runs one strata-run job: starts the ranks, relays their output, watches their
// exits, the timeout and the launcher's own signals, and decides the exit code.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tools/launcher_proc.h"

namespace strata::launcher {

class DumpCollector;

struct JobOptions {
  int nranks = 1;
  bool threads = false;      ///< one process with STRATA_NTHREADS = nranks
  double timeoutSec = 0;     ///< 0: none
  bool prefix = true;        ///< "[R] " before every line
  double killGraceSec = 3;   ///< SIGTERM -> SIGKILL
  /// A rank that fails is reported but does not end the job: the others go on (elastic jobs
  /// shrink past it). The job's code is then the survivors' (see runJob).
  bool keepGoing = false;
  std::string path;          ///< resolved program
  std::vector<std::string> argv;
  std::string uniqueIdHex;   ///< STRATA_UNIQUE_ID
  std::vector<int> cpus;     ///< non-empty: rank r is bound to cpus[r] (launcher_bind.h)
  /// Set: called for each rank process before it starts, to put it on its node (vcluster.h).
  std::function<void(int rank, RankSpec* spec)> placeRank;
  /// Set: ranks get STRATA_DUMP_DIR=dumps->dir(), and are asked for their op-ring dumps before
  /// the launcher stops them (launcher_dumps.h).
  DumpCollector* dumps = nullptr;
};

/// The signals the launcher handles itself: blocked in every thread (call before starting any
/// thread) and read from a signalfd by `runJob`. Returns the signalfd, or -1 with errno.
int blockLauncherSignals();

/// Runs the job to its end and returns the launcher's exit code: 0 when every rank exited 0; the
/// first failing rank's code (128+signal when killed; a rank killed by a signal before the
/// launcher stopped the others wins over ranks that exited with an error); 124 on timeout;
/// 128+signal when the launcher itself was interrupted. With keepGoing: 0 when at least one rank
/// exited 0 and none exited with an error (ranks killed by a signal are the survivors' business),
/// else the first error's code (or the first death's, if no rank exited).
int runJob(const JobOptions& opt, int signalFd);

}  // namespace strata::launcher
