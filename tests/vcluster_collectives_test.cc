// vcluster_collectives_test: every collective, exact, on ranks spread over virtual nodes.
//
// 1. Unprivileged virtual clusters (STRATA_TOPO_FILE places the ranks of one machine on virtual
//    nodes; topology/files/virtual_*.json: 2x2, 2x3, 4x2, uneven 2+1+3, and 2x3 round-robin):
//    `strata-run -n N -- strata_check_worker --topology --transports` with STRATA_ALGO=hier, auto
//    and flat ones (ring; pairwise), every rank exact (runTopologySweep: every collective, counts
//    0..~1M, in and out of place, roots on every node, dtypes x ops, send/recv). Each rank also
//    reports its connection kind per peer: tcp exactly between ranks of different virtual nodes,
//    shared memory within a node, and the debug log's "connects to rank" lines (connections are
//    made on first use) name only cross-node pairs, covering every node. Ranks as threads of one process, and processes of several rank threads,
//    placed on virtual nodes: threads on different nodes use tcp too. A rank killed mid-all-reduce
//    makes every other rank fail with an error naming it.
// 2. Network-namespace clusters (strata-run --nodes 2 --ppn 2 --rails 2; need root with
//    CAP_NET_ADMIN and CAP_SYS_ADMIN and `ip`, skipped visibly otherwise): the same sweep for hier
//    and auto (and auto on shaped rails), tcp striped over both rails (socket 0 on the pair's rail)
//    with the expected addresses between nodes, a
//    killed rank fails every other rank, and the launcher's namespaces, bridges and veths are gone
//    afterwards. Jobs of parallel test processes queue on strata-run's machine-wide lock.
// 3. Bad topology files: communicator creation fails on every rank, naming the file and the
//    problem (a placement naming a node that does not exist, a hostname no node has, a placement
//    covering fewer ranks than the world).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/netns_support.h"

#include "collectives/comm.h"
#include "strata/strata.h"
#include "support/coll_checks.h"
#include "support/thread_ranks.h"
#include "support/topo_placement.h"
#include "topology/topo_file.h"

#if defined(STRATA_RUN_BIN) && defined(WORKER_BIN) && defined(TOPO_FILES_DIR)
#define HAVE_PROGS 1
#else
#define HAVE_PROGS 0
#endif
#ifndef STRATA_RUN_BIN
#define STRATA_RUN_BIN ""
#endif
#ifndef WORKER_BIN
#define WORKER_BIN ""
#endif
#ifndef TOPO_FILES_DIR
#define TOPO_FILES_DIR ""
#endif

