// pipeline.cc: timed simulation of the trainer's pipeline schedules (see pipeline.h).
#include "planner/pipeline.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "schedule.h"  // examples/trainer: the schedules as data

namespace strata::planner {

static trainer::Config trainerConfig(PipeSchedule sched, int pp, int vp, long microbatches) {
  trainer::Config cfg;
  cfg.pp = pp;
  cfg.virtualStages = vp;
  cfg.microbatches = int(microbatches);
  cfg.schedule = scheduleName(sched);
  return cfg;
}

double formulaBubble(PipeSchedule sched, int pp, int vp, long microbatches) {
  return trainer::theoreticalBubble(trainerConfig(sched, pp, vp, microbatches));
}

namespace {

// The state both simulations share: every stage's pass order, the end times of forward and
// backward passes by (chunk, microbatch), and what a stage's next pass waits for and costs.
struct Timeline {
  Timeline(const trainer::Config& cfg, long microbatches, const std::vector<PassCost>& chunkCost, double p2p)
      : P(cfg.pp), C(cfg.pp * cfg.virtualStages), M(microbatches), split(trainer::splitBackward(cfg)),
        hop(cfg.pp > 1 ? p2p : 0.0), cost(chunkCost), acts(size_t(P)), next(size_t(P), 0),
        fEnd(size_t(C * M), -1.0), bEnd(size_t(C * M), -1.0) {
    for (int s = 0; s < P; ++s) acts[size_t(s)] = trainer::scheduleFor(cfg, s);
  }
  size_t at(int chunk, int mb) const { return size_t(chunk) * size_t(M) + size_t(mb); }
  bool done(int s) const { return next[size_t(s)] >= acts[size_t(s)].size(); }
  const trainer::Action& action(int s) const { return acts[size_t(s)][next[size_t(s)]]; }
  int chunkOf(int s) const { return action(s).v * P + s; }

  /// When stage s's next pass may start (-1: its input does not exist yet) and its cost.
  double ready(int s, double* seconds) const {
    const trainer::Action& a = action(s);
    const int chunk = chunkOf(s);
    const PassCost& c = cost[size_t(chunk)];
    if (a.op == trainer::Op::F) {
      *seconds = c.fwd;
      if (chunk == 0) return 0.0;
      const double f = fEnd[at(chunk - 1, a.mb)];
      return f < 0 ? -1.0 : f + hop;
    }
    if (a.op == trainer::Op::B) {
      *seconds = split ? c.bwdInput : c.bwd();
      const double f = fEnd[at(chunk, a.mb)];
      if (chunk + 1 == C) return f;
      const double g = bEnd[at(chunk + 1, a.mb)];
      return f < 0 || g < 0 ? -1.0 : std::max(f, g + hop);
    }
    *seconds = c.bwdWeight;
    return bEnd[at(chunk, a.mb)];
  }

  /// Stage s's next pass ran from `start` to `end`.
  void finish(int s, double start, double end, PipelineResult* r) {
    const trainer::Action& a = action(s);
    const int chunk = chunkOf(s);
    if (a.op == trainer::Op::F) fEnd[at(chunk, a.mb)] = end;
    if (a.op == trainer::Op::B) bEnd[at(chunk, a.mb)] = end;
    if (a.op == (split ? trainer::Op::W : trainer::Op::B)) r->lastGrad[size_t(s)][size_t(a.v)] = {start, end};
    r->makespan = std::max(r->makespan, end);
    ++next[size_t(s)];
  }

  const int P, C;
  const long M;
  const bool split;
  const double hop;
  const std::vector<PassCost>& cost;
  std::vector<std::vector<trainer::Action>> acts;
  std::vector<size_t> next;
  std::vector<double> fEnd, bEnd;
};

// A device per rank: each stage runs its passes in order, each as soon as its input is there.
// Returns the stage-seconds spent running passes.
double runDedicated(Timeline& t, PipelineResult* r) {
  std::vector<double> free(size_t(t.P), 0.0);
  double work = 0;
  for (;;) {
    bool progress = false, done = true;
    for (int s = 0; s < t.P; ++s) {
      for (double cost; !t.done(s);) {
        const double ready = t.ready(s, &cost);
        if (ready < 0) break;
        const double start = std::max(ready, free[size_t(s)]);
        free[size_t(s)] = start + cost;
        work += cost;
        t.finish(s, start, start + cost, r);
        progress = true;
      }
      done = done && t.done(s);
    }
    if (done) return work;
    if (!progress) throw std::logic_error("pipeline schedule stalls");
  }
}

// Shared cores: a fluid simulation. Between events every running pass advances at the same
// rate, min(1, cores / busy ranks); events are a pass finishing and an input arriving. Returns
// the stage-seconds spent running passes (the bubble is the rest).
double runShared(Timeline& t, const CoreSharing& share, PipelineResult* r) {
  const size_t P = size_t(t.P);
  std::vector<double> left(P, -1.0), began(P, 0.0);  // left < 0: not running
  double now = 0, work = 0, occupied = 0;
  for (;;) {
    double arrival = std::numeric_limits<double>::infinity();
    int running = 0;
    bool done = true;
    for (int s = 0; s < t.P; ++s) {
      if (t.done(s)) continue;
      done = false;
      if (left[size_t(s)] < 0) {
        double cost;
        const double ready = t.ready(s, &cost);
        if (ready >= 0 && ready <= now) left[size_t(s)] = cost, began[size_t(s)] = now, work += cost;
        else if (ready > now) arrival = std::min(arrival, ready);
      }
      if (left[size_t(s)] >= 0) ++running;
    }
    if (done) return occupied;  // a stage running slowly on shared cores is not idle
    if (running == 0 && std::isinf(arrival)) throw std::logic_error("pipeline schedule stalls");
    const double rate = std::min(1.0, share.cores / (double(running) * share.ranksPerStage));
    double dt = arrival - now;
    for (size_t s = 0; s < P; ++s)
      if (left[s] >= 0) dt = std::min(dt, left[s] / rate);
    now += dt;
    for (int s = 0; s < t.P; ++s) {
      double& l = left[size_t(s)];
      if (l < 0) continue;
      occupied += dt;
      l -= rate * dt;
      if (l <= 1e-12 * now) l = -1.0, t.finish(s, began[size_t(s)], now, r);
    }
  }
}

}  // namespace

PipelineResult simulatePipeline(PipeSchedule sched, int pp, int vp, long microbatches,
                                const std::vector<PassCost>& chunkCost, double p2p, CoreSharing share) {
  const trainer::Config cfg = trainerConfig(sched, pp, vp, microbatches);
  Timeline t(cfg, microbatches, chunkCost, p2p);
  PipelineResult r;
  r.lastGrad.assign(size_t(pp), std::vector<std::pair<double, double>>(size_t(vp), {0.0, 0.0}));
  const double work = share.shared() ? runShared(t, share, &r) : runDedicated(t, &r);
  r.bubble = r.makespan > 0 ? 1.0 - work / (double(pp) * r.makespan) : 0.0;
  int held = 0;
  for (const trainer::Action& a : t.acts[0]) {
    if (a.op == trainer::Op::F) r.peakInFlight = std::max(r.peakInFlight, ++held);
    else if (a.op == trainer::Op::W || !t.split) --held;
  }
  return r;
}

}  // namespace strata::planner
