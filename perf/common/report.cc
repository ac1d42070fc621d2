// report.cc: prints the header, rows and footer in nccl-tests' column layout.
#include "perf/common/report.h"

#include <fmt/format.h>

#include <cstdio>

#include "perf/common/json_log.h"

namespace strata::perf {
namespace {

void line(const std::string& s) {
  std::string t = s;
  t.erase(t.find_last_not_of(' ') + 1);
  std::fputs((t + "\n").c_str(), stdout);
  std::fflush(stdout);
}

// One placement's columns; #wrong is N/A without -c, as in nccl-tests.
std::string side(const Measure& m, bool checked) {
  return fmt::format("  {:>7}  {:>6}  {:>6}  {:>6}", fitNumber(m.timeUs, 7), fitNumber(m.algBw, 6),
                     fitNumber(m.busBw, 6), checked ? std::to_string(m.wrong) : "N/A");
}

}  // namespace

std::string fitNumber(double value, int width) {
  int digits = 0;  // digits before the decimal point
  for (double p = 1; value >= p && digits < 40; p *= 10) digits++;
  if (digits < width - 2) return fmt::format("{:>{}.2f}", value, width);
  if (digits < width - 1) return fmt::format("{:>{}.1f}", value, width);
  if (digits < width + 1) return fmt::format("{:>{}.0f}", value, width);
  return fmt::format("{:>{}.1e}", value, width);
}

Report::Report(const Options& o, const ToolInfo& tool) : o_(o), tool_(tool) {
  if (!o.jsonPath.empty()) json_ = std::make_unique<JsonLog>(o, tool);
}

Report::~Report() = default;

void Report::header(const std::string& library, int nprocs, const std::vector<RankLine>& ranks) {
  const bool factor = o_.stepFactor > 1;
  const size_t nThreads = ranks.size() / static_cast<size_t>(nprocs);
  line(fmt::format("# strata perf tools (nccl-tests layout): {} {}", library, tool_.program));
  line("# Collective test starting: " + tool_.program);
  line(fmt::format("# nThread {} nGpus {} minBytes {} maxBytes {} step: {}({}) warmup iters: {} iters: {} agg iters: "
                   "{} validation: {} graph: 0",
                   nThreads, o_.nGpus, o_.minBytes, o_.maxBytes, factor ? o_.stepFactor : o_.stepBytes,
                   factor ? "factor" : "bytes", o_.warmupIters, o_.iters, o_.aggIters, o_.check));
  if (o_.blocking == 1) line("# Blocking Enabled: wait for completion and barrier after each collective");
  line(fmt::format("# World: {} ranks ({} processes x {} threads), {} memory", ranks.size(), nprocs, nThreads,
                   o_.memory));
  line("#");
  line("# Using devices");
  for (const RankLine& r : ranks) {
    if (r.device >= 0)
      line(fmt::format("#  Rank {:>2} Group  0 Pid {:>6} on {:>10} device {:>2} [{}] {} [thread {}]", r.rank, r.pid,
                       r.host, r.device, r.busId, r.gpu, r.thread));
    else
      line(fmt::format("#  Rank {:>2} Group  0 Pid {:>6} on {:>10} device cpu [thread {}] host memory", r.rank,
                       r.pid, r.host, r.thread));
  }
  line("#");
  line(fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place", "",
                   "", "", "", ""));
  line(fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}",
                   "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
                   "busbw", "#wrong"));
  line(fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}",
                   "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""));
  if (json_) json_->header(library, nprocs, ranks);
}

void Report::note(const std::string& text) { line("# " + text); }

void Report::deviceCopy(double gbps, size_t bytes) {
  line(fmt::format("# device-to-device copy bandwidth: {:.2f} GB/s (cudaMemcpyAsync, {} bytes)", gbps, bytes));
  if (json_) json_->deviceCopy(gbps, bytes);
}

void Report::row(const Row& r) {
  line(fmt::format("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}", r.bytes, r.count, dtypeName(r.dtype), r.op, r.root) +
       side(r.out, o_.check > 0) + side(r.in, o_.check > 0));
  wrong_ += r.out.wrong + r.in.wrong;
  busBwSum_ += r.out.busBw + r.in.busBw;
  busBwCount_ += 2;
  if (json_) json_->row(r);
}

void Report::footer() {
  const double avgBusBw = busBwCount_ ? busBwSum_ / busBwCount_ : 0;
  line(fmt::format("# Out of bounds values : {} {}", wrong_, wrong_ ? "FAILED" : "OK"));
  line(fmt::format("# Avg bus bandwidth    : {:g}", avgBusBw));
  line("#");
  line("# Collective test concluded: " + tool_.program);
  if (json_) json_->finish(wrong_, avgBusBw);
}

}  // namespace strata::perf
