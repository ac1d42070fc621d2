// launcher_bind.cc: the rank-to-CPU plan of launcher_bind.h, from the launcher's affinity mask in
// binding order (topology/cpu_order.h).
#include "tools/launcher_bind.h"

#include "topology/cpu_order.h"

namespace strata::launcher {

std::vector<int> bindOrder() {
  uint64_t mask[4];
  topology::callerCpuMask(mask);
  return topology::cpusInBindOrder(mask);
}

std::vector<int> rankCpus(const std::string& policy, int nranks, bool threads) {
  if (policy != "core" || threads) return {};
  std::vector<int> order = bindOrder();
  if (nranks > static_cast<int>(order.size())) return {};
  order.resize(nranks);
  return order;
}

}  // namespace strata::launcher
