// topo_job.cc: the job view of strata-topo (see topo_job.h).
#include "tools/topo_job.h"

#include <fmt/format.h>

#include <cstdio>
#include <string>

#include "collectives/comm.h"
#include "strata/strata.h"
#include "transport/socket.h"

namespace strata::tools {

int runJobReport() {
  strataComm_t handle = nullptr;
  if (strataCommInitFromEnv(&handle, nullptr) != strataSuccess) {
    std::fprintf(stderr, "strata-topo --job: cannot join the job: %s\n", strataGetLastError(nullptr));
    return 1;
  }
  Comm* comm = static_cast<Comm*>(handle);
  if (comm->rank() == 0) {
    const topology::CommLayout& l = comm->layout();
    const auto& infos = comm->bootstrap().infos();
    std::string out = fmt::format("job: {} ranks on {}\n", comm->nranks(), l.describe());
    out += fmt::format("{:>5}  {:<20} {:>5}  {:>4}  {:<16} {:>7}  {}\n", "rank", "node", "local", "rail", "address",
                       "pid", "host");
    for (int r = 0; r < comm->nranks(); ++r) {
      const RankInfo& i = infos[static_cast<size_t>(r)];
      const int rail = l.rail(r);
      const uint32_t addr = rail >= 0 && static_cast<uint32_t>(rail) < i.nifs ? i.ifAddr[rail] : i.addr;
      std::string a = net::addrToString(addr, 0);
      a = a.substr(0, a.rfind(':'));
      out += fmt::format("{:>5}  {:<20} {:>5}  {:>4}  {:<16} {:>7}  {}\n", r, l.nodeName(l.node(r)), l.localRank(r),
                         rail < 0 ? std::string("-") : std::to_string(rail), a, i.pid, i.hostname);
    }
    if (l.nnodes() > 1) {
      out += "links from rank 0:";
      for (int r = 1; r < comm->nranks(); ++r)
        out += fmt::format(" {}:{}", r, topology::linkClassName(l.link(0, r)));
      out += "\n";
    }
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
  }
  strataCommDestroy(handle);
  return 0;
}

}  // namespace strata::tools
