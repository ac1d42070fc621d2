// strata_soak.cc: strata-soak, a long-running randomized check of the whole library. Runs as every
// rank of a job (one rank per process, or several rank threads per process) and, for a bounded
// time, random steps drawn alike on every rank from a seed rank 0 broadcasts: every collective,
// dtype, reduction op, count (0, 1, odd, up to --max-bytes), root, in place or not, grouped
// send/recv patterns, several calls on several communicators in one (possibly nested) group, on
// the world and on split communicators that are re-created as it runs. Every result is checked
// exactly (tools/soak_exec.h). A watchdog per process reports a call that does not return.
//
//   strata-run -n 4 -- strata-soak --seconds 600            # 4 processes
//   strata-run --threads -n 4 -- strata-soak --seconds 60   # 4 rank threads in one process
//   strata-run -n 2 -- strata-soak --threads 2              # 2 processes x 2 rank threads
//   strata-soak --threads 3 --seconds 10                    # no launcher: rank threads
//   strata-run -n 4 -- strata-soak --seconds 20 --faults kill   # a rank SIGKILLs itself
//
// Rank 0 ends with "strata-soak: N ranks, S s, K operations (by collective: ...), W wrong results,
// H hangs, E errors"; exit 0 only when all three are 0. With --faults, one rank (drawn from the
// seed, or --fault-rank) kills itself (kill), aborts its communicators (abort) or stops calling
// (stall) at a random time (or --fault-after); every other rank must then fail within the
// timeouts and says so ("got the expected error"), the victim exits 10 (or dies), so the job fails.
// --faults corrupt changes one result on one rank: the run must count exactly 1 wrong result.
// Exit codes: 0 pass, 1 wrong results or errors, 2 bad usage, 3 hang (watchdog), 10 fault victim.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "collectives/op_ring.h"
#include "tools/soak_exec.h"

namespace {

using namespace strata::soak;
using Clock = std::chrono::steady_clock;

constexpr int kExitOk = 0, kExitFail = 1, kExitUsage = 2, kExitHang = 3, kExitVictim = 10;

struct Options {
  double seconds = 60;
  uint64_t iterations = 0;
  std::string seed = "0";
  std::string maxBytes = "1M";
  int threads = 0;
  std::string faults = "none";
  int faultRank = -1;
  double faultAfter = -1;
  double opTimeout = 60, hangSeconds = 0;
  std::string report;
  bool trace = false;
  PlanOptions plan;
};

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

bool parseBytes(const std::string& s, size_t* out) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v < 0) return false;
  double mult = 1;
  switch (*end) {
    case 'k': case 'K': mult = 1024.0; ++end; break;
    case 'm': case 'M': mult = 1024.0 * 1024; ++end; break;
    case 'g': case 'G': mult = 1024.0 * 1024 * 1024; ++end; break;
    default: break;
  }
  if (*end == 'B' || *end == 'i') ++end;
  if (*end) return false;
  *out = static_cast<size_t>(v * mult);
  return true;
}

// One rank: its thread's state as the watchdog sees it.
struct RankSlot {
  Progress progress;
  std::atomic<RankRunner*> runner{nullptr};
  int worldRank = -1;
};

// Every process: one watchdog thread over its ranks.
struct Process {
  Options opt;
  int nprocs = 1, proc = 0, threads = 1;
  std::vector<std::unique_ptr<RankSlot>> slots;
  std::atomic<bool> done{false};
};

void watchdog(Process* proc) {
  const auto bound = static_cast<int64_t>(proc->opt.hangSeconds * 1e9);
  while (!proc->done.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
    bool hung = false;
    for (auto& s : proc->slots) {
      const int64_t since = s->progress.sinceNs.load();
      if (since == 0 || now - since < bound) continue;
      RankRunner* r = s->runner.load();
      std::fprintf(stderr, "strata-soak: rank %d: HANG: %s has not returned after %.1f s (--hang-seconds %g)\n",
                   s->worldRank, r ? r->describeCurrent().c_str() : "?", (now - since) / 1e9, proc->opt.hangSeconds);
      hung = true;
    }
    if (!hung) continue;
    std::fflush(stderr);
    // This process's op rings for strata-run's hang report, written before we exit (synchronously:
    // a signal to strata's dump thread and a fixed wait lost the dump on a loaded machine).
    strata::dumpOpRings("hang", /*stderrWithoutDir=*/true);
    std::printf("strata-soak: hang detected, exiting %d\n", kExitHang);
    std::fflush(stdout);
    _exit(kExitHang);
  }
}