namespace {

using Clock = std::chrono::steady_clock;
using Env = std::vector<std::pair<std::string, std::string>>;

std::string topoFile(const std::string& name) { return std::string(TOPO_FILES_DIR) + "/" + name + ".json"; }

// ---------------------------------------------------------------------------------------------
// Processes: started with fork/exec (so the launcher's pid is known: its namespaces carry it),
// stdout and stderr captured together, SIGKILLed past a time limit.

struct Proc {
  int code = -1;          ///< exit code, or 128+signal
  bool limitHit = false;  ///< killed at the time limit
  std::string out;        ///< stdout and stderr, interleaved
  pid_t pid = -1;
};

/// The variables a job must not inherit from the test's environment.
const char* const kCleared[] = {"STRATA_TOPO_FILE", "STRATA_ALGO",        "STRATA_TRANSPORT",  "STRATA_UNIQUE_ID",
                                "STRATA_RANK",      "STRATA_WORLD_SIZE",  "STRATA_LOG_LEVEL",  "STRATA_SOCKET_IFNAME",
                                "STRATA_JOIN_TIMEOUT", "STRATA_TIMEOUT",  "RANK",              "WORLD_SIZE",
                                "MASTER_ADDR",      "MASTER_PORT",        "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"};

/// Runs every command concurrently (each with `env` on top of the test's environment, less
/// kCleared) and waits for all, up to `limitSec`.
std::vector<Proc> runAll(const std::vector<std::vector<std::string>>& cmds, const std::vector<Env>& envs,
                         double limitSec) {
  std::vector<Proc> procs(cmds.size());
  std::vector<int> fds(cmds.size(), -1);
  for (size_t k = 0; k < cmds.size(); ++k) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
      ADD_FAILURE() << "pipe: " << std::strerror(errno);
      return procs;
    }
    std::vector<std::string> store = cmds[k];
    std::vector<char*> argv;
    for (auto& s : store) argv.push_back(s.data());
    argv.push_back(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      for (const char* v : kCleared) unsetenv(v);
      for (const auto& [name, value] : envs[k]) setenv(name.c_str(), value.c_str(), 1);
      int null = open("/dev/null", O_RDONLY);
      dup2(null, 0);
      dup2(p[1], 1);
      dup2(p[1], 2);
      execv(argv[0], argv.data());
      _exit(121);
    }
    close(p[1]);
    procs[k].pid = pid;
    fds[k] = p[0];
  }
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limitSec));
  bool killed = false;
  for (;;) {
    std::vector<pollfd> pfds;
    std::vector<size_t> which;
    for (size_t k = 0; k < fds.size(); ++k)
      if (fds[k] >= 0) pfds.push_back({fds[k], POLLIN, 0}), which.push_back(k);
    if (pfds.empty()) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0 && !killed) {
      killed = true;
      for (size_t k = 0; k < procs.size(); ++k)
        if (fds[k] >= 0) procs[k].limitHit = true, kill(procs[k].pid, SIGKILL);
    }
    const int n = poll(pfds.data(), pfds.size(), killed ? 2000 : static_cast<int>(std::min<long long>(left, 200)));
    if (n == 0 && killed) break;  // a grandchild holds the pipe open: give up on it
    for (size_t i = 0; i < pfds.size(); ++i) {
      if (!(pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      const ssize_t got = read(pfds[i].fd, buf, sizeof(buf));
      if (got > 0) {
        procs[which[i]].out.append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        close(pfds[i].fd);
        fds[which[i]] = -1;
      }
    }
  }
  for (int fd : fds)
    if (fd >= 0) close(fd);
  for (Proc& p : procs) {
    int status = 0;
    while (waitpid(p.pid, &status, 0) < 0 && errno == EINTR) {
    }
    p.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return procs;
}

Proc runOne(const std::vector<std::string>& cmd, const Env& env, double limitSec) {
  return runAll({cmd}, {env}, limitSec).front();
}

bool has(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

// ---------------------------------------------------------------------------------------------
// The expected layout of a placement and what the worker and the log report.

/// Node (numbered in order of first rank, as CommLayout does) and local rank of every rank.
struct Placement {
  std::vector<int> node, local;
  int nranks() const { return static_cast<int>(node.size()); }
};

Placement placementOf(const std::vector<int>& rankNode) {
  Placement p;
  std::map<int, int> renumber, members;
  for (int k : rankNode) {
    auto it = renumber.emplace(k, static_cast<int>(renumber.size())).first;
    p.node.push_back(it->second);
    p.local.push_back(members[it->second]++);
  }
  return p;
}

Placement placementOfFile(const std::string& path) {
  strata::topology::Cluster c;
  strata::Status st = strata::topology::loadTopologyFile(path, &c);
  EXPECT_TRUE(st.ok()) << st.message();
  return placementOf(c.rankNode);
}

/// The worker's "[R] rank R transports: 0:KIND 1:KIND ..." lines: kinds[R][P].
std::map<int, std::map<int, std::string>> transportsOf(const std::string& out) {
  std::map<int, std::map<int, std::string>> kinds;
  const std::regex line(R"((^|\n)\[(\d+)\] rank (\d+) transports:([^\n]*))");
  for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end; ++it) {
    const int r = std::stoi((*it)[3]);
    std::istringstream in((*it)[4].str());
    for (std::string tok; in >> tok;) {
      const size_t colon = tok.find(':');
      kinds[r][std::stoi(tok.substr(0, colon))] = tok.substr(colon + 1);
    }
  }
  return kinds;
}

/// Every rank reported exactly one connection per peer, tcp between nodes and `local` within one.
void expectTransports(const std::string& out, const Placement& pl, const std::string& local,
                      const std::string& remote = "tcp") {
  const auto kinds = transportsOf(out);
  ASSERT_EQ(static_cast<int>(kinds.size()), pl.nranks()) << out;
  for (int r = 0; r < pl.nranks(); ++r) {
    ASSERT_TRUE(kinds.count(r)) << "rank " << r << " reported no transports\n" << out;
    const auto& mine = kinds.at(r);
    EXPECT_EQ(static_cast<int>(mine.size()), pl.nranks()) << out;
    for (int p = 0; p < pl.nranks(); ++p) {
      const std::string want = p == r ? "self" : pl.node[p] != pl.node[r] ? remote : local;
      EXPECT_EQ(mine.count(p) ? mine.at(p) : "(none)", want)
          << "rank " << r << " (node " << pl.node[r] << ") to rank " << p << " (node " << pl.node[p] << ")";
    }
    EXPECT_TRUE(has(out, "rank " + std::to_string(r) + " node " + std::to_string(pl.node[r]) + " local " +
                             std::to_string(pl.local[r]) + "\n"))
        << "rank " << r << " is not on node " << pl.node[r] << " as local rank " << pl.local[r];
  }
}

struct Connect {
  int from, to, rail, socket;
  std::string fromAddr, toAddr;
};

/// The debug log's "rank A connects to rank B on rail R (socket I): X:0 -> Y:port" lines (tcp
/// data sockets between ranks of different nodes).
std::vector<Connect> connectsOf(const std::string& out) {
  std::vector<Connect> c;
  const std::regex line(R"(rank (\d+) connects to rank (\d+) on rail (-?\d+) \(socket (\d+)\): ([0-9.]+):\d+ -> ([0-9.]+):\d+)");
  for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end; ++it)
    c.push_back({std::stoi((*it)[1]), std::stoi((*it)[2]), std::stoi((*it)[3]), std::stoi((*it)[4]), (*it)[5], (*it)[6]});
  return c;
}

