// gloo_main.cc: main() of the Gloo peer tools (gloo_all_reduce_perf, ...): the strata tools' sweep
// and output, measuring Gloo's collectives over tcp on loopback. Built once per collective.
//
//   build/tools/strata-run -n 4 -- build/perf/gloo_all_reduce_perf -b 8 -e 64M -f 2 --algo ring
#include <CLI/CLI.hpp>

#include <cstdio>

#include "perf/common/tool.h"
#include "perf/peers/gloo_backend.h"
#include "perf/peers/gloo_rendezvous.h"

namespace {

strata::perf::GlooSetup setup;
std::string algo = "ring";

void addGlooOptions(CLI::App& app) {
  using strata::perf::Coll;
  if (Coll::PERF_COLL == Coll::AllReduce)
    app.add_option("--algo", algo,
                   "Gloo all-reduce algorithm: ring, halving_doubling or bcube\n"
                   "(halving_doubling runs in place: out of place it copies the input to the output first)")
        ->check(CLI::IsMember({"ring", "halving_doubling", "bcube"}))
        ->capture_default_str();
  app.add_option("--store", setup.storeDir, "file-store directory for the rendezvous (default: one per strata-run job)")
      ->type_name("DIR");
  app.add_option("--host", setup.host, "address the ranks listen on")->capture_default_str();
  app.add_option("--iface", setup.iface, "listen on this network interface's address instead (each rank its own, "
                 "e.g. rail0 on a strata-run --nodes cluster)")->type_name("NAME");
}

int launchGlooRank(const strata::perf::Options& o, const strata::perf::RankBody& body) {
  using namespace strata::perf;
  if (o.nThreads != 1) {
    std::fprintf(stderr, "%s: -t/--nthreads must be 1 (one Gloo rank per process)\n", PERF_TOOL_NAME);
    return kExitUsage;
  }
  GlooBackend backend(connectGloo(setup), algo);
  const int rc = body(backend, backend.nranks(), 0);
  std::fflush(stdout);
  if (rc == kExitError) std::_Exit(rc);  // peers may be blocked in a collective: skip teardown
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace strata::perf;
  const ToolInfo tool{Coll::PERF_COLL, PERF_TOOL_NAME, "Gloo",
                      "Launch: strata-run -n N -- " PERF_TOOL_NAME " [flags] (ranks from STRATA_RANK and\n"
                      "STRATA_WORLD_SIZE; tcp on loopback). Reductions: int8..uint64, half, float, double with sum,\n"
                      "prod, max, min (-d all / -o all skip the rest). Count-0 sizes are not sent.",
                      addGlooOptions,
                      {"host"},
                      {}};
  return toolMain(argc, argv, tool, launchGlooRank);
}
