// fuzz_rank_infos: the RankInfo table every rank receives from its peers at init (bootstrap
// all-gather: raw structs another process wrote) and what is computed from it: the layout
// (layoutFromInfos: nodes, local ranks, home rails), the link costs (jobLinkCosts), the address
// of a peer on a rail (railAddress) and the auto-binding plan (planAutoBind). The input is the
// table itself, whole RankInfos back to back (1..16 of them); rank 0's entry stands for this
// rank. Any table gives a consistent layout; no field is trusted to be in range or terminated.
#include <vector>

#include "collectives/auto_bind.h"
#include "collectives/job_topology.h"
#include "fuzz_util.h"

using strata::RankInfo;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const size_t n = size / sizeof(RankInfo);
  if (n == 0 || n > 16) return 0;
  std::vector<RankInfo> infos(n);
  std::memcpy(static_cast<void*>(infos.data()), data, n * sizeof(RankInfo));
  infos[0].nifs %= RankInfo::kMaxIfs + 1;  // this rank's own entry: filled by itself
  const strata::topology::CommLayout layout = strata::layoutFromInfos(infos);
  FUZZ_CHECK(layout.nranks() == static_cast<int>(n), "layout of %d ranks from %zu infos", layout.nranks(), n);
  int members = 0;
  for (int k = 0; k < layout.nnodes(); ++k) {
    members += layout.localSize(k);
    for (int l = 0; l < layout.localSize(k); ++l) {
      const int r = layout.rankAt(k, l);
      FUZZ_CHECK(r >= 0 && r < static_cast<int>(n) && layout.node(r) == k && layout.localRank(r) == l,
                 "node %d local %d: rank %d inconsistent", k, l, r);
    }
    (void)layout.nodeName(k);
  }
  FUZZ_CHECK(members == static_cast<int>(n), "%d members of %zu ranks", members, n);
  for (int a = 0; a < static_cast<int>(n); ++a)
    for (int b = 0; b < static_cast<int>(n); ++b)
      if (a != b) {
        (void)layout.link(a, b);
        (void)layout.messageRail(a, b);
      }
  (void)strata::jobLinkCosts(infos);
  for (size_t p = 0; p < n; ++p) {
    uint32_t from = 0;
    for (int rail = -1; rail <= RankInfo::kMaxIfs; ++rail) (void)strata::railAddress(infos[0], infos[p], rail, &from);
    if (p > 0) (void)strata::railAddress(infos[0], infos[p], layout.messageRail(0, static_cast<int>(p)), &from);
  }
  const strata::CpuOrderFn order = [](const uint64_t mask[4]) {
    std::vector<int> cpus;
    for (int c = 0; c < 256; ++c)
      if ((mask[c / 64] >> (c % 64)) & 1) cpus.push_back(c);
    return cpus;
  };
  for (int r = 0; r < static_cast<int>(n); ++r) {
    const strata::AutoBindPlan plan = strata::planAutoBind(infos, r, order);
    FUZZ_CHECK(plan.cpu >= -1 && plan.cpu < 256, "rank %d told to bind to CPU %d", r, plan.cpu);
  }
  return 0;
}