/// Connections are made on first use: the pairs (a < b) that opened tcp data sockets are pairs on
/// different nodes (never two ranks of one node), the lower rank connected, and every node talked
/// to another over tcp.
void expectTcpPairs(const std::string& out, const Placement& pl) {
  std::set<std::pair<int, int>> got;
  std::set<int> nodesTalking;
  for (const Connect& c : connectsOf(out)) {
    got.insert({c.from, c.to});
    EXPECT_LT(c.from, c.to) << "the higher rank connected";
    nodesTalking.insert(pl.node[c.from]);
    nodesTalking.insert(pl.node[c.to]);
  }
  for (const auto& [a, b] : got) EXPECT_NE(pl.node[a], pl.node[b]) << "tcp between ranks " << a << " and " << b << " of one node";
  std::set<int> nodes(pl.node.begin(), pl.node.end());
  EXPECT_EQ(nodesTalking, nodes) << "a node never used tcp";
}

/// Each rank printed "rank R: N checks passed, 0 failed" with N > 0.
int passedRanks(const std::string& out, int* checksPerRank = nullptr) {
  const std::regex line(R"(rank (\d+): (\d+) checks passed, 0 failed)");
  std::set<int> ranks;
  for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end; ++it)
    if (std::stoi((*it)[2]) > 0) {
      ranks.insert(std::stoi((*it)[1]));
      if (checksPerRank) *checksPerRank = std::stoi((*it)[2]);
    }
  return static_cast<int>(ranks.size());
}

/// The FAIL lines of the output (what differed), for messages.
std::string failures(const std::string& out) {
  std::string f;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);)
    if (has(l, "FAIL ") || has(l, "init failed") || has(l, "strata-run:")) f += l + "\n";
  return f.empty() ? out.substr(out.size() > 6000 ? out.size() - 6000 : 0) : f;
}

// ---------------------------------------------------------------------------------------------
// 1. Unprivileged virtual clusters from topology files: ranks as processes.

struct TopoCase {
  const char* file;  ///< topology/files/<file>.json
  const char* algo;  ///< STRATA_ALGO
  bool large;        ///< with the ~1M-element cases
  const char* transport = "auto";  ///< STRATA_TRANSPORT (ucx: UCX between the virtual nodes)
};
// Stable names in CTest (gtest_discover_tests shows GetParam(), by default as raw bytes).
void PrintTo(const TopoCase& c, std::ostream* os) {
  *os << c.file << " " << c.algo << (c.large ? "" : " quick") << " " << c.transport;
}

class TopologyFileCluster : public ::testing::TestWithParam<TopoCase> {
 protected:
  void SetUp() override {
    if (!HAVE_PROGS) GTEST_SKIP() << "strata-run or strata_check_worker is not built";
  }
};

