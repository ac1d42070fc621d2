// trace.cc: span collection, the per-step breakdown, Chrome trace events and their merge on rank 0.
#include "trace.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

#include "mesh.h"

namespace trainer {

const char* kindName(Kind k) {
  static const char* names[] = {"step", "phase", "pass", "layer", "collective", "grad_wait", "pipe"};
  return names[int(k)];
}

StepBreakdown breakdown(const std::vector<Span>& spans, double t0, double t1) {
  StepBreakdown b;
  b.wall = t1 - t0;
  std::vector<const Span*> backward, reductions;
  for (const Span& s : spans) {
    if (s.t0 < t0 || s.t0 > t1) continue;
    const double d = s.t1 - s.t0;
    const bool main = s.lane == Lane::Main;
    if (main && s.kind == Kind::Phase && s.name == "pipeline") b.pipeline += d;
    if (main && s.kind == Kind::Pass) b.passes += d;
    if (main && (s.kind == Kind::Collective || s.kind == Kind::GradWait)) b.exposed += d;
    if (main && s.kind == Kind::Pipe) b.bubble += d;
    if (!main && s.kind == Kind::Collective) b.reduce += d, reductions.push_back(&s);
    if (main && s.kind == Kind::Pass && (s.op == 'B' || s.op == 'W')) backward.push_back(&s);
  }
  // Passes never overlap each other (one thread), nor do the communication thread's calls.
  for (const Span* r : reductions)
    for (const Span* p : backward) b.overlap += std::max(0.0, std::min(r->t1, p->t1) - std::max(r->t0, p->t0));
  return b;
}

void Recorder::add(Span s) {
  std::lock_guard<std::mutex> lk(mu_);
  pending_.push_back(std::move(s));
}

std::vector<Span> Recorder::take() {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<Span> out;
  out.swap(pending_);
  return out;
}

void Recorder::keep(std::vector<Span>&& spans) {
  if (!tracing_) return;
  std::lock_guard<std::mutex> lk(mu_);
  for (Span& s : spans) kept_.push_back(std::move(s));
}

std::string Recorder::events(int rank, const std::string& processName) const {
  std::string out = fmt::format(
      "{{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": {0}, \"args\": {{\"name\": \"{1}\"}}}},\n"
      "{{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": {0}, \"args\": {{\"sort_index\": {0}}}}},\n"
      "{{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": {0}, \"tid\": 0, \"args\": {{\"name\": \"training\"}}}},\n"
      "{{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": {0}, \"tid\": 1, \"args\": {{\"name\": \"grad comm\"}}}}",
      rank, processName);
  for (const Span& s : kept_) {
    out += fmt::format(
        ",\n{{\"name\": \"{}\", \"cat\": \"{}\", \"ph\": \"X\", \"ts\": {:.3f}, \"dur\": {:.3f}, \"pid\": {}, "
        "\"tid\": {}, \"args\": {{{}}}}}",
        s.name, kindName(s.kind), 1e6 * (s.t0 - base_), 1e6 * (s.t1 - s.t0), rank, int(s.lane), s.args);
  }
  return out;
}

void writeMergedTrace(Group& world, const std::string& mine, const std::string& path) {
  const int n = world.size, me = world.rank;
  std::vector<int64_t> sizes(size_t(n), 0);
  const int64_t mySize = int64_t(mine.size());
  if (world.active()) world.comm.allGather(&mySize, sizes.data(), 1);
  else sizes[0] = mySize;
  if (me != 0) {
    if (mySize) world.comm.send(reinterpret_cast<const uint8_t*>(mine.data()), mine.size(), 0);
    return;
  }
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n" << mine;
  std::string buf;
  for (int r = 1; r < n; ++r) {
    buf.resize(size_t(sizes[size_t(r)]));
    if (buf.empty()) continue;
    world.comm.recv(reinterpret_cast<uint8_t*>(buf.data()), buf.size(), r);
    out << ",\n" << buf;
  }
  out << "\n]}\n";
}

}  // namespace trainer
