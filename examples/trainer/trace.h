// trace.h: what one rank's threads did, as timed spans. The per-step breakdown the trainer prints
// (compute, exposed communication, pipeline bubble, gradient reduction and how much of it ran
// during a backward pass) is computed from them; with --trace FILE they also become Chrome trace
// events (Perfetto, chrome://tracing), merged over every rank into one file by world rank 0 at the
// end: pid = rank, tid 0 = the training thread, tid 1 = the gradient communication thread.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

namespace trainer {

struct Group;

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

enum class Lane { Main = 0, Comm = 1 };
/// Step: one training step. Phase: the pipeline run, the final gradient sync, the optimizer.
/// Pass: one schedule action (F/B/W of a microbatch and chunk). Layer: one layer's (or the
/// embedding's, the head's) part of a pass. Collective: one strata call or group of calls.
/// GradWait: the training thread waiting for gradient buckets. Pipe: a tick's pipeline sends and
/// receives (waiting for the neighbour stage included: the bubble).
enum class Kind { Step, Phase, Pass, Layer, Collective, GradWait, Pipe };
const char* kindName(Kind k);

struct Span {
  double t0 = 0, t1 = 0;  // seconds, steady clock
  Lane lane = Lane::Main;
  Kind kind = Kind::Layer;
  char op = 0;             // Pass and Layer: 'F', 'B' or 'W'
  std::string name, args;  // args: the body of a JSON object (`"mb": 1, "bytes": 4096`), may be empty
};

/// One rank's figures for one step, in seconds.
struct StepBreakdown {
  double wall = 0;      // the step
  double pipeline = 0;  // the pipeline run (all passes and their transfers)
  double passes = 0;    // inside passes (F/B/W), their collectives included
  double exposed = 0;   // collectives and gradient waits on the training thread
  double bubble = 0;    // pipeline transfers: waiting for the neighbour stage (and the copy)
  double reduce = 0;    // the communication thread's gradient collectives
  double overlap = 0;   // the part of `reduce` that ran while the training thread was in a B or W pass
  double compute() const { return wall - exposed - bubble; }
  double bubbleFraction() const { return pipeline > 0 ? 1.0 - passes / pipeline : 0.0; }
};

/// The spans of [t0, t1] summed up (spans starting before t0 are left out).
StepBreakdown breakdown(const std::vector<Span>& spans, double t0, double t1);

/// Collects spans from both threads of a rank (thread-safe).
class Recorder {
 public:
  void add(Span s);
  /// Moves out the spans added since the last call.
  std::vector<Span> take();
  /// Tracing: `base` is the common start time (taken right after a world barrier).
  void enable(double base) { tracing_ = true, base_ = base; }
  bool tracing() const { return tracing_; }
  /// Keeps spans for the trace file (only while tracing).
  void keep(std::vector<Span>&& spans);
  /// The kept spans as Chrome trace events (JSON objects separated by ",\n"), with the rank's
  /// process and thread names.
  std::string events(int rank, const std::string& processName) const;

 private:
  std::mutex mu_;
  std::vector<Span> pending_, kept_;
  bool tracing_ = false;
  double base_ = 0;
};

/// Adds a span from construction to destruction.
class Scope {
 public:
  Scope(Recorder& r, Kind kind, char op, std::string name, std::string args = {}, Lane lane = Lane::Main)
      : r_(r), s_{now(), 0, lane, kind, op, std::move(name), std::move(args)} {}
  ~Scope() {
    s_.t1 = now();
    r_.add(std::move(s_));
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Recorder& r_;
  Span s_;
};

/// Collective over `world` (every rank calls it): every rank's events go to rank 0 through strata
/// (sizes all-gathered, then one send per rank), which writes them to `path` as one trace.
void writeMergedTrace(Group& world, const std::string& mine, const std::string& path);

}  // namespace trainer
