// auto_bind.cc: the binding plan for unbound ranks and its application to the calling thread.
#include "collectives/auto_bind.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include "fmt/format.h"
#include "topology/cpu_order.h"
#include "transport/config.h"
#include "transport/log.h"

namespace strata {
namespace {

int popcount(const uint64_t m[4]) {
  int n = 0;
  for (int w = 0; w < 4; ++w) n += __builtin_popcountll(m[w]);
  return n;
}

bool sameMask(const uint64_t a[4], const uint64_t b[4]) { return std::memcmp(a, b, 4 * sizeof(uint64_t)) == 0; }

int firstCpu(const uint64_t m[4]) {
  for (int c = 0; c < 256; ++c)
    if ((m[c / 64] >> (c % 64)) & 1) return c;
  return -1;
}

}  // namespace

AutoBindPlan planAutoBind(const std::vector<RankInfo>& infos, int rank, const CpuOrderFn& order) {
  AutoBindPlan plan;
  const RankInfo& me = infos[rank];
  std::vector<int> local;  // ranks on this machine, in rank order
  for (int r = 0; r < static_cast<int>(infos.size()); ++r)
    if (infos[r].hostHash == me.hostHash) local.push_back(r);

  // Ranks pinned to one and the same CPU share it whatever the runtime does: say so.
  for (size_t i = 0; i < local.size() && plan.warning.empty(); ++i)
    for (size_t j = i + 1; j < local.size(); ++j) {
      const RankInfo &a = infos[local[i]], &b = infos[local[j]];
      if (popcount(a.cpuMask) == 1 && sameMask(a.cpuMask, b.cpuMask) && a.processHash != b.processHash) {
        plan.warning = fmt::format("ranks {} and {} are both bound to CPU {} only: they share one CPU and every "
                                   "collective between them waits on the scheduler; give each rank its own CPU",
                                   local[i], local[j], firstCpu(a.cpuMask));
        break;
      }
    }

  if (local.size() < 2) {
    plan.reason = "the only rank on its machine";
    return plan;
  }
  for (size_t i = 0; i < local.size(); ++i)
    for (size_t j = i + 1; j < local.size(); ++j)
      if (infos[local[i]].processHash == infos[local[j]].processHash) {
        plan.reason = "ranks are threads of one process (the application places its threads)";
        return plan;
      }
  for (int r : local)
    if (!sameMask(infos[r].cpuMask, me.cpuMask)) {
      plan.reason = "the launcher bound the ranks";
      return plan;
    }
  const int ncpu = popcount(me.cpuMask);
  if (ncpu <= 1) {
    plan.reason = "already on one CPU";
    return plan;
  }
  const std::vector<int> cpus = order(me.cpuMask);
  if (local.size() > cpus.size()) {
    plan.reason = fmt::format("{} local ranks on {} CPUs: more ranks than CPUs, left unbound", local.size(), cpus.size());
    return plan;
  }
  const size_t localIndex = static_cast<size_t>(std::find(local.begin(), local.end(), rank) - local.begin());
  plan.cpu = cpus[localIndex];
  plan.reason = fmt::format("{} local ranks started without CPU binding share {} CPUs", local.size(), ncpu);
  return plan;
}

void autoBindCallingThread(const std::vector<RankInfo>& infos, int rank) {
  static std::atomic<bool> warned{false}, logged{false};
  // The process's first communicator decides (its members are all the job's ranks here): a later,
  // smaller one (a split of 2 of 4 ranks on 2 CPUs) would otherwise "fit" and pin ranks two to a
  // CPU. Later communicators bind their creating thread to the same CPU, or leave it unbound. Keyed
  // by pid: a forked child decides again.
  static std::mutex mu;
  static pid_t decidedBy = 0;
  static int decidedCpu = -1;
  AutoBindPlan plan;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (decidedBy == getpid()) {
      plan.cpu = decidedCpu;
      plan.reason = "as this process's first communicator";
    } else {
      plan = planAutoBind(infos, rank, topology::cpusInBindOrder);
      decidedBy = getpid();
      decidedCpu = plan.cpu;
    }
  }
  if (!plan.warning.empty() && !warned.exchange(true)) log::warn("{}", plan.warning);
  if (plan.cpu < 0 || !config().autoBind) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(plan.cpu, &set);
  const int err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (err != 0) {
    log::warn("rank {}: could not bind to CPU {} ({}); running unbound", rank, plan.cpu, std::strerror(err));
    return;
  }
  if (!logged.exchange(true))
    log::info("rank {}: {}; bound this thread to CPU {} as strata-run would (STRATA_AUTO_BIND=0 leaves it unbound)",
              rank, plan.reason, plan.cpu);
}

}  // namespace strata
