// json_log.cc: collects the run as JSON and writes it to the -J file.
#include "perf/common/json_log.h"

#include <cstdio>
#include <ctime>
#include <fstream>

namespace strata::perf {
namespace {

std::string now() {
  char buf[64];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  return buf;
}

nlohmann::ordered_json measure(const Measure& m, bool checked) {
  return {{"time", m.timeUs}, {"alg_bw", m.algBw}, {"bus_bw", m.busBw},
          {"nwrong", checked ? nlohmann::ordered_json(m.wrong) : nlohmann::ordered_json()}};
}

}  // namespace

JsonLog::JsonLog(const Options& o, const ToolInfo& tool) : o_(o) {
  doc_["version"] = 2;
  doc_["start_time"] = now();
  doc_["args"] = o.argv;
  doc_["program"] = tool.program;
  doc_["collective"] = collName(tool.coll);
}

void JsonLog::header(const std::string& library, int nprocs, const std::vector<RankLine>& ranks) {
  doc_["library"] = library;
  auto& c = doc_["config"];
  c["nthreads"] = ranks.size() / static_cast<size_t>(nprocs);
  c["ngpus"] = o_.nGpus;
  c["nprocs"] = nprocs;
  c["nranks"] = ranks.size();
  c["minimum_bytes"] = o_.minBytes;
  c["maximum_bytes"] = o_.maxBytes;
  if (o_.stepFactor > 1) c["step_factor"] = o_.stepFactor;
  else c["step_bytes"] = o_.stepBytes;
  c["warmup_iters"] = o_.warmupIters;
  c["iterations"] = o_.iters;
  c["aggregated_iterations"] = o_.aggIters;
  c["validation"] = o_.check;
  c["blocking_collectives"] = o_.blocking;
  c["average"] = o_.average;
  c["memory"] = o_.memory;
  auto& d = doc_["devices"] = nlohmann::ordered_json::array();
  for (const RankLine& r : ranks) {
    d.push_back({{"rank", r.rank}, {"pid", r.pid}, {"hostname", r.host}, {"thread", r.thread}, {"device", "cpu"}});
    if (r.device >= 0) {
      d.back()["device"] = r.device;
      d.back()["bus_id"] = r.busId;
      d.back()["name"] = r.gpu;
    }
  }
  doc_["results"] = nlohmann::ordered_json::array();
}

void JsonLog::row(const Row& r) {
  doc_["results"].push_back({{"size", r.bytes},
                             {"count", r.count},
                             {"type", dtypeName(r.dtype)},
                             {"redop", r.op},
                             {"root", r.root},
                             {"out_of_place", measure(r.out, o_.check > 0)},
                             {"in_place", measure(r.in, o_.check > 0)},
                             {"actual_iterations", o_.iters * o_.aggIters}});
}

void JsonLog::deviceCopy(double gbps, size_t bytes) {
  doc_["device_copy_bandwidth"] = {{"bandwidth", gbps}, {"bytes", bytes},
                                   {"method", "cudaMemcpyAsync device to device, rank 0 alone"}};
}

void JsonLog::finish(int64_t wrong, double avgBusBw) {
  doc_["out_of_bounds"] = {{"count", wrong}, {"okay", wrong == 0}};
  doc_["average_bus_bandwidth"] = {{"bandwidth", avgBusBw}, {"okay", "unchecked"}};
  doc_["end_time"] = now();
  std::ofstream f(o_.jsonPath);
  f << doc_.dump(2) << "\n";
  if (!f) std::fprintf(stderr, "cannot write the JSON output to %s\n", o_.jsonPath.c_str());
}

}  // namespace strata::perf
