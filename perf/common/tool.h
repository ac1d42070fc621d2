// tool.h: main() of every perf tool: parse the flags, let the library create this process's ranks,
// run the sweep on each, print from rank 0. Exit codes: 0 all results exact, 1 wrong results,
// 2 bad usage (also --memory device without a GPU), 3 a failure (library error, unsupported
// combination, ...).
#pragma once

#include <functional>

#include "perf/common/backend.h"
#include "perf/common/options.h"

namespace strata::perf {

enum ExitCode { kExitOk = 0, kExitWrong = 1, kExitUsage = 2, kExitError = 3 };

/// Runs the sweep on one rank; returns an ExitCode. Never throws (failures are printed).
using RankBody = std::function<int(Backend& backend, int nprocs, int thread)>;

/// Creates this process's ranks (threads when several), calls body on each, returns the worst
/// ExitCode. May print an error and return kExitUsage / kExitError itself.
using Launcher = std::function<int(const Options& options, const RankBody& body)>;

int toolMain(int argc, char** argv, const ToolInfo& tool, const Launcher& launch);

}  // namespace strata::perf
