// launcher_bind.cc: the rank-to-CPU plan of launcher_bind.h, from the launcher's affinity mask and
// the core topology in /sys (a CPU whose topology cannot be read counts as its own core).
#include "tools/launcher_bind.h"

#include <sched.h>

#include <fstream>
#include <set>
#include <utility>

namespace strata::launcher {
namespace {

// "<package>:<core>" of a CPU, or a key of its own if /sys does not say.
std::string coreKey(int cpu) {
  const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
  std::ifstream pkg(dir + "physical_package_id"), core(dir + "core_id");
  std::string p, c;
  if (!(pkg >> p) || !(core >> c)) return "cpu" + std::to_string(cpu);
  return p + ":" + c;
}

}  // namespace

std::vector<int> bindOrder() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return {};
  std::vector<int> first, rest;
  std::set<std::string> seen;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &mask)) continue;
    (seen.insert(coreKey(cpu)).second ? first : rest).push_back(cpu);
  }
  first.insert(first.end(), rest.begin(), rest.end());
  return first;
}

std::vector<int> rankCpus(const std::string& policy, int nranks, bool threads) {
  if (policy != "core" || threads) return {};
  std::vector<int> order = bindOrder();
  if (nranks > static_cast<int>(order.size())) return {};
  order.resize(nranks);
  return order;
}

}  // namespace strata::launcher
