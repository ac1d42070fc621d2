// options.h: the nccl-tests command line (same flags, same defaults) parsed with CLI11.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "perf/common/types.h"

namespace CLI {
class App;
}

namespace strata::perf {

struct Options {
  int nThreads = 1;           ///< -t: rank threads per process
  bool nThreadsGiven = false; ///< -t was on the command line (else STRATA_NTHREADS may set it)
  int nGpus = 1;              ///< -g: accepted for compatibility; 1 on the host path
  uint64_t minBytes = 32u << 20, maxBytes = 32u << 20;
  uint64_t stepBytes = 1u << 20, stepFactor = 1;
  int iters = 20, warmupIters = 5, aggIters = 1;
  int check = 1;     ///< -c: verify results (N > 1 repeats the check N times)
  int blocking = 0;  ///< -z: 1 = barrier after every collective
  int average = 1;   ///< -a: 0 rank 0, 1 average, 2 minimum, 3 maximum over ranks
  std::vector<DType> dtypes{strataFloat32};
  bool allDtypes = false;  ///< -d all
  std::vector<Op> ops{Op::Sum};
  bool allOps = false;  ///< -o all
  int root = 0;
  bool allRoots = false;  ///< -r all (or -1)
  std::string jsonPath;   ///< -J
  std::string memory = "host";  ///< --memory: host or device (the tool's first memory kind by default)
  /// --alloc: host buffers from malloc, or from the library's allocator (strata: strataHostMemAlloc).
  std::string alloc = "malloc";
  void* (*hostAlloc)(size_t) = nullptr;  ///< the library's allocator when --alloc is not malloc
  void (*hostFree)(void*) = nullptr;
  std::vector<std::string> argv;

  /// Message sizes in bytes: minBytes, then times stepFactor (> 1) or plus stepBytes, up to maxBytes.
  std::vector<uint64_t> sizes() const;
};

/// A request this run cannot honour, the same on every rank (unsupported type or op, bad root):
/// reported once, exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// What a tool adds to the common flags: its name, the library it measures, extra flags.
struct ToolInfo {
  Coll coll;
  std::string program;  ///< "all_reduce_perf", "mpi_all_reduce_perf", ...
  std::string library;  ///< "strata", "Open MPI", "Gloo"
  std::string launch;   ///< how to start it, for --help
  std::function<void(CLI::App&)> addOptions;  ///< backend-specific flags (may be empty)
  std::vector<std::string> memories{"host"};  ///< --memory kinds it measures; the first is the default
  /// Runs after parsing, before any rank starts (loading a library): an error message or "".
  std::function<std::string(const Options&)> preflight;
  /// The library's host allocator (strataHostMemAlloc for strata's tools): adds --alloc NAME|malloc,
  /// default NAME. Null: host buffers come from malloc.
  const char* allocName = nullptr;
  void* (*hostAlloc)(size_t) = nullptr;  ///< returns null on failure
  void (*hostFree)(void*) = nullptr;
};

/// Parses argv. On --help prints the usage and returns 0 in *exitCode; on a bad flag prints the
/// error and returns 2; otherwise returns true with *exitCode untouched.
bool parseOptions(int argc, char** argv, const ToolInfo& tool, Options* out, int* exitCode);

}  // namespace strata::perf