TEST_P(TopologyFileCluster, EveryCollectiveIsExactAndCrossNodeTrafficIsTcp) {
  const TopoCase c = GetParam();
  const std::string file = topoFile(c.file);
  const Placement pl = placementOfFile(file);
  ASSERT_GT(pl.nranks(), 0);
  std::vector<std::string> cmd = {STRATA_RUN_BIN, "--timeout", "100", "-n", std::to_string(pl.nranks()), "--",
                                  WORKER_BIN,     "--topology", "--transports"};
  if (!c.large) cmd.push_back("--quick");
  const auto start = Clock::now();
  // STRATA_TIMEOUT below the launcher's: a stuck wait reports its step and the ranks it waits on.
  Proc r = runOne(cmd,
                  {{"STRATA_TOPO_FILE", file}, {"STRATA_ALGO", c.algo}, {"STRATA_LOG_LEVEL", "debug"},
                   {"STRATA_TIMEOUT", "60"}, {"STRATA_TRANSPORT", c.transport}},
                  110);
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_FALSE(r.limitHit) << "hung: " << failures(r.out);
  EXPECT_EQ(r.code, 0) << failures(r.out);
  int checks = 0;
  EXPECT_EQ(passedRanks(r.out, &checks), pl.nranks()) << failures(r.out);
  EXPECT_TRUE(has(r.out, "ranks placed on virtual nodes")) << "the topology file was not used";
  const bool ucx = std::string(c.transport) == "ucx";
  expectTransports(r.out, pl, "local(shm)", ucx ? "ucx" : "tcp");
  if (ucx) EXPECT_TRUE(has(r.out, "ucx between nodes (STRATA_TRANSPORT)")) << failures(r.out);
  else expectTcpPairs(r.out, pl);
  std::printf("%s, STRATA_ALGO=%s STRATA_TRANSPORT=%s: %d ranks x %d checks in %.1f s\n", c.file, c.algo,
              c.transport, pl.nranks(), checks, took);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, TopologyFileCluster,
    ::testing::Values(TopoCase{"virtual_2x2", "hier", true}, TopoCase{"virtual_2x2", "auto", true},
                      TopoCase{"virtual_2x2", "ring", true}, TopoCase{"virtual_2x3", "hier", true},
                      TopoCase{"virtual_2x3", "auto", true}, TopoCase{"virtual_2x3", "ring", true},
                      TopoCase{"virtual_4x2", "hier", true}, TopoCase{"virtual_4x2", "auto", true},
                      TopoCase{"virtual_4x2", "ring", true}, TopoCase{"virtual_4x2", "pairwise", false},
                      TopoCase{"virtual_3x2_uneven", "hier", true}, TopoCase{"virtual_3x2_uneven", "auto", true},
                      TopoCase{"virtual_3x2_uneven", "ring", true},
                      TopoCase{"virtual_3x2_uneven", "pairwise", false},
                      TopoCase{"virtual_2x3_interleaved", "hier", true},
                      TopoCase{"virtual_2x3_interleaved", "auto", true},
                      TopoCase{"virtual_2x3_interleaved", "ring", false}
#ifdef STRATA_HAVE_UCX
                      ,  // UCX between the virtual nodes
                      TopoCase{"virtual_2x2", "hier", true, "ucx"}, TopoCase{"virtual_4x2", "ring", false, "ucx"},
                      TopoCase{"virtual_3x2_uneven", "auto", false, "ucx"}
#endif
                      ),
    [](const auto& info) {
      std::string f = info.param.file;
      f = f.substr(f.find('_') + 1);  // 2x2, 3x2_uneven, ...
      const std::string t = info.param.transport;
      return f + "_" + info.param.algo + (info.param.large ? "" : "_quick") + (t == "auto" ? "" : "_" + t);
    });

// A rank killed in the middle of all-reduces on a virtual node: every other rank (shared memory
// to it on its node, tcp from the other nodes) fails with an error naming it.
struct KillCase {
  const char* file;
  const char* algo;
  int victim;
  const char* transport = "auto";
};
void PrintTo(const KillCase& c, std::ostream* os) {
  *os << c.file << " " << c.algo << " victim " << c.victim << " " << c.transport;
}

class TopologyFileKill : public ::testing::TestWithParam<KillCase> {
 protected:
  void SetUp() override {
    if (!HAVE_PROGS) GTEST_SKIP() << "strata-run or strata_check_worker is not built";
  }
};

void expectSurvivorsFailed(const std::string& out, int nranks, int victim) {
  for (int r = 0; r < nranks; ++r) {
    if (r == victim) continue;
    const std::regex line("\\[" + std::to_string(r) + "\\] rank " + std::to_string(r) +
                          ": failed as expected after [0-9.]+ s: ([^\n]*)");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(out, m, line)) << "rank " << r << " did not report an error\n" << out;
    EXPECT_TRUE(has(m.str(1), "rank " + std::to_string(victim))) << "rank " << r << ": " << m.str(1);
  }
  EXPECT_FALSE(has(out, "no error")) << out;
}

TEST_P(TopologyFileKill, EveryOtherRankFailsNamingTheKilledRank) {
  const KillCase c = GetParam();
  const std::string file = topoFile(c.file);
  const Placement pl = placementOfFile(file);
  Proc r = runOne({STRATA_RUN_BIN, "--timeout", "60", "-n", std::to_string(pl.nranks()), "--", WORKER_BIN,
                   "--kill-rank", std::to_string(c.victim), "--kill-after-ms", "300"},
                  {{"STRATA_TOPO_FILE", file}, {"STRATA_ALGO", c.algo}, {"STRATA_TIMEOUT", "30"},
                   {"STRATA_TRANSPORT", c.transport}},
                  70);
  ASSERT_FALSE(r.limitHit) << r.out;
  EXPECT_EQ(r.code, 128 + SIGKILL) << r.out;
  EXPECT_TRUE(has(r.out, "strata-run: rank " + std::to_string(c.victim) + " killed by signal SIGKILL")) << r.out;
  expectSurvivorsFailed(r.out, pl.nranks(), c.victim);
}

