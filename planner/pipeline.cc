// pipeline.cc: timed simulation of the trainer's pipeline schedules (see pipeline.h).
#include "planner/pipeline.h"

#include <algorithm>
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

PipelineResult simulatePipeline(PipeSchedule sched, int pp, int vp, long microbatches,
                                const std::vector<PassCost>& chunkCost, double p2p) {
  const trainer::Config cfg = trainerConfig(sched, pp, vp, microbatches);
  const bool split = trainer::splitBackward(cfg);
  const int P = pp, C = pp * vp;
  const long M = microbatches;
  std::vector<std::vector<trainer::Action>> acts(static_cast<size_t>(P));
  for (int s = 0; s < P; ++s) acts[size_t(s)] = trainer::scheduleFor(cfg, s);
  std::vector<double> fEnd(size_t(C * M), -1.0), bEnd(size_t(C * M), -1.0);
  auto at = [&](int chunk, int mb) { return size_t(chunk) * size_t(M) + size_t(mb); };
  std::vector<size_t> next(size_t(P), 0);
  std::vector<double> free(size_t(P), 0.0), busy(size_t(P), 0.0);
  const double hop = P > 1 ? p2p : 0.0;
  PipelineResult r;
  r.lastGrad.assign(size_t(P), std::vector<std::pair<double, double>>(size_t(vp), {0.0, 0.0}));
  for (;;) {
    bool progress = false, done = true;
    for (int s = 0; s < P; ++s) {
      auto& n = next[size_t(s)];
      for (; n < acts[size_t(s)].size(); ++n) {
        const trainer::Action& a = acts[size_t(s)][n];
        const int chunk = a.v * P + s;
        const PassCost& c = chunkCost[size_t(chunk)];
        double ready = 0, cost = c.fwd;
        if (a.op == trainer::Op::F) {
          ready = chunk == 0 ? 0.0 : fEnd[at(chunk - 1, a.mb)];
          if (chunk > 0 && ready >= 0) ready += hop;
        } else if (a.op == trainer::Op::B) {
          const double f = fEnd[at(chunk, a.mb)];
          const double g = chunk + 1 == C ? 0.0 : bEnd[at(chunk + 1, a.mb)];
          ready = f < 0 || g < 0 ? -1.0 : std::max(f, chunk + 1 == C ? 0.0 : g + hop);
          cost = split ? c.bwdInput : c.bwd();
        } else {
          ready = bEnd[at(chunk, a.mb)];
          cost = c.bwdWeight;
        }
        if (ready < 0) break;
        const double start = std::max(ready, free[size_t(s)]);
        free[size_t(s)] = start + cost;
        busy[size_t(s)] += cost;
        if (a.op == trainer::Op::F) fEnd[at(chunk, a.mb)] = start + cost;
        if (a.op == trainer::Op::B) bEnd[at(chunk, a.mb)] = start + cost;
        if (a.op == (split ? trainer::Op::W : trainer::Op::B)) r.lastGrad[size_t(s)][size_t(a.v)] = {start, start + cost};
        r.makespan = std::max(r.makespan, start + cost);
        progress = true;
      }
      done = done && n == acts[size_t(s)].size();
    }
    if (done) break;
    if (!progress) throw std::logic_error("pipeline schedule stalls");
  }
  double total = 0;
  for (double b : busy) total += b;
  r.bubble = r.makespan > 0 ? 1.0 - total / (double(P) * r.makespan) : 0.0;
  int held = 0;
  for (const trainer::Action& a : acts[0]) {
    if (a.op == trainer::Op::F) r.peakInFlight = std::max(r.peakInFlight, ++held);
    else if (a.op == trainer::Op::W || !split) --held;
  }
  return r;
}

}  // namespace strata::planner
