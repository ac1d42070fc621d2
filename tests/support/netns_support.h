// netns_support.h: shared by the tests of network-namespace virtual clusters (vcluster_test,
// vcluster_collectives_test): whether this machine can make them, and which objects of a launcher
// are still there.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace strata::testing {

/// stdout of a shell command (stderr dropped).
inline std::string commandOutput(const std::string& cmd) {
  std::string out;
  if (FILE* f = popen((cmd + " 2>/dev/null").c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
    pclose(f);
  }
  return out;
}

inline bool haveCap(int cap) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("CapEff:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> cap) & 1ull;
  return false;
}

/// Why network-namespace clusters cannot be made here, or "". Beyond privileges it tries once
/// what strata-run does (a namespace and a bridge), since a container may grant the capabilities
/// and still refuse the operations.
inline std::string netnsUnavailable() {
  if (geteuid() != 0) return "not root: virtual clusters need CAP_NET_ADMIN and CAP_SYS_ADMIN";
  if (!haveCap(12) || !haveCap(21)) return "CAP_NET_ADMIN or CAP_SYS_ADMIN missing";
  if (commandOutput("command -v ip").empty()) return "the `ip` command (iproute2) is not installed";
  static const std::string probe = [] {
    const std::string tag = std::to_string(getpid());
    const std::string ns = "strata-probe-" + tag, br = "stprobe" + tag;
    const std::string out = commandOutput("ip netns add " + ns + " 2>&1 && ip link add " + br +
                                          " type bridge 2>&1 && echo PROBE-OK");
    commandOutput("ip link del " + br + "; ip netns del " + ns);
    return out.find("PROBE-OK") != std::string::npos
               ? std::string()
               : "this machine refuses network namespaces or bridges: " + out;
  }();
  return probe;
}

/// The namespaces, bridges and veths of launcher `pid` that exist now.
inline std::vector<std::string> vclusterObjectsOf(pid_t pid) {
  std::vector<std::string> found;
  const std::string p = std::to_string(pid);
  const std::regex ns("^strata-" + p + "-n\\d+"), link("^\\d+: (st" + p + "(r\\d+|n\\d+r\\d+))[@:]");
  std::istringstream nsIn(commandOutput("ip netns list")), linkIn(commandOutput("ip -o link show"));
  std::smatch m;
  for (std::string l; std::getline(nsIn, l);)
    if (std::regex_search(l, m, ns)) found.push_back(m.str(0));
  for (std::string l; std::getline(linkIn, l);)
    if (std::regex_search(l, m, link)) found.push_back(m.str(1));
  return found;
}

inline std::string joinWords(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

}  // namespace strata::testing