INSTANTIATE_TEST_SUITE_P(Layouts, TopologyFileKill,
                         ::testing::Values(KillCase{"virtual_2x2", "hier", 3},
                                           KillCase{"virtual_3x2_uneven", "ring", 2}
#ifdef STRATA_HAVE_UCX
                                           , KillCase{"virtual_2x2", "hier", 3, "ucx"}
#endif
                                           ),
                         [](const auto& info) {
                           std::string f = info.param.file;
                           const std::string t = info.param.transport;
                           return f.substr(f.find('_') + 1) + "_" + info.param.algo + "_victim" +
                                  std::to_string(info.param.victim) + (t == "auto" ? "" : "_" + t);
                         });

// ---------------------------------------------------------------------------------------------
// Ranks as threads placed on virtual nodes.

/// Rank r's connection kinds: "P:KIND" as the worker prints them.
std::map<int, std::string> kindsOf(strataComm_t comm) {
  auto* c = static_cast<strata::Comm*>(comm);
  std::map<int, std::string> k;
  for (int p = 0; p < c->nranks(); ++p)
    k[p] = p == c->rank() ? "self" : c->conn(p) ? c->conn(p)->kindName() : "(none)";
  return k;
}

struct ThreadCase {
  const char* algo;
  const char* transport;  ///< STRATA_TRANSPORT: the kind expected between nodes (auto: tcp)
};
void PrintTo(const ThreadCase& c, std::ostream* os) { *os << c.algo << " " << c.transport; }

class ThreadRanksOnVirtualNodes : public ::testing::TestWithParam<ThreadCase> {};

TEST_P(ThreadRanksOnVirtualNodes, EveryCollectiveIsExactAndOtherNodesAreTcp) {
  // Six threads of this process on two virtual nodes, round-robin: 0, 2, 4 on node 0.
  const std::string file = topoFile("virtual_2x3_interleaved");
  const Placement pl = placementOfFile(file);
  const std::string remote = std::string(GetParam().transport) == "auto" ? "tcp" : GetParam().transport;
  strata::testing::ScopedEnv topo("STRATA_TOPO_FILE", file);
  strata::testing::ScopedEnv algo("STRATA_ALGO", GetParam().algo);
  strata::testing::ScopedEnv transport("STRATA_TRANSPORT", GetParam().transport);
  const int n = pl.nranks();
  std::vector<strata::testing::CheckReport> reps(static_cast<size_t>(n));
  std::vector<std::map<int, std::string>> kinds(static_cast<size_t>(n));
  std::vector<std::pair<int, int>> where(static_cast<size_t>(n));
  strata::testing::runThreadRanks(n, [&](strataComm_t comm, int r) {
    kinds[r] = kindsOf(comm);
    const auto& l = static_cast<strata::Comm*>(comm)->layout();
    where[r] = {l.node(r), l.localRank(r)};
    strata::testing::runTopologySweep(comm, /*large=*/true, &reps[r]);
  });
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(where[r], std::make_pair(pl.node[r], pl.local[r]));
    for (int p = 0; p < n; ++p)
      EXPECT_EQ(kinds[r][p], p == r ? "self" : pl.node[p] != pl.node[r] ? remote : "local(threads)") << "peer " << p;
    EXPECT_GT(reps[r].passed, 0);
    for (const auto& f : reps[r].failures) ADD_FAILURE() << f;
  }
}

INSTANTIATE_TEST_SUITE_P(Algo, ThreadRanksOnVirtualNodes,
                         ::testing::Values(ThreadCase{"hier", "auto"}, ThreadCase{"auto", "auto"}
#ifdef STRATA_HAVE_UCX
                                           , ThreadCase{"auto", "ucx"}
#endif
                                           ),
                         [](const auto& info) {
                           const std::string t = info.param.transport;
                           return std::string(info.param.algo) + (t == "auto" ? "" : "_" + t);
                         });

