// cpu_order.h: the order in which ranks are bound to the CPUs of an affinity mask: one hardware
// thread of each physical core first (cores in CPU order), then the remaining hardware threads.
// Shared by strata-run's --bind and the runtime's own binding of unbound ranks (auto_bind.h).
#pragma once

#include <cstdint>
#include <vector>

namespace strata::topology {

/// The CPUs set in `mask` (CPU c as bit c % 64 of word c / 64, 256 CPUs), in binding order. A CPU
/// whose core cannot be read from /sys counts as its own core.
std::vector<int> cpusInBindOrder(const uint64_t mask[4]);
/// The calling thread's affinity mask in the RankInfo form above (CPU 0 alone if it cannot be read).
void callerCpuMask(uint64_t mask[4]);

}  // namespace strata::topology
