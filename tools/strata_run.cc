// strata_run.cc: strata-run, the single-machine launcher.
//
//   strata-run -n N [--threads] [--timeout S] [--bind core|none] [--no-prefix] [--keep-going] -- prog args...
//   strata-run --nodes N --ppn K [--rails R] [--rail-rate RATE] [options] -- prog args...
//   strata-run --config | --cleanup-vcluster
//
// With --nodes the ranks run on a virtual cluster of N network namespaces (tools/vcluster.h): node
// r / K for rank r, each node its own hostname and R rate-limited rail interfaces.
// Creates the job's unique id (its persistent bootstrap root lives in this process for the job's
// life), starts N rank processes (or one process of N rank threads with --threads) with
// STRATA_RANK / STRATA_WORLD_SIZE / STRATA_LOCAL_RANK / STRATA_LOCAL_SIZE / STRATA_UNIQUE_ID
// (STRATA_NTHREADS with --threads), relays their output prefixed "[R] ", and ends the job when a
// rank fails (with --keep-going not when a signal killed it: elastic jobs go on without it), on
// --timeout, or on SIGINT/SIGTERM (forwarded to the ranks). Ranks still running then are first
// asked for their op-ring dumps (SIGUSR1), and a failed job ends with the hang report made from
// them (tools/launcher_dumps.h, collectives/hang_report.h).
//
// Exit codes: 0 all ranks exited 0; the first failing rank's code (128+signal if it was killed;
// a rank killed by a signal before the others were stopped wins over ranks that exited with an
// error, which are usually its victims); 124 timeout; 126/127 the program cannot be executed / was not found; 2 bad usage; 1 the job
// could not be set up; 128+signal when the launcher itself was interrupted.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "tools/launcher_bind.h"
#include "tools/launcher_dumps.h"
#include "tools/launcher_job.h"
#include "tools/launcher_proc.h"
#include "tools/vcluster.h"
#include "transport/bootstrap.h"
#include "transport/config.h"