// Two processes of three rank threads each, round-robin over two virtual nodes: every kind of
// connection at once (threads of one node: pointers; threads of one process on different nodes:
// tcp; processes of one node: shared memory; processes on different nodes: tcp).
TEST(ProcessesOfThreadsOnVirtualNodes, EveryKindOfPeerIsRightAndExact) {
  const std::string file = topoFile("virtual_2x3_interleaved");
  const Placement pl = placementOfFile(file);
  ASSERT_EQ(pl.nranks(), 6);
  strata::testing::ScopedEnv topo("STRATA_TOPO_FILE", file);
  strata::testing::ScopedEnv algo("STRATA_ALGO", "hier");
  strataUniqueId id;
  ASSERT_EQ(strataGetUniqueId(&id), strataSuccess);
  constexpr int kProcs = 2, kThreads = 3;
  int report[2];  // children write "rank R passed N" here
  ASSERT_EQ(pipe(report), 0);
  std::vector<pid_t> pids;
  for (int proc = 0; proc < kProcs; ++proc) {
    pid_t pid = fork();
    if (pid == 0) {
      close(report[0]);
      alarm(100);  // a hang fails the test instead of stalling it
      std::vector<std::thread> threads;
      std::vector<int> bad(kThreads, 0);
      for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
          const int r = proc * kThreads + t;
          strataComm_t comm = nullptr;
          if (strataCommInitRank(&comm, pl.nranks(), id, r) != strataSuccess) {
            std::fprintf(stderr, "rank %d: init failed: %s\n", r, strataGetLastError(nullptr));
            bad[t] = 1;
            return;
          }
          const auto kinds = kindsOf(comm);
          for (int p = 0; p < pl.nranks(); ++p) {
            const std::string want = p == r                       ? "self"
                                     : pl.node[p] != pl.node[r]   ? "tcp"
                                     : p / kThreads == proc       ? "local(threads)"
                                                                  : "local(shm)";
            if (kinds.at(p) != want) {
              std::fprintf(stderr, "rank %d: peer %d is %s, expected %s\n", r, p, kinds.at(p).c_str(), want.c_str());
              bad[t] = 1;
            }
          }
          strata::testing::CheckReport rep;
          strata::testing::runTopologySweep(comm, /*large=*/false, &rep);
          for (const auto& f : rep.failures) std::fprintf(stderr, "rank %d: FAIL %s\n", r, f.c_str());
          if (!rep.ok() || rep.passed == 0) bad[t] = 1;
          const std::string line = "rank " + std::to_string(r) + " passed " + std::to_string(rep.passed) + "\n";
          if (write(report[1], line.data(), line.size()) < 0) bad[t] = 1;  // short lines: atomic
          strataCommDestroy(comm);
        });
      for (auto& th : threads) th.join();
      for (int b : bad)
        if (b) _exit(1);
      _exit(0);
    }
    pids.push_back(pid);
  }
  close(report[1]);
  std::string reported;
  char buf[4096];
  for (ssize_t got; (got = read(report[0], buf, sizeof(buf))) > 0 || (got < 0 && errno == EINTR);)
    if (got > 0) reported.append(buf, static_cast<size_t>(got));
  close(report[0]);
  for (int proc = 0; proc < kProcs; ++proc) {
    int st = 0;
    waitpid(pids[proc], &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
        << "process " << proc << (WIFSIGNALED(st) ? " killed by signal " + std::to_string(WTERMSIG(st))
                                                  : " exited " + std::to_string(WEXITSTATUS(st)))
        << " (its ranks' messages are on stderr)";
  }
  for (int r = 0; r < pl.nranks(); ++r)
    EXPECT_TRUE(std::regex_search(reported, std::regex("rank " + std::to_string(r) + " passed [1-9]")))
        << "rank " << r << " did not finish its checks: " << reported;
  std::printf("%s", reported.c_str());
}

// ---------------------------------------------------------------------------------------------
// 2. Network-namespace clusters (privileged).

/// Why network-namespace clusters cannot be tested here, or "".
std::string missingPrivileges() {
  if (!HAVE_PROGS) return "strata-run or strata_check_worker is not built";
  return strata::testing::netnsUnavailable();
}

class NetnsCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = missingPrivileges();
    if (!why.empty()) GTEST_SKIP() << why;
  }
  static void expectClean(pid_t pid) {
    EXPECT_EQ(strata::testing::joinWords(strata::testing::vclusterObjectsOf(pid)), "") << "virtual-cluster objects of launcher " << pid << " left behind";
    EXPECT_FALSE(has(strata::testing::commandOutput("ip netns list"), "strata-" + std::to_string(pid) + "-"));
  }
};

// 2 nodes x 2 ranks, 2 rails: rank r is local rank r % 2 of node r / 2, home rail = local rank.
const Placement kNetns2x2 = placementOf({0, 0, 1, 1});

/// Cross-node tcp stripes over both rails: a pair's socket 0 runs on the pair's rail (their
/// common home rail, else the lower rank's), socket 1 on the other rail, each from the node's
/// address on that rail (198.18.R.node+1) to the peer's.
void expectRails(const std::string& out) {
  const std::vector<Connect> cs = connectsOf(out);
  EXPECT_FALSE(cs.empty()) << out;
  for (const Connect& c : cs) {
    const int homeFrom = kNetns2x2.local[c.from], homeTo = kNetns2x2.local[c.to];
    const int pairRail = homeFrom == homeTo ? homeFrom : (c.from < c.to ? homeFrom : homeTo);
    const int rail = (pairRail + c.socket) % 2;
    EXPECT_EQ(c.rail, rail) << "rank " << c.from << " -> " << c.to << " socket " << c.socket;
    const std::string net = "198.18." + std::to_string(rail) + ".";
    EXPECT_EQ(c.fromAddr, net + std::to_string(kNetns2x2.node[c.from] + 1)) << "rank " << c.from << " -> " << c.to;
    EXPECT_EQ(c.toAddr, net + std::to_string(kNetns2x2.node[c.to] + 1)) << "rank " << c.from << " -> " << c.to;
  }
}