// A world call outside the steps (stop check, totals) under the watchdog.
template <typename F>
strataResult_t watched(RankSlot& s, const std::string& what, F call) {
  {
    std::lock_guard<std::mutex> lock(s.progress.m);
    s.progress.what = what;
    s.progress.sinceNs.store(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
  }
  strataResult_t rc = call();
  s.progress.sinceNs.store(0);
  return rc;
}

std::string byCollective(const Stats& st) {
  std::string s;
  for (int k = 0; k < kKinds; ++k) s += fmt::format("{}{} {}", k ? ", " : "", kindName(static_cast<Kind>(k)), st.ops[k]);
  return s;
}

void writeReport(const Process& P, const Options& o, int world, double secs, uint64_t seed, const Stats& t) {
  FILE* f = std::fopen(o.report.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "strata-soak: cannot write %s\n", o.report.c_str());
    return;
  }
  std::string kinds;
  for (int k = 0; k < kKinds; ++k) kinds += fmt::format("{}\"{}\": {}", k ? ", " : "", kindName(static_cast<Kind>(k)), t.ops[k]);
  std::fprintf(f,
               "{\"ranks\": %d, \"processes\": %d, \"threads_per_process\": %d, \"seconds\": %.1f, \"seed\": \"0x%llx\", "
               "\"max_bytes\": %zu, \"operations\": %llu, \"by_collective\": {%s}, \"steps\": %llu, \"groups\": %llu, "
               "\"multi_comm_groups\": %llu, \"splits\": %llu, \"calls\": %llu, \"checked_bytes\": %llu, "
               "\"wrong\": %llu, \"hangs\": %llu, \"errors\": %llu}\n",
               world, P.nprocs, P.threads, secs, static_cast<unsigned long long>(seed), o.plan.maxBytes,
               static_cast<unsigned long long>(t.totalOps()), kinds.c_str(), static_cast<unsigned long long>(t.steps),
               static_cast<unsigned long long>(t.groups), static_cast<unsigned long long>(t.multiComm),
               static_cast<unsigned long long>(t.splits), static_cast<unsigned long long>(t.calls),
               static_cast<unsigned long long>(t.checkedBytes), static_cast<unsigned long long>(t.wrong),
               static_cast<unsigned long long>(t.hangs), static_cast<unsigned long long>(t.errors));
  std::fclose(f);
}

