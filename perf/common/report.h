// report.h: the nccl-tests text output (header block, one row per size, footer), printed by rank 0,
// mirrored to a JSON file with -J.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "perf/common/options.h"
#include "perf/common/types.h"

namespace strata::perf {

class JsonLog;

/// One rank's identity, gathered from every rank for the "# Using devices" block.
struct RankLine {
  int rank = 0;
  int pid = 0;
  int thread = 0;
  char host[64] = {};
  int device = -1;  ///< --memory device: the CUDA device index, else -1 (cpu)
  char busId[20] = {};
  char gpu[48] = {};
};

/// Time and bandwidth of one placement (out-of-place or in-place), already aggregated over ranks.
struct Measure {
  double timeUs = 0, algBw = 0, busBw = 0;
  int64_t wrong = 0;  ///< wrong elements, summed over ranks
};

struct Row {
  size_t bytes = 0, count = 0;
  DType dtype = strataFloat32;
  std::string op;  ///< "sum", ... or "none"
  int root = -1;
  Measure out, in;
};

class Report {
 public:
  Report(const Options& options, const ToolInfo& tool);
  ~Report();
  void header(const std::string& library, int nprocs, const std::vector<RankLine>& ranks);
  void note(const std::string& text);  ///< a "# text" line
  /// The device-to-device copy reference (--memory device), printed in the footer and the JSON.
  void deviceCopy(double gbps, size_t bytes);
  void row(const Row& r);
  /// Prints the footer and writes the JSON file.
  void footer();
  int64_t wrong() const { return wrong_; }

 private:
  const Options& o_;
  const ToolInfo& tool_;
  std::unique_ptr<JsonLog> json_;
  int64_t wrong_ = 0;
  double busBwSum_ = 0;
  int busBwCount_ = 0;
};

/// nccl-tests' number format: as many decimals as fit in `width` characters.
std::string fitNumber(double value, int width);

}  // namespace strata::perf