namespace {

constexpr int kUsageError = 2;
constexpr int kMaxRanks = 1 << 16;

int usageError(const std::string& msg) {
  std::fprintf(stderr, "strata-run: %s\n(usage: strata-run -n N [options] -- program [args...]; see --help)\n",
               msg.c_str());
  return kUsageError;
}

void printConfig() {
  std::vector<strata::ConfigEntry> entries = strata::describeConfig();
  const std::vector<std::string> head = {"VARIABLE", "TYPE", "DEFAULT", "VALUE", "DESCRIPTION"};
  auto cell = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
  size_t w[4];
  for (int c = 0; c < 4; ++c) w[c] = head[c].size();
  for (const auto& e : entries) {
    w[0] = std::max(w[0], cell(e.name).size());
    w[1] = std::max(w[1], cell(e.type).size());
    w[2] = std::max(w[2], cell(e.defaultValue).size());
    w[3] = std::max(w[3], cell(e.value).size());
  }
  auto row = [&](const std::string& a, const std::string& b, const std::string& c, const std::string& d,
                 const std::string& help) {
    std::string line = fmt::format("{:<{}}  {:<{}}  {:<{}}  {:<{}}  {}", a, w[0], b, w[1], c, w[2], d, w[3], help);
    line.erase(line.find_last_not_of(' ') + 1);
    std::fputs((line + "\n").c_str(), stdout);
  };
  row(head[0], head[1], head[2], head[3], head[4]);
  for (const auto& e : entries)
    row(cell(e.name), cell(e.type), cell(e.defaultValue), cell(e.value), e.help);
  strata::Status st = strata::configStatus();
  if (!st.ok()) std::fprintf(stderr, "strata-run: warning: %s\n", st.message().c_str());
}

int launcherMain(int argc, char** argv) {
  strata::launcher::initChildState();

  CLI::App app{"Runs the ranks of a strata program on this machine:\n"
               "  strata-run -n N [options] -- program [args...]",
               "strata-run"};
  int nranks = 0;
  bool threads = false, noPrefix = false, showConfig = false;
  double timeoutSec = 0;
  CLI::Option* nOpt = app.add_option("-n,--nranks", nranks, "number of ranks (processes; threads with --threads)");
  app.add_flag("--threads", threads, "run one process that starts the N rank threads itself (STRATA_NTHREADS=N)");
  CLI::Option* tOpt = app.add_option("--timeout", timeoutSec, "end the job after SECONDS and exit 124");
  tOpt->type_name("SECONDS");
  std::string bind = "core";
  app.add_option("--bind", bind,
                 "core: bind each rank process to its own CPU (one per physical core first) when the ranks fit "
                 "in this process's CPUs, as mpirun does; none: leave placement to the OS")
      ->check(CLI::IsMember({"core", "none"}));
  app.add_flag("--no-prefix", noPrefix, "relay rank output as is, without the \"[R] \" line prefix");
  bool keepGoing = false;
  app.add_flag("--keep-going", keepGoing,
               "a rank killed by a signal does not end the job: the others go on (elastic jobs shrink past it); "
               "exit 0 when the ranks that ran to their end all exited 0");
  app.add_flag("--config", showConfig, "print the configuration variables (STRATA_*) and exit");
  int nodes = 0, ppn = 0, rails = 1;
  std::string railRate, nodePrefix;
  bool cleanupVc = false;
  CLI::Option* nodesOpt = app.add_option(
      "--nodes", nodes,
      "run on a virtual cluster of N nodes: network namespaces with their own hostnames and rail "
      "interfaces, joined by bridges (needs root: CAP_NET_ADMIN)")
      ->type_name("N");
  CLI::Option* ppnOpt =
      app.add_option("--ppn", ppn, "ranks per virtual node (rank r on node r / K); default -n / --nodes, or 1")
          ->type_name("K");
  CLI::Option* railsOpt =
      app.add_option("--rails", rails, "rail interfaces rail0..rail<R-1> per virtual node (default 1)")->type_name("R");
  CLI::Option* rateOpt = app.add_option(
      "--rail-rate", railRate, "limit each rail of each node to RATE per direction (tc units: 1gbit, 100mbit, 10gbit)");
  rateOpt->type_name("RATE");
  CLI::Option* prefixOpt =
      app.add_option("--node-prefix", nodePrefix,
                     "virtual node i's hostname is PREFIX-node<i> (default: this host's name)")
          ->type_name("PREFIX");
  app.add_flag("--cleanup-vcluster", cleanupVc,
               "remove the virtual-cluster namespaces, bridges and veths of launchers that are gone, and exit");
  app.prefix_command();
  app.footer(
      "Each rank gets STRATA_RANK, STRATA_WORLD_SIZE, STRATA_LOCAL_RANK, STRATA_LOCAL_SIZE and\n"
      "STRATA_UNIQUE_ID. A failing rank ends the job (SIGTERM, SIGKILL 3 s later) with its exit code.\n"
      "With --nodes also STRATA_NODE, STRATA_SOCKET_IFNAME=rail (unless set), STRATA_VCLUSTER_NODES,\n"
      "STRATA_VCLUSTER_RAILS and STRATA_VCLUSTER_RAIL_RATE (bits/s, with --rail-rate); rank r runs on\n"
      "node r / K, whose rail<i> has address 198.18.<i>.<node+1>/24; the launcher is 198.18.0.254.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kUsageError;
  }

  if (showConfig) {
    printConfig();
    return 0;
  }
  if (cleanupVc) return strata::launcher::cleanupStaleVClusters();

  std::vector<std::string> cmd = app.remaining();
  bool explicitSeparator = !cmd.empty() && cmd.front() == "--";
  if (explicitSeparator) cmd.erase(cmd.begin());
  if (!explicitSeparator && !cmd.empty() && cmd.front().size() > 1 && cmd.front()[0] == '-')
    return usageError(fmt::format("unknown option '{}'", cmd.front()));
  const bool vcluster = nodesOpt->count() > 0;
  if (!vcluster) {
    for (CLI::Option* o : {ppnOpt, railsOpt, rateOpt, prefixOpt})
      if (o->count() > 0) return usageError(fmt::format("{} needs --nodes", o->get_name()));
  } else {
    using strata::launcher::kMaxRails;
    using strata::launcher::kMaxVNodes;
    if (threads) return usageError("--threads cannot be used with --nodes (ranks are processes on the virtual nodes)");
    if (nodes < 1 || nodes > kMaxVNodes)
      return usageError(fmt::format("--nodes must be between 1 and {}, got {}", kMaxVNodes, nodes));
    if (rails < 1 || rails > kMaxRails)
      return usageError(fmt::format("--rails must be between 1 and {}, got {}", kMaxRails, rails));
    if (ppnOpt->count() > 0 && ppn < 1) return usageError(fmt::format("--ppn must be at least 1, got {}", ppn));
    if (ppnOpt->count() == 0) {
      if (nOpt->count() > 0 && (nranks < 1 || nranks % nodes != 0))
        return usageError(fmt::format("-n {} is not a multiple of --nodes {}; give --ppn", nranks, nodes));
      ppn = nOpt->count() > 0 ? nranks / nodes : 1;
    }
    if (static_cast<long>(nodes) * ppn > kMaxRanks)
      return usageError(fmt::format("--nodes x --ppn is more than {} ranks", kMaxRanks));
    if (nOpt->count() > 0 && nranks != nodes * ppn)
      return usageError(
          fmt::format("-n {} does not match --nodes {} x --ppn {} = {}", nranks, nodes, ppn, nodes * ppn));
    nranks = nodes * ppn;
    if (prefixOpt->count() > 0 && !std::regex_match(nodePrefix, std::regex("[A-Za-z0-9][A-Za-z0-9-]{0,39}")))
      return usageError(fmt::format("--node-prefix must be up to 40 letters, digits and '-', got '{}'", nodePrefix));
  }
  uint64_t rateBits = 0;
  if (rateOpt->count() > 0 && !strata::launcher::parseRate(railRate, &rateBits))
    return usageError(fmt::format("--rail-rate '{}' is not a rate (e.g. 1gbit, 100mbit, 2.5gbit)", railRate));
  if (nOpt->count() == 0 && !vcluster) return usageError("-n N (the number of ranks) is required");
  if (nranks < 1 || nranks > kMaxRanks)
    return usageError(fmt::format("-n must be between 1 and {}, got {}", kMaxRanks, nranks));
  if (tOpt->count() > 0 && !(timeoutSec > 0))
    return usageError(fmt::format("--timeout must be a positive number of seconds, got {}", timeoutSec));
  if (cmd.empty()) return usageError("no program given");

  int err = 0;
  std::string path = strata::launcher::resolveProgram(cmd.front(), &err);
  if (path.empty()) {
    bool searched = cmd.front().find('/') == std::string::npos;
    if (err == ENOENT)
      std::fprintf(stderr, "strata-run: program '%s' not found%s\n", cmd.front().c_str(), searched ? " in PATH" : "");
    else
      std::fprintf(stderr, "strata-run: program '%s' is not executable\n", cmd.front().c_str());
    return strata::launcher::execFailureCode(err);
  }

  strata::launcher::ensureFdLimit(2 * static_cast<size_t>(threads ? 1 : nranks) + 64);
  // Before any thread exists (the bootstrap root below), so that every thread blocks them.
  int signalFd = strata::launcher::blockLauncherSignals();
  if (signalFd < 0) {
    std::perror("strata-run: signalfd");
    return 1;
  }

  // Built before the bootstrap root starts; removed when `vc` goes, whichever way the job ends.
  std::unique_ptr<strata::launcher::VCluster> vc;
  if (vcluster) {
    strata::launcher::VClusterSpec spec;
    spec.nodes = nodes;
    spec.ppn = ppn;
    spec.rails = rails;
    spec.rateBits = rateBits;
    spec.rateText = railRate;
    spec.hostPrefix = nodePrefix;
    if (int rc = strata::launcher::VCluster::create(spec, signalFd, &vc); rc != 0) return rc;
  }

  strataUniqueId id;
  strata::Status st = strata::createUniqueId(&id, /*persistent=*/true, vc ? vc->rootAddr() : 0);
  if (!st.ok()) {
    std::fprintf(stderr, "strata-run: cannot create the job's unique id: %s\n", st.message().c_str());
    return 1;
  }

  strata::launcher::JobOptions opt;
  opt.nranks = nranks;
  opt.threads = threads;
  opt.timeoutSec = timeoutSec;
  opt.prefix = !noPrefix;
  opt.keepGoing = keepGoing;
  opt.path = path;
  opt.argv = cmd;
  opt.uniqueIdHex = strata::uniqueIdToHex(id);
  opt.cpus = strata::launcher::rankCpus(bind, nranks, threads);
  if (vc) opt.placeRank = [&vc](int rank, strata::launcher::RankSpec* spec) { vc->placeRank(rank, spec); };
  // Hang reports: ranks dump their op rings into the job's dump directory when an operation fails
  // and when asked before being stopped; a failed job ends with the diagnosis.
  strata::launcher::DumpCollector dumps;
  std::string dumpErr;
  if (dumps.init(strata::config().dumpDir, &dumpErr)) opt.dumps = &dumps;
  else std::fprintf(stderr, "strata-run: warning: %s; no hang report\n", dumpErr.c_str());
  const int rc = strata::launcher::runJob(opt, signalFd);
  if (rc != 0 && opt.dumps) {
    size_t n = 0;
    const std::string report = dumps.diagnosis(&n);
    if (!report.empty())
      std::fprintf(stderr, "strata-run: hang report from %zu rank process dump%s%s:\n%s", n, n == 1 ? "" : "s",
                   strata::config().dumpDir.empty() ? "" : (" in " + dumps.dir()).c_str(), report.c_str());
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  int rc = launcherMain(argc, argv);
  std::fflush(stdout);
  std::fflush(stderr);
  // The bootstrap root thread is still serving: leave without running static destructors under it.
  _exit(rc);
}
