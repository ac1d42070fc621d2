// launcher_dumps.h: strata-run's side of hang reports. The job gets a dump directory (the user's
// STRATA_DUMP_DIR, else a private temporary one) where ranks write their op-ring dumps when an
// operation fails (collectives/op_ring.h); before the launcher stops ranks that are still running
// (a rank failed, --timeout, SIGINT) it asks them for theirs with SIGUSR1 (only processes of the
// ranks' process groups that catch SIGUSR1: strata installs the handler with its first
// communicator) and waits until they are written (2 s at most); at the end it diagnoses them
// (collectives/hang_report.h).
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace strata::launcher {

class DumpCollector {
 public:
  /// `userDir`: STRATA_DUMP_DIR as the launcher got it ("" : a private temporary directory,
  /// removed by the destructor). False when no directory can be had.
  bool init(const std::string& userDir, std::string* err);
  ~DumpCollector();
  const std::string& dir() const { return dir_; }
  /// Asks the processes of these process groups that catch SIGUSR1 for a dump; returns how many.
  size_t request(const std::vector<pid_t>& groups);
  /// Every process asked has written its dump since.
  bool complete() const;
  /// The diagnosis when the dumps show a problem (pending, failed, mismatched), else "".
  std::string diagnosis(size_t* ndumps) const;

 private:
  std::string dir_;
  bool owned_ = false;
  std::vector<pid_t> asked_;
  double askedAt_ = 0;  ///< realtime seconds
};

/// True when process `pid` has a handler for `sig` (/proc/<pid>/status, SigCgt).
bool catchesSignal(pid_t pid, int sig);

}  // namespace strata::launcher
