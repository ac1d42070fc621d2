// comm_setup_bench: how communicator creation scales. Creates N ranks as threads of this process
// (strataCommInitAll), then runs one small all-reduce and one ring of send/recv (the connections a
// ring needs), and reports per step the wall time, and per rank the file descriptors and resident
// memory it added. With STRATA_TOPO_FILE placing the ranks on virtual nodes, ranks of different
// nodes use the network transports, as across machines.
//   comm_setup_bench --ranks 16,64,256 [--ppn 8] [--reps 3]
// --ppn K writes a temporary topology file of ceil(N/K) virtual nodes of K ranks each and points
// STRATA_TOPO_FILE at it, so that ranks of different virtual nodes connect over tcp.
#include <dirent.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "strata/strata.h"

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

int openFds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n - 3;  // ".", ".." and the directory's own fd
}

double residentMiB() {
  long pages = 0, resident = 0;
  if (FILE* f = fopen("/proc/self/statm", "r")) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
  }
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

// A topology file of ceil(n/ppn) virtual nodes with ppn ranks each (one rail).
std::string writeVirtualCluster(int n, int ppn) {
  char path[] = "/tmp/strata-setup-bench-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return "";
  std::string s = "{\"version\": 1, \"rails\": 1, \"nodes\": [";
  const int nodes = (n + ppn - 1) / ppn;
  for (int i = 0; i < nodes; ++i) s += (i ? ", " : "") + std::string("{\"hostname\": \"vnode") + std::to_string(i) + "\"}";
  s += "], \"placement\": {\"ranks_per_node\": " + std::to_string(ppn) + "}}\n";
  bool ok = write(fd, s.data(), s.size()) == static_cast<ssize_t>(s.size());
  close(fd);
  return ok ? path : "";
}

bool check(strataResult_t r, const char* what) {
  if (r == strataSuccess) return true;
  fprintf(stderr, "comm_setup_bench: %s failed: %s\n", what, strataGetLastError(nullptr));
  return false;
}

struct Sample {
  double init = 0, allReduce = 0, ring = 0, destroy = 0;
  int fds = 0;
  double mib = 0;
};

bool runOnce(int n, Sample* s) {
  const int fd0 = openFds();
  const double mem0 = residentMiB();
  std::vector<strataComm_t> comms(static_cast<size_t>(n));
  double t0 = now();
  if (!check(strataCommInitAll(comms.data(), n), "strataCommInitAll")) return false;
  s->init = now() - t0;
  // Both steps run on every rank at once; each rank's thread reports whether it succeeded.
  std::vector<int> ok(static_cast<size_t>(n), 1);
  auto onAll = [&](auto&& fn) {
    std::vector<std::thread> th;
    for (int r = 0; r < n; ++r) th.emplace_back([&, r] { ok[r] = fn(r) ? 1 : 0; });
    for (auto& t : th) t.join();
    return std::all_of(ok.begin(), ok.end(), [](int v) { return v == 1; });
  };
  t0 = now();
  bool good = onAll([&](int r) {
    float v = static_cast<float>(r);
    float out = 0;
    return strataAllReduce(&v, &out, 1, strataFloat32, strataSum, comms[r]) == strataSuccess &&
           out == static_cast<float>(n) * static_cast<float>(n - 1) / 2;
  });
  s->allReduce = now() - t0;
  t0 = now();
  good = good && onAll([&](int r) {
    int mine = r, got = -1;
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    if (strataGroupStart() != strataSuccess) return false;
    bool posted = strataSend(&mine, 1, strataInt32, next, comms[r]) == strataSuccess &&
                  strataRecv(&got, 1, strataInt32, prev, comms[r]) == strataSuccess;
    return strataGroupEnd() == strataSuccess && posted && got == prev;
  });
  s->ring = now() - t0;
  s->fds = openFds() - fd0;
  s->mib = residentMiB() - mem0;
  t0 = now();
  for (strataComm_t c : comms) strataCommDestroy(c);
  s->destroy = now() - t0;
  if (!good) fprintf(stderr, "comm_setup_bench: a collective on %d ranks returned a wrong result\n", n);
  return good;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"comm_setup_bench: communicator creation time, fds and memory per rank"};
  std::vector<int> ranks{16, 64, 256};
  int reps = 3;
  int ppn = 0;
  app.add_option("--ranks", ranks, "rank counts (threads of this process)")->delimiter(',');
  app.add_option("--reps", reps, "repetitions per count (the best time is reported)")->check(CLI::PositiveNumber);
  app.add_option("--ppn", ppn, "ranks per virtual node (0: all ranks on this machine's node)");
  CLI11_PARSE(app, argc, argv);
  printf("# %6s %10s %12s %10s %10s %10s %12s\n", "ranks", "init_s", "allreduce_s", "ring_s", "destroy_s",
         "fds/rank", "MiB/rank");
  // strata reads its configuration once: one file, sized for the largest count, serves them all.
  std::string topo;
  if (ppn > 0) {
    topo = writeVirtualCluster(*std::max_element(ranks.begin(), ranks.end()), ppn);
    if (topo.empty() || setenv("STRATA_TOPO_FILE", topo.c_str(), 1) != 0) {
      fprintf(stderr, "comm_setup_bench: cannot write a topology file in /tmp\n");
      return 1;
    }
  }
  for (int n : ranks) {
    Sample best;
    best.init = 1e30;
    for (int i = 0; i < reps; ++i) {
      Sample s;
      if (!runOnce(n, &s)) return 1;
      if (s.init < best.init) best = s;
    }
    printf("  %6d %10.3f %12.3f %10.3f %10.3f %10.2f %12.3f\n", n, best.init, best.allReduce, best.ring,
           best.destroy, static_cast<double>(best.fds) / n, best.mib / n);
    fflush(stdout);
  }
  if (!topo.empty()) unlink(topo.c_str());
  return 0;
}