// Runs one rank on `world` (owned); returns its exit code.
int runRank(Process& P, RankSlot& slot, strataComm_t world) {
  const Options& o = P.opt;
  int W = 0, me = 0;
  strataCommCount(world, &W);
  strataCommUserRank(world, &me);
  slot.worldRank = me;
  // The seed: rank 0's, broadcast (every rank then draws the same steps).
  uint64_t seed = std::strtoull(o.seed.c_str(), nullptr, 0);
  if (me == 0 && seed == 0) seed = (static_cast<uint64_t>(std::random_device{}()) << 32 ^ std::random_device{}()) | 1;
  if (strataBroadcast(&seed, &seed, 1, strataUint64, 0, world) != strataSuccess) {
    std::fprintf(stderr, "strata-soak: rank %d: seed broadcast failed: %s\n", me, strataGetLastError(world));
    strataCommAbort(world);
    return kExitFail;
  }
  // The fault: victim and time, drawn from the seed too (or given).
  strata::soak::Rng frng(seed ^ 0xfa017fa017ull);
  const bool faults = o.faults != "none" && o.faults != "corrupt";  // the run stops at the fault
  const int victim = o.faultRank >= 0 ? o.faultRank % W : static_cast<int>(frng.below(static_cast<uint64_t>(W)));
  const double faultAt = o.faultAfter >= 0 ? o.faultAfter : o.seconds * (0.2 + 0.4 * (frng.below(1000) / 1000.0));
  if (me == 0)
    std::printf("strata-soak: %d ranks (%d processes x %d threads), seed 0x%llx, %g s, max-bytes %zu, %d comm slots%s\n",
                W, P.nprocs, P.threads, static_cast<unsigned long long>(seed), o.seconds, o.plan.maxBytes, o.plan.slots,
                o.faults != "none" ? fmt::format(", fault {} on rank {} at {:.1f} s", o.faults, victim, faultAt).c_str() : "");
  std::fflush(stdout);

  Planner planner(seed, W, o.plan);
  std::vector<CommSpec> specs = planner.initialSpecs();
  RankRunner runner(world, W, o.plan, o.opTimeout, &slot.progress);
  slot.runner.store(&runner);
  const auto t0 = Clock::now();
  if (faults && o.faults == "kill" && me == victim) {
    std::thread([me, faultAt, t0] {
      std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(faultAt)));
      std::printf("strata-soak: rank %d: fault injection: SIGKILL at %.2f s\n", me, secondsSince(t0));
      std::fflush(stdout);
      raise(SIGKILL);
    }).detach();
  }
  bool ok = runner.start(specs);
  uint64_t steps = 0;
  bool stop = false, corrupted = false;
  while (ok && !stop) {
    if (o.faults == "corrupt" && me == victim && !corrupted && secondsSince(t0) >= faultAt) {
      std::printf("strata-soak: rank %d: fault injection: changes its next result (step #%llu on, %.2f s)\n", me,
                  static_cast<unsigned long long>(steps), secondsSince(t0));
      std::fflush(stdout);
      runner.corruptNextResult();
      corrupted = true;
    }
    if (faults && me == victim && o.faults != "kill" && secondsSince(t0) >= faultAt) {
      if (o.faults == "abort") {
        std::printf("strata-soak: rank %d: fault injection: aborts its communicators before step #%llu (%.2f s)\n", me,
                    static_cast<unsigned long long>(steps), secondsSince(t0));
        std::fflush(stdout);
        runner.closeAll(true);
      } else {  // stall: stops calling strata until the others must have timed out
        std::printf("strata-soak: rank %d: fault injection: stops calling strata before step #%llu (%.2f s)\n", me,
                    static_cast<unsigned long long>(steps), secondsSince(t0));
        std::fflush(stdout);
        std::this_thread::sleep_for(std::chrono::duration<double>(o.opTimeout + 10));
        runner.closeAll(true);
      }
      slot.runner.store(nullptr);
      return kExitVictim;
    }
    if (o.iterations && steps >= o.iterations) break;
    if (steps % 16 == 0 && steps > 0) {  // every rank stops after the same step: rank 0's clock... or anyone's
      uint8_t mine = secondsSince(t0) >= o.seconds ? 1 : 0, all = 0;
      strataResult_t rc = watched(slot, fmt::format("stop check after step #{}", steps - 1), [&] {
        return strataAllReduce(&mine, &all, 1, strataUint8, strataMax, world);
      });
      if (rc != strataSuccess) {
        runner.stats().errors++;
        if (rc == strataTimeout) runner.stats().hangs++;
        ok = false;
        std::string msg = fmt::format("stop check after step #{} failed: {}: {}", steps - 1, strataGetErrorString(rc),
                                      strataGetLastError(world));
        std::fprintf(stderr, "strata-soak: rank %d: ERROR: %s\n", me, msg.c_str());
        break;
      }
      if (all > 1 || all < mine) {
        runner.stats().wrong++;
        std::fprintf(stderr, "strata-soak: rank %d: WRONG RESULT in the stop check: max of flags is %d\n", me, all);
      }
      stop = all != 0;
      if (stop) break;
    }
    Step step = planner.next(specs);
    if (o.trace && me == 0) std::printf("strata-soak: %s\n", runner.describe(step, specs).c_str());
    ok = runner.run(step, specs);
    ++steps;
    if (!ok) std::fprintf(stderr, "strata-soak: rank %d: ERROR: %s\n", me, runner.error().c_str());
  }
  const double secs = secondsSince(t0);
  Stats& st = runner.stats();
  if (!ok) {  // a failed communicator: abort everything so that peers fail fast, then report this rank
    runner.closeAll(true);
    slot.runner.store(nullptr);
    const bool expected = faults && secs >= faultAt - 1.0;
    std::printf("strata-soak: rank %d: %s after %.2f s (%.2f s after the fault was due), %llu operations, %llu wrong "
                "results, %llu hangs, %llu errors\n",
                me, expected ? "got the expected error" : "stopped on an error", secs, secs - faultAt,
                static_cast<unsigned long long>(st.totalOps()), static_cast<unsigned long long>(st.wrong),
                static_cast<unsigned long long>(st.hangs), static_cast<unsigned long long>(st.errors));
    std::fflush(stdout);
    return expected && st.wrong == 0 ? kExitOk : kExitFail;
  }
  // Totals over every rank.
  uint64_t words[Stats::kWords], sum[Stats::kWords];
  st.toWords(words);
  strataResult_t rc = watched(slot, "summing the totals", [&] {
    return strataAllReduce(words, sum, Stats::kWords, strataUint64, strataSum, world);
  });
  runner.closeAll(false);
  slot.runner.store(nullptr);
  if (rc != strataSuccess) {
    std::fprintf(stderr, "strata-soak: rank %d: summing the totals failed\n", me);
    return kExitFail;
  }
  Stats t;
  t.fromWords(sum);
  t.steps = st.steps, t.groups = st.groups, t.multiComm = st.multiComm;  // the same plan on every rank
  if (me == 0) {
    std::printf("strata-soak: %d steps (%llu in groups, %llu with several communicators), %llu communicators split, "
                "%llu calls, %.2f GiB checked\n",
                static_cast<int>(t.steps), static_cast<unsigned long long>(t.groups),
                static_cast<unsigned long long>(t.multiComm), static_cast<unsigned long long>(t.splits),
                static_cast<unsigned long long>(t.calls), t.checkedBytes / double(1ull << 30));
    std::printf("strata-soak: %d ranks, %.1f s, %llu operations (by collective: %s), %llu wrong results, %llu hangs, "
                "%llu errors\n",
                W, secs, static_cast<unsigned long long>(t.totalOps()), byCollective(t).c_str(),
                static_cast<unsigned long long>(t.wrong), static_cast<unsigned long long>(t.hangs),
                static_cast<unsigned long long>(t.errors));
    std::fflush(stdout);
    if (!o.report.empty()) writeReport(P, o, W, secs, seed, t);
  }
  if (faults) {
    std::fprintf(stderr, "strata-soak: rank %d: the injected fault did not happen\n", me);
    return kExitFail;
  }
  return t.wrong == 0 && t.errors == 0 && t.hangs == 0 ? kExitOk : kExitFail;
}

