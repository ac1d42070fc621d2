// tool.cc: the common main(): options, rank identities, the sweep, the report and the exit code.
#include "perf/common/tool.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <vector>

#include "perf/common/device.h"
#include "perf/common/memory.h"
#include "perf/common/report.h"
#include "perf/common/runner.h"

namespace strata::perf {
namespace {

// --memory device: this rank's GPU, buffers and stream. Every rank learns whether all succeeded,
// so that none waits in a collective for a rank that failed here.
std::unique_ptr<DeviceRank> openDevice(const Options& o, Backend& b, int nprocs, int thread) {
  std::unique_ptr<DeviceRank> dev;
  std::string error;
  try {
    dev = std::make_unique<DeviceRank>(perfLocalRank(b.rank(), thread, b.nranks() / nprocs), o.maxBytes);
  } catch (const std::exception& e) {
    error = e.what();
  }
  const double failed = b.allReduce(error.empty() ? 0 : 1, Backend::Agg::Sum);
  if (!error.empty()) throw std::runtime_error("--memory device: " + error);
  if (failed > 0) throw std::runtime_error(fmt::format("--memory device: {} other rank(s) failed to set up", failed));
  b.attachDevice(*dev);
  return dev;
}

// The device-to-device copy reference: rank 0 alone (the others wait at a barrier), largest size.
void deviceCopyReference(const Options& o, Backend& b, const DeviceRank& dev, Report* report) {
  b.barrier();
  const double gbps = b.rank() == 0 ? dev.copyBandwidth(o.maxBytes, std::max(o.iters, 5)) : 0;
  b.barrier();
  if (report) report->deviceCopy(gbps, o.maxBytes);
}

int runRank(const Options& o, const ToolInfo& tool, Backend& b, int nprocs, int thread) {
  try {
    RankLine mine;
    mine.rank = b.rank();
    mine.pid = static_cast<int>(getpid());
    mine.thread = thread;
    gethostname(mine.host, sizeof mine.host - 1);
    std::unique_ptr<DeviceRank> dev;
    if (o.memory == "device") {
      dev = openDevice(o, b, nprocs, thread);
      mine.device = dev->props().index;
      std::memcpy(mine.busId, dev->props().busId, sizeof mine.busId);
      std::memcpy(mine.gpu, dev->props().name, sizeof mine.gpu);
    }
    std::vector<RankLine> all(static_cast<size_t>(b.nranks()));
    b.allGather(&mine, all.data(), sizeof mine);
    Runner runner(o, tool.coll, b, dev.get());
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
      if (o.hostAlloc && o.memory == "host") {  // --alloc: the buffers are shared memory, mapped by peers too
        std::printf("# Memory per process (max over ranks): private %.1f MiB, shared %.1f MiB (test buffers %.1f MiB "
                    "from --alloc %s, and peers' buffers this rank mapped to read them single-copy)\n",
                    worst.anonMiB, worst.shmemMiB, buffersMiB, o.alloc.c_str());
      } else {
        std::printf("# Memory per process (max over ranks): private %.1f MiB (test buffers %.1f MiB, the rest "
                    "runtime and tool: %.1f MiB), shared %.1f MiB\n",
                    worst.anonMiB, buffersMiB, std::max(0.0, worst.anonMiB - buffersMiB), worst.shmemMiB);
      }
    }
    if (dev) deviceCopyReference(o, b, *dev, report.get());
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
  // Per process, before any rank meets another: a failure here ends every rank the same way.
  const std::string err = tool.preflight ? tool.preflight(o) : "";
  if (!err.empty()) {
    std::fprintf(stderr, "%s: %s\n", tool.program.c_str(), err.c_str());
    return kExitError;
  }
  std::string why;
  if (o.memory == "device" && cudaDevices(&why) == 0) {
    std::fprintf(stderr, "%s: --memory device: no CUDA device (%s); device memory needs the CUDA build and a GPU "
                 "this process can see\n", tool.program.c_str(), why.c_str());
    return kExitUsage;
  }
  try {
    return launch(o, [&](Backend& b, int nprocs, int thread) { return runRank(o, tool, b, nprocs, thread); });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", tool.program.c_str(), e.what());
    return kExitError;
  }
}

}  // namespace strata::perf
