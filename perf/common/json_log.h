// json_log.h: the -J/--output_file JSON document (nccl-tests' schema: config, devices, results,
// out_of_bounds, average_bus_bandwidth), built with nlohmann/json and written at the end.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "perf/common/options.h"
#include "perf/common/report.h"

namespace strata::perf {

class JsonLog {
 public:
  JsonLog(const Options& options, const ToolInfo& tool);
  void header(const std::string& library, int nprocs, const std::vector<RankLine>& ranks);
  void row(const Row& r);
  void deviceCopy(double gbps, size_t bytes);
  /// Adds the summary and writes the file (a message on stderr if it cannot).
  void finish(int64_t wrong, double avgBusBw);

 private:
  const Options& o_;
  nlohmann::ordered_json doc_;
};

}  // namespace strata::perf
