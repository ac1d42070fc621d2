// vcluster_net.h: the Linux plumbing under strata-run's virtual clusters (vcluster.h): running the
// `ip` and `tc` commands, the per-job names of the namespaces, bridges and veths (tagged with the
// launcher's pid), and finding and removing them, also those a dead launcher left behind.
#pragma once

#include <string>
#include <vector>

namespace strata::launcher::vnet {

/// The outcome of one command.
struct CmdResult {
  bool ran = false;  ///< false: it could not be started (then `err` says why)
  int code = -1;     ///< exit code, or 128+signal
  std::string out, err;
  bool ok() const { return ran && code == 0; }
};

/// Runs `argv` (argv[0] searched in PATH) with stdin from /dev/null, capturing its output; logged
/// at debug level (STRATA_LOG_LEVEL=debug). Safe to call with other threads running.
CmdResult run(const std::vector<std::string>& argv);
/// "`ip link add ...`: exit 2: RTNETLINK answers: File exists": a failed command for a message.
std::string describeFailure(const std::vector<std::string>& argv, const CmdResult& r);

/// Object names. Every one fits in an interface name (15 characters) for pid < 10^7, node < 1000
/// and rail < 10.
std::string nsName(long pid, int node);              ///< strata-<pid>-n<node>
std::string bridgeName(long pid, int rail);          ///< st<pid>r<rail>
std::string vethName(long pid, int node, int rail);  ///< st<pid>n<node>r<rail> (root-namespace end)

/// One object of some job's virtual cluster.
struct Object {
  enum Kind { Veth, Bridge, Netns } kind;  ///< also the order they are removed in
  std::string name;
  long pid = 0;  ///< the launcher that made it
};

/// Every virtual-cluster object on this machine (from `ip netns list` and `ip -o link show`).
/// Returns false with *err when a listing fails.
bool listObjects(std::vector<Object>* out, std::string* err);
/// Removes `objs` (veths, then bridges, then namespaces); an object already gone is not an
/// error. Returns false with *err naming the failed commands.
bool removeObjects(std::vector<Object> objs, std::string* err);

/// Whether process `pid` exists (a zombie counts as gone).
bool pidAlive(long pid);
/// Whether this process has capability `cap` (CAP_NET_ADMIN, ...) in its effective set.
bool haveCapability(int cap);

}  // namespace strata::launcher::vnet
