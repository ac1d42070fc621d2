// vcluster.cc: building and removing a virtual cluster (vcluster.h) with `ip` and `tc` commands,
// the machine-wide lock, the stale-object sweep, and the ranks' placement on the nodes.
#include "tools/vcluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <regex>
#include <set>

#include "tools/launcher_relay.h"
#include "tools/vcluster_net.h"

namespace strata::launcher {
namespace {

constexpr int kCapNetAdmin = 12, kCapSysAdmin = 21;
constexpr const char* kLockPath = "/run/strata-vcluster.lock";
constexpr const char* kTbfLatency = "50ms";  // the longest a packet may queue in tbf

template <typename... Args>
void say(fmt::format_string<Args...> f, Args&&... args) {
  Sink(2).write("strata-run: " + fmt::format(f, std::forward<Args>(args)...) + "\n");
}

const char* const kNoNetAdmin = "--nodes needs CAP_NET_ADMIN (run as root) to create network namespaces";

/// A pending SIGINT/SIGTERM/SIGHUP/SIGQUIT on the launcher's signalfd (others are dropped: no rank
/// runs yet), or 0.
int pendingStop(int signalFd) {
  if (signalFd < 0) return 0;
  int stop = 0;
  struct signalfd_siginfo si;
  while (read(signalFd, &si, sizeof(si)) == static_cast<ssize_t>(sizeof(si)))
    if (si.ssi_signo != SIGCHLD && stop == 0) stop = static_cast<int>(si.ssi_signo);
  return stop;
}

/// Removes the objects of launchers that are gone (and any carrying `selfPid`: left by an earlier
/// process with our pid). Prints what it removed; returns false when something could not be removed.
bool sweepStale(long selfPid, bool quietIfNone) {
  std::vector<vnet::Object> all, stale;
  std::string err;
  if (!vnet::listObjects(&all, &err)) {
    say("cannot list virtual-cluster objects: {}", err);
    return false;
  }
  std::set<long> pids;
  for (const auto& o : all)
    if (o.pid == selfPid || !vnet::pidAlive(o.pid)) stale.push_back(o), pids.insert(o.pid);
  if (stale.empty()) {
    if (!quietIfNone) say("no stale virtual-cluster objects");
    return true;
  }
  std::string names, pidList;
  for (const auto& o : stale) names += (names.empty() ? "" : " ") + o.name;
  for (long p : pids) pidList += (pidList.empty() ? "" : ", ") + std::to_string(p);
  say("removing stale virtual-cluster objects of launcher pid {} (gone): {}", pidList, names);
  if (!vnet::removeObjects(stale, &err)) {
    say("cannot remove stale virtual-cluster objects: {}", err);
    return false;
  }
  return true;
}

std::string shortHostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "vnode";
  std::string h(buf);
  h = h.substr(0, h.find('.'));
  return h.substr(0, 40);
}

}  // namespace

bool parseRate(const std::string& text, uint64_t* bitsPerSec) {
  static const std::regex re(R"(^\s*([0-9]+(\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)\s*$)");
  std::smatch m;
  if (!std::regex_match(text, m, re)) return false;
  std::string unit = m[3];
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::tolower(c); });
  static const std::map<std::string, double> units = {
      {"", 1},          {"bit", 1},          {"kbit", 1e3},          {"mbit", 1e6},          {"gbit", 1e9},
      {"tbit", 1e12},   {"kibit", 1024.0},   {"mibit", 1048576.0},   {"gibit", 1073741824.0},
      {"tibit", 1099511627776.0},            {"bps", 8},             {"kbps", 8e3},          {"mbps", 8e6},
      {"gbps", 8e9},    {"tbps", 8e12},      {"kibps", 8 * 1024.0},  {"mibps", 8 * 1048576.0},
      {"gibps", 8 * 1073741824.0},           {"tibps", 8 * 1099511627776.0}};
  auto u = units.find(unit);
  if (u == units.end()) return false;
  double v = std::stod(m[1]) * u->second;
  if (!(v >= 1) || v > 1e15) return false;
  *bitsPerSec = static_cast<uint64_t>(std::llround(v));
  return true;
}

VCluster::VCluster(const VClusterSpec& spec) : spec_(spec), pid_(static_cast<long>(getpid())) {
  if (spec_.hostPrefix.empty()) spec_.hostPrefix = shortHostname();
}