struct NetnsCase {
  const char* algo;
  const char* rate;  ///< --rail-rate, "" for none
  const char* transport = "auto";
};
void PrintTo(const NetnsCase& c, std::ostream* os) {
  *os << c.algo << (*c.rate ? " rail rate " : "") << c.rate << " " << c.transport;
}

class NetnsCollectives : public NetnsCluster, public ::testing::WithParamInterface<NetnsCase> {};

TEST_P(NetnsCollectives, EveryCollectiveIsExactOverTheRails) {
  const NetnsCase c = GetParam();
  std::vector<std::string> cmd = {STRATA_RUN_BIN, "--timeout", "100", "--nodes", "2", "--ppn", "2", "--rails", "2"};
  if (*c.rate) cmd.insert(cmd.end(), {"--rail-rate", c.rate});
  cmd.insert(cmd.end(), {"--", WORKER_BIN, "--topology", "--transports"});
  Proc r = runOne(cmd, {{"STRATA_ALGO", c.algo}, {"STRATA_LOG_LEVEL", "debug"}, {"STRATA_TRANSPORT", c.transport}},
                  110);
  ASSERT_FALSE(r.limitHit) << "hung: " << failures(r.out);
  EXPECT_EQ(r.code, 0) << failures(r.out);
  EXPECT_TRUE(has(r.out, "strata-run: virtual cluster: 2 nodes x 2 ranks, 2 rails")) << failures(r.out);
  EXPECT_EQ(passedRanks(r.out), 4) << failures(r.out);
  const bool ucx = std::string(c.transport) == "ucx";
  expectTransports(r.out, kNetns2x2, "local(shm)", ucx ? "ucx" : "tcp");
  if (!ucx) {
    expectTcpPairs(r.out, kNetns2x2);
    expectRails(r.out);
  }
  expectClean(r.pid);
}

INSTANTIATE_TEST_SUITE_P(Algo, NetnsCollectives,
                         ::testing::Values(NetnsCase{"hier", ""}, NetnsCase{"auto", ""},
                                           NetnsCase{"auto", "10gbit"}
#ifdef STRATA_HAVE_UCX
                                           , NetnsCase{"hier", "", "ucx"}
#endif
                                           ),
                         [](const auto& info) {
                           const std::string t = info.param.transport;
                           return std::string(info.param.algo) + (*info.param.rate ? "_shaped" : "") +
                                  (t == "auto" ? "" : "_" + t);
                         });

TEST_F(NetnsCluster, KilledRankFailsEveryOtherRankAndTheNamespacesGo) {
  Proc r = runOne({STRATA_RUN_BIN, "--timeout", "60", "--nodes", "2", "--ppn", "2", "--rails", "2", "--", WORKER_BIN,
                   "--kill-rank", "3", "--kill-after-ms", "300"},
                  {{"STRATA_ALGO", "hier"}, {"STRATA_TIMEOUT", "30"}}, 70);
  ASSERT_FALSE(r.limitHit) << r.out;
  EXPECT_TRUE(has(r.out, "(namespaces strata-" + std::to_string(r.pid) + "-n0..n1")) << r.out;
  EXPECT_EQ(r.code, 128 + SIGKILL) << r.out;
  EXPECT_TRUE(has(r.out, "strata-run: rank 3 killed by signal SIGKILL")) << r.out;
  expectSurvivorsFailed(r.out, 4, 3);
  expectClean(r.pid);
}

// ---------------------------------------------------------------------------------------------
// 3. Bad topology files.

class TempDir {
 public:
  TempDir() {
    char t[] = "/tmp/vcluster_collectives_XXXXXX";
    path_ = mkdtemp(t) ? t : "";
  }
  ~TempDir() {
    if (!path_.empty()) std::system(("rm -rf '" + path_ + "'").c_str());
  }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = path_ + "/" + name;
    std::ofstream(p) << text;
    return p;
  }

 private:
  std::string path_;
};

/// virtual_2x2.json with its placement replaced by `placement` (JSON text).
std::string withPlacement(const std::string& placement) {
  const std::string text = strata::testing::withPlacement(topoFile("virtual_2x2"), placement);
  EXPECT_FALSE(text.empty()) << "virtual_2x2.json has no placement line";
  return text;
}