bool launchedAsProcesses() {
  for (const char* v : {"STRATA_RANK", "OMPI_COMM_WORLD_RANK", "RANK", "SLURM_PROCID"})
    if (std::getenv(v)) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  Process P;
  Options& o = P.opt;
  CLI::App app{"strata-soak: random collectives, every result checked, for a bounded time.\n"
               "  strata-run -n N -- strata-soak [options]", "strata-soak"};
  app.add_option("--seconds", o.seconds, "run this long (default 60)");
  app.add_option("--iterations", o.iterations, "stop after this many steps (default 0: no limit)");
  app.add_option("--seed", o.seed, "seed of the steps (default 0: rank 0 draws one; it is printed)");
  app.add_option("--max-bytes", o.maxBytes, "largest buffer of one call per rank, e.g. 64K, 4M (default 1M)");
  app.add_option("--slots", o.plan.slots, "communicator slots: the world and N-1 split families (default 4)");
  app.add_option("--group-items", o.plan.maxGroupItems, "most calls in one group (default 4)");
  app.add_option("--resplit-per-mille", o.plan.resplitPerMille,
                 "chance per step, in thousandths, that a split family is re-created (default 4)")
      ->check(CLI::Range(0u, 1000u));
  app.add_option("--threads", o.threads,
                 "rank threads per process (default: STRATA_NTHREADS under strata-run --threads, else 1; 4 alone)");
  app.add_option("--faults", o.faults, "inject a fault: none, kill, abort, stall or corrupt (default none)")
      ->check(CLI::IsMember({"none", "kill", "abort", "stall", "corrupt"}));
  app.add_option("--fault-rank", o.faultRank, "the rank the fault hits (default: drawn from the seed)");
  app.add_option("--fault-after", o.faultAfter, "seconds into the run (default: drawn, 20-60 % of --seconds)");
  app.add_option("--op-timeout", o.opTimeout,
                 "the communicators' timeout: seconds a call may wait without progress (default 60; 0: STRATA_TIMEOUT)");
  app.add_option("--hang-seconds", o.hangSeconds,
                 "the watchdog: a step still running after this long is a hang (default: op-timeout + 60)");
  app.add_option("--report", o.report, "rank 0 also writes the totals to FILE (JSON)");
  app.add_flag("--trace", o.trace, "rank 0 prints every step");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  if (!parseBytes(o.maxBytes, &o.plan.maxBytes) || o.plan.maxBytes == 0) {
    std::fprintf(stderr, "strata-soak: bad --max-bytes '%s'\n", o.maxBytes.c_str());
    return kExitUsage;
  }
  o.plan.slots = std::max(1, o.plan.slots);
  if (o.hangSeconds <= 0) o.hangSeconds = (o.opTimeout > 0 ? o.opTimeout : 600) + 60;
  if (o.faults == "stall" && o.opTimeout <= 0) o.opTimeout = 10;
  if (o.faults != "none" && o.faults != "corrupt") signal(SIGTERM, SIG_IGN);  // survivors report before strata-run stops them

  const bool procs = launchedAsProcesses();
  const char* nt = std::getenv("STRATA_NTHREADS");
  P.threads = o.threads > 0 ? o.threads : (!procs && nt) ? std::atoi(nt) : procs ? 1 : 4;
  if (P.threads < 1) P.threads = 1;
  strataConfig_t cfg;
  strataConfigInit(&cfg);
  cfg.timeout = o.opTimeout;
  cfg.commName = "soak-world";
  strataUniqueId id{};
  if (procs) {
    strataComm_t env = nullptr;
    if (strataCommInitFromEnv(&env, &cfg) != strataSuccess) {
      std::fprintf(stderr, "strata-soak: init failed: %s\n", strataGetLastError(nullptr));
      return kExitFail;
    }
    strataCommCount(env, &P.nprocs);
    strataCommUserRank(env, &P.proc);
    if (P.threads == 1) {
      P.slots.push_back(std::make_unique<RankSlot>());
      if (o.faults == "kill" && P.nprocs < 2) {
        std::fprintf(stderr, "strata-soak: --faults kill needs ranks in two processes or more\n");
        return kExitUsage;
      }
      std::thread wd(watchdog, &P);
      const int rc = runRank(P, *P.slots[0], env);
      P.done = true;
      wd.join();
      return rc;
    }
    if (P.proc == 0 && strataGetUniqueId(&id) != strataSuccess) return kExitFail;
    if (strataBroadcast(&id, &id, sizeof id, strataUint8, 0, env) != strataSuccess) {
      std::fprintf(stderr, "strata-soak: sharing the unique id failed: %s\n", strataGetLastError(env));
      return kExitFail;
    }
    strataCommDestroy(env);
  } else if (strataGetUniqueId(&id) != strataSuccess) {  // STRATA_UNIQUE_ID under strata-run --threads
    std::fprintf(stderr, "strata-soak: %s\n", strataGetLastError(nullptr));
    return kExitFail;
  }
  if (o.faults == "kill" && P.nprocs < 2) {
    std::fprintf(stderr, "strata-soak: --faults kill needs ranks in two processes or more\n");
    return kExitUsage;
  }
  const int world = P.nprocs * P.threads;
  for (int t = 0; t < P.threads; ++t) P.slots.push_back(std::make_unique<RankSlot>());
  std::vector<int> codes(static_cast<size_t>(P.threads), kExitOk);
  std::thread wd(watchdog, &P);
  std::vector<std::thread> ranks;
  for (int t = 0; t < P.threads; ++t)
    ranks.emplace_back([&, t] {
      strataComm_t comm = nullptr;
      const int r = P.proc * P.threads + t;
      if (strataCommInitRankConfig(&comm, world, id, r, &cfg) != strataSuccess) {
        std::fprintf(stderr, "strata-soak: rank %d: init failed: %s\n", r, strataGetLastError(nullptr));
        codes[static_cast<size_t>(t)] = kExitFail;
        return;
      }
      codes[static_cast<size_t>(t)] = runRank(P, *P.slots[static_cast<size_t>(t)], comm);
    });
  for (auto& th : ranks) th.join();
  P.done = true;
  wd.join();
  return *std::max_element(codes.begin(), codes.end());
}
