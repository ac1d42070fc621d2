// cpu_order.cc: binding order of a CPU mask from the core topology in /sys.
#include "topology/cpu_order.h"

#include <sched.h>

#include <fstream>
#include <set>
#include <string>

namespace strata::topology {
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

std::vector<int> cpusInBindOrder(const uint64_t mask[4]) {
  std::vector<int> first, rest;
  std::set<std::string> seen;
  for (int cpu = 0; cpu < 256; ++cpu) {
    if (!((mask[cpu / 64] >> (cpu % 64)) & 1)) continue;
    (seen.insert(coreKey(cpu)).second ? first : rest).push_back(cpu);
  }
  first.insert(first.end(), rest.begin(), rest.end());
  return first;
}

void callerCpuMask(uint64_t mask[4]) {
  for (int w = 0; w < 4; ++w) mask[w] = 0;
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0) {
    mask[0] = 1;
    return;
  }
  for (int c = 0; c < CPU_SETSIZE && c < 256; ++c)
    if (CPU_ISSET(c, &cpus)) mask[c / 64] |= uint64_t(1) << (c % 64);
}

}  // namespace strata::topology