int VCluster::create(const VClusterSpec& spec, int signalFd, std::unique_ptr<VCluster>* out) {
  if (!vnet::haveCapability(kCapNetAdmin)) {
    say("{}", kNoNetAdmin);
    return 1;
  }
  if (!vnet::haveCapability(kCapSysAdmin)) {
    say("--nodes needs CAP_SYS_ADMIN (run as root) to create network and UTS namespaces");
    return 1;
  }
  std::unique_ptr<VCluster> vc(new VCluster(spec));
  int rc = vc->build(signalFd);
  if (rc != 0) return rc;  // ~VCluster removed what was made
  *out = std::move(vc);
  return 0;
}

int VCluster::build(int signalFd) {
  // One virtual cluster at a time on this machine: they all use 198.18.0.254 and 198.18.<r>.0/24.
  lockFd_ = open(kLockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lockFd_ >= 0 && flock(lockFd_, LOCK_EX | LOCK_NB) != 0) {
    say("waiting for another virtual cluster on this machine to end (lock {})", kLockPath);
    while (flock(lockFd_, LOCK_EX | LOCK_NB) != 0) {
      struct pollfd p = {signalFd, POLLIN, 0};
      poll(&p, signalFd >= 0 ? 1 : 0, 100);
      if (int sig = pendingStop(signalFd)) return 128 + sig;
    }
  }
  sweepStale(pid_, /*quietIfNone=*/true);
  // Someone else's 198.18.0.0/15 (perf/vcluster/make_cluster.sh, or a real network) would collide.
  const std::vector<std::string> inUseCmd = {"ip", "-o", "-4", "addr", "show", "to", "198.18.0.0/15"};
  vnet::CmdResult inUse = vnet::run(inUseCmd);
  if (inUse.ok() && !inUse.out.empty()) {
    static const std::regex addrRe(R"(^\d+:\s+(\S+)\s+inet\s+(\S+))");
    std::smatch m;
    std::string where = std::regex_search(inUse.out, m, addrRe) ? m.str(1) + " has " + m.str(2) : inUse.out;
    say("198.18.0.0/15 is already in use on this machine ({}); remove that network first "
        "(perf/vcluster/make_cluster.sh down, or --cleanup-vcluster)", where);
    return 1;
  }

  std::string failure;
  int stopSig = 0;
  auto cmd = [&](std::vector<std::string> argv) {
    if (!failure.empty() || stopSig) return false;
    if ((stopSig = pendingStop(signalFd)) != 0) return false;
    vnet::CmdResult r = vnet::run(argv);
    if (!r.ok()) failure = vnet::describeFailure(argv, r);
    return r.ok();
  };
  std::vector<std::string> tbf;
  if (spec_.rateBits > 0) {
    const uint64_t burst = std::max<uint64_t>(spec_.rateBits / 8 / 250, 32 * 1024);  // 4 ms of data
    tbf = {"root", "tbf", "rate", fmt::format("{}bit", spec_.rateBits), "burst", std::to_string(burst), "latency",
           kTbfLatency};
  }
  auto withTbf = [&](std::vector<std::string> head) {
    head.insert(head.end(), tbf.begin(), tbf.end());
    return head;
  };

  for (int r = 0; r < spec_.rails; ++r) {
    const std::string br = vnet::bridgeName(pid_, r);
    cmd({"ip", "link", "add", br, "type", "bridge"}) && cmd({"ip", "link", "set", br, "up"});
  }
  cmd({"ip", "addr", "add", "198.18.0.254/24", "dev", vnet::bridgeName(pid_, 0)});
  for (int i = 0; i < spec_.nodes && failure.empty() && !stopSig; ++i) {
    const std::string ns = vnet::nsName(pid_, i);
    if (!cmd({"ip", "netns", "add", ns})) {
      if (failure.find("Operation not permitted") != std::string::npos) failure = kNoNetAdmin;
      break;
    }
    int fd = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      failure = fmt::format("cannot open /run/netns/{}: {}", ns, std::strerror(errno));
      break;
    }
    nsFds_.push_back(fd);
    cmd({"ip", "-n", ns, "link", "set", "lo", "up"});
    for (int r = 0; r < spec_.rails; ++r) {
      const std::string veth = vnet::vethName(pid_, i, r), rail = fmt::format("rail{}", r);
      cmd({"ip", "link", "add", veth, "type", "veth", "peer", "name", rail, "netns", ns}) &&
          cmd({"ip", "link", "set", veth, "master", vnet::bridgeName(pid_, r), "up"}) &&
          cmd({"ip", "-n", ns, "addr", "add", fmt::format("198.18.{}.{}/24", r, i + 1), "dev", rail}) &&
          cmd({"ip", "-n", ns, "link", "set", rail, "up"});
      if (!tbf.empty())  // both directions: the node's end and the bridge's end
        cmd(withTbf({"tc", "-n", ns, "qdisc", "add", "dev", rail})) &&
            cmd(withTbf({"tc", "qdisc", "add", "dev", veth}));
    }
  }
  if (stopSig) {
    say("received {} while setting up the virtual cluster; removing it", signalName(stopSig));
    return 128 + stopSig;
  }
  if (!failure.empty()) {
    say("{}", failure == kNoNetAdmin ? failure : "virtual cluster setup failed: " + failure);
    return 1;
  }
  auto plural = [](int n) { return n == 1 ? "" : "s"; };
  say("virtual cluster: {} node{} x {} rank{}, {} rail{} {} (namespaces {}..n{}, hosts {}-node0..{})", spec_.nodes,
      plural(spec_.nodes), spec_.ppn, plural(spec_.ppn), spec_.rails, plural(spec_.rails),
      spec_.rateBits ? "at " + spec_.rateText : std::string("unshaped"), vnet::nsName(pid_, 0), spec_.nodes - 1,
      spec_.hostPrefix, spec_.nodes - 1);
  return 0;
}

