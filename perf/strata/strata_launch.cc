// strata_launch.cc: processes x threads. With several threads per process, the processes first
// join the launcher's communicator to share one unique id, then every thread joins the world.
#include "perf/strata/strata_launch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "perf/common/device.h"
#include "perf/strata/strata_backend.h"
#include "strata/strata.h"

namespace strata::perf {
namespace {

void check(strataResult_t rc, const char* what, strataComm_t comm = nullptr) {
  if (rc != strataSuccess)
    throw std::runtime_error(
        fmt::format("{} failed: {}: {}", what, strataGetErrorString(rc), strataGetLastError(comm)));
}

// Started by a launcher that gives each process a rank (strata-run without --threads, mpirun,
// torchrun, srun)? strataCommInitFromEnv reads the same variables.
bool launchedAsProcesses() {
  for (const char* v : {"STRATA_RANK", "OMPI_COMM_WORLD_RANK", "RANK", "SLURM_PROCID"})
    if (std::getenv(v)) return true;
  return false;
}

// Rank threads per process: -t, or `strata-run --threads -n N` (STRATA_NTHREADS).
int threadsPerProcess(const Options& o) {
  const char* env = std::getenv("STRATA_NTHREADS");
  if (!env || launchedAsProcesses()) return o.nThreads;
  const int n = std::atoi(env);
  if (o.nThreadsGiven && o.nThreads != n)
    throw std::runtime_error(fmt::format("strata-run --threads started {} ranks but -t says {}", n, o.nThreads));
  return n > 0 ? n : o.nThreads;
}

// --memory device: makes the rank's GPU current before its communicator is created, as NCCL
// expects (the sweep selects the same one again, by the same rule, once the rank is known).
void preselectDevice(const Options& o, int localRank) {
  if (o.memory != "device" || localRank < 0) return;
  try {
    selectDevice(localRank);
  } catch (const std::exception&) {  // reported, on every rank, when the sweep opens the device
  }
}

// Runs body on comm, then frees it (aborts it on failure so that waiting peers fail fast).
int runOn(strataComm_t comm, int nprocs, int thread, const RankBody& body) {
  StrataBackend backend(comm);
  const int rc = body(backend, nprocs, thread);
  if (rc == kExitError) strataCommAbort(comm);
  else strataCommDestroy(comm);
  return rc;
}

}  // namespace

int launchStrataRanks(const Options& o, const RankBody& body) {
  const int nthreads = threadsPerProcess(o);
  int nprocs = 1, proc = 0;
  strataUniqueId id{};
  if (launchedAsProcesses()) {
    if (nthreads == 1) preselectDevice(o, launcherLocalRank());
    strataComm_t env = nullptr;
    check(strataCommInitFromEnv(&env, nullptr), "strataCommInitFromEnv");
    strataCommCount(env, &nprocs);
    strataCommUserRank(env, &proc);
    if (nthreads == 1) return runOn(env, nprocs, 0, body);
    if (proc == 0) check(strataGetUniqueId(&id), "strataGetUniqueId");
    check(strataBroadcast(&id, &id, sizeof id, strataUint8, 0, env), "sharing the unique id", env);
    strataCommDestroy(env);
  } else {
    check(strataGetUniqueId(&id), "strataGetUniqueId");
  }
  const int world = nprocs * nthreads;
  std::vector<int> codes(static_cast<size_t>(nthreads), kExitOk);
  auto rankThread = [&](int t) {
    preselectDevice(o, perfLocalRank(proc * nthreads + t, t, nthreads));
    strataComm_t comm = nullptr;
    const strataResult_t rc = strataCommInitRank(&comm, world, id, proc * nthreads + t);
    if (rc != strataSuccess) {
      std::fprintf(stderr, "strataCommInitRank (rank %d of %d) failed: %s: %s\n", proc * nthreads + t, world,
                   strataGetErrorString(rc), strataGetLastError(nullptr));
      codes[t] = kExitError;
      return;
    }
    codes[t] = runOn(comm, nprocs, t, body);
  };
  if (nthreads == 1) {
    rankThread(0);
  } else {
    std::vector<std::thread> threads;
    for (int t = 0; t < nthreads; ++t) threads.emplace_back(rankThread, t);
    for (auto& th : threads) th.join();
  }
  int worst = kExitOk;
  for (int c : codes) worst = std::max(worst, c);
  return worst;
}

}  // namespace strata::perf