/// Starts `n` workers by hand (no launcher that could stop the others when the first one fails),
/// joining through a root served by this process, and returns each one's result.
std::vector<Proc> runRanksByHand(int n, const std::string& file, double limitSec) {
  // The root gives up on missing ranks after STRATA_JOIN_TIMEOUT (read when the round starts).
  strata::testing::ScopedEnv joinTimeout("STRATA_JOIN_TIMEOUT", "10");
  strataUniqueId id;
  EXPECT_EQ(strataGetUniqueId(&id), strataSuccess);
  std::vector<std::vector<std::string>> cmds;
  std::vector<Env> envs;
  for (int r = 0; r < n; ++r) {
    cmds.push_back({WORKER_BIN, "--quick"});
    envs.push_back({{"STRATA_TOPO_FILE", file},
                    {"STRATA_JOIN_TIMEOUT", "10"},
                    {"STRATA_UNIQUE_ID", strata::uniqueIdToHex(id)},
                    {"STRATA_RANK", std::to_string(r)},
                    {"STRATA_WORLD_SIZE", std::to_string(n)}});
  }
  return runAll(cmds, envs, limitSec);
}

struct BadPlacement {
  const char* name;
  const char* placement;
  const char* problem;  ///< what every rank's message must say after the file name
};
void PrintTo(const BadPlacement& c, std::ostream* os) { *os << c.name; }

class BadTopologyFile : public ::testing::TestWithParam<BadPlacement> {
 protected:
  void SetUp() override {
    if (!HAVE_PROGS) GTEST_SKIP() << "strata-run or strata_check_worker is not built";
  }
};

TEST_P(BadTopologyFile, EveryRankFailsNamingTheFileAndTheProblem) {
  const BadPlacement c = GetParam();
  TempDir dir;
  const std::string file = dir.write(std::string(c.name) + ".json", withPlacement(c.placement));
  const std::string want = "STRATA_TOPO_FILE: " + file + ": " + c.problem;
  // Every rank, started by hand.
  const auto start = Clock::now();
  std::vector<Proc> ranks = runRanksByHand(4, file, 40);
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(ranks[r].code, 2) << ranks[r].out;
    EXPECT_TRUE(has(ranks[r].out, "init failed: " + want)) << ranks[r].out << "\nexpected: " << want;
  }
  EXPECT_LT(took, 5) << "communicator creation should fail at once, not after a join timeout";
  // Under the launcher: the job fails with that message.
  Proc job = runOne({STRATA_RUN_BIN, "--timeout", "30", "-n", "4", "--", WORKER_BIN, "--quick"},
                    {{"STRATA_TOPO_FILE", file}}, 40);
  EXPECT_EQ(job.code, 2) << job.out;
  EXPECT_TRUE(has(job.out, "init failed: " + want)) << job.out;
}

INSTANTIATE_TEST_SUITE_P(
    Placement, BadTopologyFile,
    ::testing::Values(BadPlacement{"missing_node", "[0, 0, 1, 5]",
                                   "placement[3]: node 5 does not exist (the cluster has 2 nodes: 0 .. 1)"},
                      BadPlacement{"unknown_host", "[0, \"vnode9\", 1, 1]", "placement[1]: no node named \"vnode9\""},
                      BadPlacement{"negative_node", "[0, 0, -1, 1]",
                                   "placement[2]: node -1 does not exist (the cluster has 2 nodes: 0 .. 1)"}),
    [](const auto& info) { return std::string(info.param.name); });

// A placement for 3 ranks in a job of 4. The rank it leaves out says so; the ranks it covers must
// fail too, promptly and for the same reason, not wait out the join timeout for the rank that
// cannot join (and report only "did not join").
class ShortPlacement : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HAVE_PROGS) GTEST_SKIP() << "strata-run or strata_check_worker is not built";
    file_ = dir_.write("short.json", withPlacement("[0, 0, 1]"));
  }
  /// An "init failed" line naming the file and what is wrong with it.
  bool saysShort(const std::string& out) const {
    std::istringstream in(out);
    for (std::string l; std::getline(in, l);)
      if (has(l, "init failed: ") && has(l, file_) && has(l, "placement covers 3 ranks")) return true;
    return false;
  }
  TempDir dir_;
  std::string file_;
};

TEST_F(ShortPlacement, TheRankItLeavesOutFailsSayingSo) {
  Proc job = runOne({STRATA_RUN_BIN, "--timeout", "30", "-n", "4", "--", WORKER_BIN, "--quick"},
                    {{"STRATA_TOPO_FILE", file_}}, 40);
  EXPECT_EQ(job.code, 2) << job.out;
  EXPECT_TRUE(saysShort(job.out)) << job.out;
}

TEST_F(ShortPlacement, EveryRankFailsPromptlySayingSo) {
  const auto start = Clock::now();
  std::vector<Proc> ranks = runRanksByHand(4, file_, 40);
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(ranks[r].code, 2) << ranks[r].out;
    EXPECT_TRUE(saysShort(ranks[r].out)) << ranks[r].out;
  }
  EXPECT_LT(took, 5) << "ranks waited for the join timeout (STRATA_JOIN_TIMEOUT=10) instead of failing at once";
}

}  // namespace