VCluster::~VCluster() {
  if (!teardown()) say("the virtual cluster was not removed completely; `strata-run --cleanup-vcluster` retries");
  if (lockFd_ >= 0) close(lockFd_);
}

bool VCluster::teardown() {
  for (int fd : nsFds_) close(fd);
  nsFds_.clear();
  std::vector<vnet::Object> objs, mine;
  std::string err;
  if (vnet::listObjects(&objs, &err)) {
    for (const auto& o : objs)
      if (o.pid == pid_) mine.push_back(o);
  } else {  // fall back to every name this cluster may have made
    for (int i = 0; i < spec_.nodes; ++i) {
      mine.push_back({vnet::Object::Netns, vnet::nsName(pid_, i), pid_});
      for (int r = 0; r < spec_.rails; ++r) mine.push_back({vnet::Object::Veth, vnet::vethName(pid_, i, r), pid_});
    }
    for (int r = 0; r < spec_.rails; ++r) mine.push_back({vnet::Object::Bridge, vnet::bridgeName(pid_, r), pid_});
  }
  err.clear();
  if (vnet::removeObjects(mine, &err)) return true;
  say("cannot remove the virtual cluster: {}", err);
  return false;
}

uint32_t VCluster::rootAddr() const {
  in_addr a{};
  inet_pton(AF_INET, "198.18.0.254", &a);
  return a.s_addr;
}

void VCluster::placeRank(int rank, RankSpec* spec) const {
  const int node = rank / spec_.ppn;
  spec->netnsFd = nsFds_.at(static_cast<size_t>(node));
  spec->hostname = fmt::format("{}-node{}", spec_.hostPrefix, node);
  setRankEnv(spec, "STRATA_NODE", std::to_string(node));
  setRankEnv(spec, "STRATA_LOCAL_RANK", std::to_string(rank % spec_.ppn));
  setRankEnv(spec, "STRATA_LOCAL_SIZE", std::to_string(spec_.ppn));
  setRankEnv(spec, "STRATA_VCLUSTER_NODES", std::to_string(spec_.nodes));
  setRankEnv(spec, "STRATA_VCLUSTER_RAILS", std::to_string(spec_.rails));
  if (spec_.rateBits > 0) setRankEnv(spec, "STRATA_VCLUSTER_RAIL_RATE", std::to_string(spec_.rateBits));
  else spec->unsetEnv.push_back("STRATA_VCLUSTER_RAIL_RATE");
  const char* ifname = std::getenv("STRATA_SOCKET_IFNAME");
  if (!ifname || !*ifname) setRankEnv(spec, "STRATA_SOCKET_IFNAME", "rail");
}

int cleanupStaleVClusters() {
  if (!vnet::haveCapability(kCapNetAdmin)) {
    say("--cleanup-vcluster needs CAP_NET_ADMIN (run as root)");
    return 1;
  }
  return sweepStale(-1, /*quietIfNone=*/false) ? 0 : 1;
}

}  // namespace strata::launcher
