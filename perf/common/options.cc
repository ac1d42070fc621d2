// options.cc: parses the nccl-tests flags with CLI11 and checks them.
#include "perf/common/options.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <map>

#include "perf/common/device.h"

namespace strata::perf {
namespace {

std::map<std::string, int> dtypeNames() {
  std::map<std::string, int> m{{"all", -1}};
  for (DType t : allDtypes()) m[dtypeName(t)] = t;
  return m;
}

std::map<std::string, int> opNames() {
  std::map<std::string, int> m{{"all", -1}};
  for (Op op : allOps()) m[opName(op)] = static_cast<int>(op);
  return m;
}

std::string usageFooter(const ToolInfo& tool) {
  return "Sizes take K, M or G suffixes (powers of 1024). As in nccl-tests, SIZE is the whole buffer of "
         "all_gather,\nreduce_scatter, gather and scatter, and each rank's whole send buffer of alltoall. Each "
         "row reports\nout-of-place and in-place time per collective, algbw = SIZE / time, busbw = algbw x the "
         "collective's\nfactor, and #wrong (elements that differ from the exact expected result, summed over "
         "ranks). The exit\ncode is non-zero if any element was wrong.\n\n" + tool.launch;
}

// Checks that CLI11 cannot express: returns an error message or "".
std::string validate(const Options& o, const ToolInfo& tool) {
  bool measured = false;
  std::string kinds;
  for (const std::string& m : tool.memories) {
    measured |= m == o.memory;
    kinds += (kinds.empty() ? "" : " or ") + m;
  }
  if (!measured) return "--memory " + o.memory + ": " + tool.program + " measures " + kinds + " memory only";
  if (o.memory == "device" && !deviceSupportBuilt())
    return "--memory device: device memory needs the CUDA build (nvcc and -DSTRATA_ENABLE_CUDA=ON)";
  if (o.nGpus != 1)
    return "-g/--ngpus " + std::to_string(o.nGpus) +
           ": the host path drives one buffer set per rank; use -t for more ranks per process";
  if (o.minBytes > o.maxBytes) return "-b/--minbytes is larger than -e/--maxbytes";
  if (o.stepFactor <= 1 && o.stepBytes == 0) return "-i/--stepbytes must be > 0 when -f/--stepfactor is 1";
  return "";
}

}  // namespace

std::vector<uint64_t> Options::sizes() const {
  std::vector<uint64_t> v;
  for (uint64_t s = minBytes; s <= maxBytes;) {
    v.push_back(s);
    uint64_t next = stepFactor > 1 ? (s ? s * stepFactor : 1) : s + stepBytes;
    if (next <= s) break;  // overflow
    s = next;
  }
  return v;
}

bool parseOptions(int argc, char** argv, const ToolInfo& tool, Options* o, int* exitCode) {
  CLI::App app{tool.program + ": measures " + tool.library + " " + collName(tool.coll) +
                   " the way NVIDIA's nccl-tests does (same flags, same output).",
               tool.program};
  app.footer(usageFooter(tool));
  app.get_formatter()->column_width(34);
  std::string dtype = "float", op = "sum", root = "0";
  CLI::Validator size = CLI::AsSizeValue(false);
  size.description("");
  app.add_option("-t,--nthreads", o->nThreads, "rank threads per process (world size = processes x threads)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("-g,--ngpus", o->nGpus, "GPUs per thread (accepted for compatibility; must be 1 on the host path)")
      ->capture_default_str();
  app.add_option("-b,--minbytes", o->minBytes, "smallest size")->transform(size)->type_name("SIZE")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", o->maxBytes, "largest size")->transform(size)->type_name("SIZE")
      ->capture_default_str();
  app.add_option("-i,--stepbytes", o->stepBytes, "size increment when the step factor is 1")->transform(size)
      ->type_name("SIZE")->capture_default_str();
  app.add_option("-f,--stepfactor", o->stepFactor, "size multiplier (> 1 replaces --stepbytes)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("-n,--iters", o->iters, "timed iterations per size")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("-w,--warmup_iters", o->warmupIters, "warm-up iterations (at the largest and smallest size)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("-m,--agg_iters", o->aggIters, "collectives per timed iteration, issued as one group")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("-c,--check", o->check, "verify results after timing (0 = off, N = check N times)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("-o,--op", op, "reduction: sum, prod, max, min, avg, mulsum or all")
      ->transform(CLI::IsMember(opNames()))->capture_default_str();
  app.add_option("-d,--datatype", dtype,
                 "element type: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2 or all")
      ->transform(CLI::IsMember(dtypeNames()))->capture_default_str();
  app.add_option("-r,--root", root, "root rank of broadcast, reduce, gather, scatter (or all)")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            if (s == "all" || s == "-1") return "";
            try {
              size_t pos = 0;
              int r = std::stoi(s, &pos);
              if (pos == s.size() && r >= 0) return "";
            } catch (const std::exception&) {
            }
            return "expected a rank (0, 1, ...) or all, got '" + s + "'";
          },
          "RANK|all"))
      ->capture_default_str();
  app.add_option("-z,--blocking", o->blocking, "1: barrier after every collective")->check(CLI::Range(0, 2))
      ->capture_default_str();
  app.add_option("-a,--average", o->average, "time reported: 0 rank 0, 1 average, 2 minimum, 3 maximum over ranks")
      ->check(CLI::Range(0, 3))->capture_default_str();
  app.add_option("-J,--output_file", o->jsonPath, "also write the results as JSON to FILE")->type_name("FILE");
  o->memory = tool.memories.empty() ? "host" : tool.memories.front();
  app.add_option("--memory", o->memory, "buffer memory: host, or device (cudaMalloc on GPU local rank % GPUs)")
      ->check(CLI::IsMember({"host", "device"}))
      ->capture_default_str();
  if (tool.allocName) {
    o->alloc = tool.allocName;
    app.add_option("--alloc", o->alloc, std::string("host buffers from ") + tool.allocName +
                                            "'s allocator (as nccl-tests users call ncclMemAlloc) or malloc")
        ->check(CLI::IsMember({std::string(tool.allocName), std::string("malloc")}))
        ->capture_default_str();
  }
  if (tool.addOptions) tool.addOptions(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    *exitCode = rc == 0 ? 0 : 2;
    return false;
  }
  o->nThreadsGiven = app.count("-t") > 0;
  o->allDtypes = dtype == "all";
  o->dtypes = o->allDtypes ? allDtypes() : std::vector<DType>{static_cast<DType>(dtypeNames()[dtype])};
  o->allOps = op == "all";
  o->ops = o->allOps ? allOps() : std::vector<Op>{static_cast<Op>(opNames()[op])};
  o->allRoots = root == "all" || root == "-1";
  o->root = o->allRoots ? 0 : std::stoi(root);
  o->argv.assign(argv, argv + argc);
  if (tool.allocName && o->alloc != "malloc") {
    o->hostAlloc = tool.hostAlloc;
    o->hostFree = tool.hostFree;
  }
  std::string err = validate(*o, tool);
  if (!err.empty()) {
    std::fprintf(stderr, "%s: %s\n", tool.program.c_str(), err.c_str());
    *exitCode = 2;
    return false;
  }
  return true;
}

}  // namespace strata::perf
