// launcher_bind.h: which CPU each rank process of strata-run is bound to. Like mpirun's default
// for small jobs, every rank gets its own CPU when the ranks fit: an unbound pair of ranks that
// wake each other through futexes is sometimes placed on one CPU by the scheduler (wake-affine)
// and then runs several times slower until it is moved apart (docs/PERFORMANCE.md).
#pragma once

#include <string>
#include <vector>

namespace strata::launcher {

/// The CPUs this process may run on, one hardware thread per physical core first (in core order),
/// then the remaining hardware threads: the order ranks are bound in.
std::vector<int> bindOrder();

/// CPU of each of `nranks` ranks under `policy` ("core" or "none"), or an empty list for no
/// binding: "none", a --threads job (threads = true), or more ranks than CPUs.
std::vector<int> rankCpus(const std::string& policy, int nranks, bool threads);

}  // namespace strata::launcher
