// tool.cc: the common main(): options, rank identities, the sweep, the report and the exit code.
#include "perf/common/tool.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <vector>

#include "perf/common/memory.h"
#include "perf/common/report.h"
#include "perf/common/runner.h"

namespace strata::perf {
namespace {

int runRank(const Options& o, const ToolInfo& tool, Backend& b, int nprocs, int thread) {
  try {
    RankLine mine;
    mine.rank = b.rank();
    mine.pid = static_cast<int>(getpid());
    mine.thread = thread;
    gethostname(mine.host, sizeof mine.host - 1);
    std::vector<RankLine> all(static_cast<size_t>(b.nranks()));
    b.allGather(&mine, all.data(), sizeof mine);
    Runner runner(o, tool.coll, b);
    runner.checkRequest();
    std::unique_ptr<Report> report;
    if (b.rank() == 0) {
      report = std::make_unique<Report>(o, tool);
      report->header(b.describe(), nprocs, all);
    }
    const int64_t wrong = runner.run(report.get());
    // What the library costs each rank, beside the tool's own two test buffers (private memory).
    // Per rank, then the maximum over ranks; threads of one process share one reading.
    MemoryUse use = readMemoryUse();
    std::vector<MemoryUse> uses(static_cast<size_t>(b.nranks()));
    b.allGather(&use, uses.data(), sizeof use);
    if (report) {
      MemoryUse worst;
      for (const MemoryUse& u : uses) {
        worst.anonMiB = std::max(worst.anonMiB, u.anonMiB);
        worst.shmemMiB = std::max(worst.shmemMiB, u.shmemMiB);
      }
      const double buffersMiB = 2.0 * static_cast<double>(o.maxBytes) / (1 << 20);
      std::printf("# Memory per process (max over ranks): private %.1f MiB (test buffers %.1f MiB, the rest "
                  "runtime and tool: %.1f MiB), shared %.1f MiB\n",
                  worst.anonMiB, buffersMiB, std::max(0.0, worst.anonMiB - buffersMiB), worst.shmemMiB);
    }
    if (report) report->footer();
    return wrong ? kExitWrong : kExitOk;
  } catch (const UsageError& e) {
    if (b.rank() == 0) std::fprintf(stderr, "%s: %s\n", tool.program.c_str(), e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: rank %d: %s\n", tool.program.c_str(), b.rank(), e.what());
    return kExitError;
  }
}

}  // namespace

int toolMain(int argc, char** argv, const ToolInfo& tool, const Launcher& launch) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  Options o;
  int code = kExitOk;
  if (!parseOptions(argc, argv, tool, &o, &code)) return code;
  try {
    return launch(o, [&](Backend& b, int nprocs, int thread) { return runRank(o, tool, b, nprocs, thread); });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", tool.program.c_str(), e.what());
    return kExitError;
  }
}

}  // namespace strata::perf
