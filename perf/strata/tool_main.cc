// tool_main.cc: main() of the strata perf tools (all_reduce_perf, ...): built once per collective
// with PERF_COLL (a strata::perf::Coll) and PERF_TOOL_NAME.
//
//   build/tools/strata-run -n 4 -- build/perf/all_reduce_perf -b 8 -e 64M -f 2
//   build/perf/all_reduce_perf -t 4 -b 8 -e 64M -f 2          # 4 rank threads in one process
//   build/tools/strata-run -n 4 -- build/perf/all_reduce_perf --memory device -b 8 -e 1G -f 2
#include "perf/common/tool.h"
#include "perf/strata/strata_launch.h"
#include "strata/strata.h"

#include <CLI/CLI.hpp>
#include <cstdlib>

namespace {
// --alloc strata (the default): host buffers from strataHostMemAlloc (strataMemAlloc's host memory,
// also where a GPU makes strataMemAlloc return device memory), which same-machine peers read
// single-copy; --alloc malloc shows the path of buffers strata did not allocate.
void* strataAlloc(size_t bytes) {
  void* p = nullptr;
  return strataHostMemAlloc(&p, bytes) == strataSuccess ? p : nullptr;
}
void strataFree(void* p) { strataMemFree(p); }

// --deterministic: strata's deterministic reductions (STRATA_DETERMINISTIC=1), to measure their cost.
// strata reads its settings when the first rank starts, after parsing: the variable is the switch.
void addStrataOptions(CLI::App& app) {
  app.add_flag_callback("--deterministic", [] { setenv("STRATA_DETERMINISTIC", "1", 1); },
                        "reductions in one fixed tree over the ranks (STRATA_DETERMINISTIC=1)");
}
}  // namespace

int main(int argc, char** argv) {
  using namespace strata::perf;
  const ToolInfo tool{Coll::PERF_COLL, PERF_TOOL_NAME, "strata",
                      "Launch: strata-run -n N -- " PERF_TOOL_NAME " [flags] (or mpirun, torchrun, srun);\n"
                      "-t T runs T rank threads per process (world = processes x T); alone it runs T ranks in\n"
                      "this process. strata-run --no-prefix prints rank 0's table without the \"[0] \" prefix.\n"
                      "--memory device: each rank's buffers on GPU (local rank % GPUs; ranks may share one), inputs\n"
                      "copied in and results out around the timed loop, which enqueues on one stream per rank;\n"
                      "the footer adds rank 0's device-to-device copy bandwidth at the largest size.",
                      addStrataOptions,
                      {"host", "device"},
                      {},
                      "strata",
                      strataAlloc,
                      strataFree};
  return toolMain(argc, argv, tool, launchStrataRanks);
}
