// check_worker.cc: one rank of the multi-process tests. Joins from the launch environment
// (strata-run, torchrun, mpirun or srun), runs the standard correctness sweep, prints
// "rank R: N checks passed" and exits 1 on any failure (listing what differed).
//
//   strata-run -n 4 -- ./strata_check_worker [--quick] [--split] [--memalloc] [--topology] [--transports] [--cpus]
//                                            [--kill-rank V [--kill-after-ms T]]
// --memalloc: instead of the standard sweep, every collective on strataMemAlloc buffers (the
// single-copy path between processes).
// --topology: instead of the standard sweep, runTopologySweep (ranks spread over virtual nodes;
// with --quick without its ~1M-element cases).
// --cpus: also prints "rank R cpus=LIST" after init: the CPUs the calling thread may run on
// (strata binds an unbound rank's thread, auto_bind.h).
// --transports: also prints "rank R transports: P:KIND ..." (KIND: the connection to rank P, tcp,
// local(shm) or local(threads); self for R) and "rank R node K local L"; where the ibverbs transport is
// built, after the sweep also "rank R ib: slot_chunks=A single_copy=B single_copy_reduce=C
// registrations=D" (what this process's ib connections received by each path).
// --kill-rank V [--kill-after-ms T]: instead of a sweep, every rank loops ~1M-element all-reduces;
// rank V kills itself with SIGKILL T ms (default 300) after the communicator is ready, in the
// middle of one. Each other rank must see a failed collective: it prints "rank R: failed as
// expected after S s: MESSAGE" and exits 0 ("rank R: no error" and exit 1 if none comes within
// 30 s). SIGTERM is ignored in this mode, so the launcher's SIGTERM at the victim's death does
// not end the survivors before they report.
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "collectives/comm.h"
#include "strata/strata.h"
#include "support/coll_checks.h"
#include "support/memalloc_checks.h"
#ifdef STRATA_HAVE_IBVERBS
#include "transport/ib/ib_transport.h"
#endif

namespace {

void printTransports(strataComm_t comm) {
  auto* c = static_cast<strata::Comm*>(comm);
  std::string line = "rank " + std::to_string(c->rank()) + " transports:";
  for (int p = 0; p < c->nranks(); ++p) {
    strata::Connection* conn = p == c->rank() ? nullptr : c->conn(p);
    line += " " + std::to_string(p) + ":" + (p == c->rank() ? "self" : conn ? conn->kindName() : "none");
  }
  const strata::topology::CommLayout& l = c->layout();
  std::printf("%s\nrank %d node %d local %d\n", line.c_str(), c->rank(), l.node(c->rank()), l.localRank(c->rank()));
  std::fflush(stdout);
}

int killedRankMode(strataComm_t comm, int rank, int victim, int afterMs) {
  using Clock = std::chrono::steady_clock;
  if (rank == victim) {
    std::thread([afterMs] {
      std::this_thread::sleep_for(std::chrono::milliseconds(afterMs));
      raise(SIGKILL);
    }).detach();
  }
  std::vector<float> buf((size_t{1} << 20) + 1, 1.0f);
  const auto start = Clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  while (seconds() < 30) {
    if (strataAllReduce(buf.data(), buf.data(), buf.size(), strataFloat32, strataMax, comm) != strataSuccess) {
      std::printf("rank %d: failed as expected after %.2f s: %s\n", rank, seconds(), strataGetLastError(comm));
      std::fflush(stdout);
      return 0;
    }
  }
  std::printf("rank %d: no error\n", rank);
  return 1;
}

}  // namespace

static void printCpus(int rank) {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::string list;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) list += (list.empty() ? "" : ",") + std::to_string(c);
  std::printf("rank %d cpus=%s\n", rank, list.c_str());
}

int main(int argc, char** argv) {
  bool quick = false, split = false, memalloc = false, topologySweep = false, transports = false, cpus = false;
  int killRank = -1, killAfterMs = 300;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    if (!std::strcmp(argv[i], "--split")) split = true;
    if (!std::strcmp(argv[i], "--memalloc")) memalloc = true;
    if (!std::strcmp(argv[i], "--topology")) topologySweep = true;
    if (!std::strcmp(argv[i], "--transports")) transports = true;
    if (!std::strcmp(argv[i], "--cpus")) cpus = true;
    if (!std::strcmp(argv[i], "--kill-rank") && i + 1 < argc) killRank = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--kill-after-ms") && i + 1 < argc) killAfterMs = std::atoi(argv[++i]);
  }
  if (killRank >= 0) signal(SIGTERM, SIG_IGN);
  strataComm_t comm = nullptr;
  if (strataCommInitFromEnv(&comm, nullptr) != strataSuccess) {
    std::fprintf(stderr, "init failed: %s\n", strataGetLastError(nullptr));
    return 2;
  }
  int rank = 0, n = 0;
  strataCommUserRank(comm, &rank);
  strataCommCount(comm, &n);
  if (transports) printTransports(comm);
  if (cpus) printCpus(rank);
  if (killRank >= 0) return killedRankMode(comm, rank, killRank, killAfterMs);
  strata::testing::CheckReport rep;
  if (topologySweep)
    strata::testing::runTopologySweep(comm, !quick, &rep);
  else if (memalloc)
    strata::testing::runMemAllocSweep(comm, quick, &rep);
  else
    strata::testing::runStandardSweep(comm, quick, &rep);
  if (split && n > 1) {
    strataComm_t sub = nullptr;
    if (strataCommSplit(comm, rank % 2, -rank, &sub, nullptr) != strataSuccess) {
      rep.fail(std::string("split failed: ") + strataGetLastError(comm));
    } else {
      strata::testing::runStandardSweep(sub, true, &rep);
      strataCommDestroy(sub);
    }
  }
  strataCommDestroy(comm);
#ifdef STRATA_HAVE_IBVERBS
  if (transports) {
    const strata::ib::Counters& k = strata::ib::counters();
    std::printf("rank %d ib: slot_chunks=%llu single_copy=%llu single_copy_reduce=%llu registrations=%llu\n", rank,
                static_cast<unsigned long long>(k.slotChunks.load()), static_cast<unsigned long long>(k.singleCopy.load()),
                static_cast<unsigned long long>(k.singleCopyReduce.load()),
                static_cast<unsigned long long>(k.registrations.load()));
  }
#endif
  for (const auto& f : rep.failures) std::fprintf(stderr, "FAIL %s\n", f.c_str());
  std::printf("rank %d: %d checks passed, %zu failed\n", rank, rep.passed, rep.failures.size());
  return rep.ok() ? 0 : 1;
}
