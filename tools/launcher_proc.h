// launcher_proc.h: strata-run's process layer: finding the program, spawning one rank with its
// output on pipes, and naming how a rank ended.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cerrno>

#include <string>
#include <utility>
#include <vector>

namespace strata::launcher {

/// Resolves `prog` as execvp would: a name containing '/' is taken as a path, anything else is
/// searched in $PATH. Returns the path, or "" with *err = ENOENT (not found) or EACCES (found but
/// not executable).
std::string resolveProgram(const std::string& prog, int* err);

/// "SIGSEGV", or "signal 42" for a signal without a name.
std::string signalName(int sig);

/// The launcher's exit code for a failure to exec: 127 when not found, 126 otherwise (as shells).
inline int execFailureCode(int err) { return err == ENOENT || err == ENOTDIR ? 127 : 126; }

/// What one rank process runs.
struct RankSpec {
  std::string path;                                          ///< resolved executable
  std::vector<std::string> argv;                             ///< argv[0] included
  std::vector<std::pair<std::string, std::string>> setEnv;   ///< set (override) in its environment
  std::vector<std::string> unsetEnv;                         ///< removed from its environment
  int cpu = -1;                                              ///< >= 0: bound to this CPU
  /// A virtual-cluster node (tools/vcluster.h): when >= 0 the rank joins this network namespace,
  /// and gets UTS and mount namespaces of its own with `hostname` and /sys mounted anew, so that
  /// /sys/class/net shows the node's interfaces (as under `ip netns exec`; /sys/fs/cgroup kept).
  int netnsFd = -1;
  std::string hostname;
};

/// Sets `name` in `spec`'s environment, replacing an earlier setting of it.
void setRankEnv(RankSpec* spec, const std::string& name, const std::string& value);

/// A started rank: its pid (also its process group id) and the read ends of its stdout and
/// stderr pipes (non-blocking, close-on-exec).
struct RankProc {
  pid_t pid = -1;
  int outFd = -1;
  int errFd = -1;
};

/// Process-wide settings the children must get back (the launcher blocks signals and may raise
/// its fd limit); captured once by `initChildState` before anything else changes them.
void initChildState();

/// Raises the soft RLIMIT_NOFILE (up to the hard limit) so that `needed` descriptors fit; ranks
/// get the original limit back.
void ensureFdLimit(size_t needed);

/// Forks and execs one rank. The child runs in its own process group, is SIGKILLed if the
/// launcher dies (PR_SET_PDEATHSIG), gets the launcher's original signal mask and dispositions,
/// stdin from /dev/null, stdout/stderr on fresh pipes, no other inherited descriptors, and
/// the affinity of `spec.cpu` when it is set, and the node's namespaces of `spec.netnsFd`.
/// On failure returns false with *err the errno of the failed step (execve's when the program
/// could not be executed) and *what naming the step ("execve", "setns", "fork", ...).
bool spawnRank(const RankSpec& spec, RankProc* out, int* err, std::string* what);

}  // namespace strata::launcher
