// vcluster.h: strata-run's virtual clusters (--nodes): N network namespaces on this machine, each a
// node with its own hostname and R rail interfaces `rail<r>` (198.18.<r>.<node+1>/24), rail r being
// a Linux bridge in the root namespace that joins one veth per node, optionally rate-limited with
// tc tbf in both directions. The launcher reaches the nodes at 198.18.0.254 (rail 0's bridge),
// where the job's bootstrap root is advertised. Objects are named after the launcher's pid
// (vcluster_net.h) and removed when the job ends, on a failed setup, and, after a crash, by the
// next virtual-cluster launch or `strata-run --cleanup-vcluster`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tools/launcher_proc.h"

namespace strata::launcher {

struct VClusterSpec {
  int nodes = 1;
  int ppn = 1;                  ///< ranks per node; rank r runs on node r / ppn
  int rails = 1;
  uint64_t rateBits = 0;        ///< per rail and direction, bits/s; 0: not shaped
  std::string rateText;         ///< as given ("1gbit"), for messages
  std::string hostPrefix;       ///< node i's hostname is "<hostPrefix>-node<i>"
};

constexpr int kMaxVNodes = 253;  ///< addresses .1 to .253; .254 is the launcher
constexpr int kMaxRails = 8;

/// Parses a tc-style rate: a number with bit, kbit, mbit, gbit, tbit (decimal), kibit..tibit
/// (binary), bps, kbps, ... (bytes), or no unit (bits). Returns false on anything else.
bool parseRate(const std::string& text, uint64_t* bitsPerSec);

class VCluster {
 public:
  /// Creates the cluster of `spec` for this launcher: checks privileges, takes the machine's
  /// virtual-cluster lock (one cluster at a time: they share 198.18.0.0/15), removes stale objects,
  /// creates everything. SIGINT/SIGTERM/SIGHUP/SIGQUIT read from `signalFd` stop it. Returns 0,
  /// or the launcher's exit code after printing why (1 no privileges or a failed command,
  /// 128+signal interrupted), with everything made so far removed again.
  static int create(const VClusterSpec& spec, int signalFd, std::unique_ptr<VCluster>* out);
  /// Removes the cluster.
  ~VCluster();

  /// Where the nodes reach the launcher (network order).
  uint32_t rootAddr() const;
  /// Puts rank `rank` on its node: namespaces, hostname, and the environment (STRATA_NODE,
  /// STRATA_LOCAL_RANK/SIZE, STRATA_SOCKET_IFNAME=rail unless set, STRATA_VCLUSTER_*).
  void placeRank(int rank, RankSpec* spec) const;

 private:
  explicit VCluster(const VClusterSpec& spec);
  int build(int signalFd);
  bool teardown();

  VClusterSpec spec_;
  long pid_;
  int lockFd_ = -1;
  std::vector<int> nsFds_;
};

/// `strata-run --cleanup-vcluster`: removes every virtual-cluster object whose launcher is gone,
/// printing what it removes. Returns the exit code (0, or 1 on a failure or without privileges).
int cleanupStaleVClusters();

}  // namespace strata::launcher
