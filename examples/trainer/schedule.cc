// schedule.cc: the pass lists of every schedule, their tick and timed simulations, the text grid.
#include "schedule.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

namespace trainer {

bool splitBackward(const Config& cfg) { return cfg.schedule == "zb" && cfg.pp > 1; }

std::vector<Action> scheduleFor(const Config& cfg, int s) {
  const int P = cfg.pp, M = cfg.microbatches, V = cfg.virtualStages;
  std::vector<Action> out;
  auto F = [&](int m, int v = 0) { out.push_back({Op::F, m, v}); };
  auto B = [&](int m, int v = 0) { out.push_back({Op::B, m, v}); };
  auto W = [&](int m) { out.push_back({Op::W, m, 0}); };
  if (P == 1 && V == 1) {  // gradient accumulation: forward and backward of each microbatch in turn
    for (int m = 0; m < M; ++m) F(m), B(m);
    return out;
  }
  if (cfg.schedule == "gpipe") {
    for (int m = 0; m < M; ++m) F(m);
    for (int m = 0; m < M; ++m) B(m);
    return out;
  }
  if ((cfg.schedule == "1f1b" || cfg.schedule == "zb") && V == 1) {
    const bool zb = cfg.schedule == "zb";
    const int warm = std::min(P - s - 1, M);
    int f = 0, b = 0, w = 0;
    // ZB-H1: after B(k), W(k - s) once k >= s; the s W's still pending run at the end.
    auto backward = [&] {
      B(b);
      if (zb && b >= s) W(w++);
      ++b;
    };
    for (; f < warm; ++f) F(f);
    for (; f < M; ++f) F(f), backward();
    while (b < M) backward();
    while (zb && w < M) W(w++);
    return out;
  }
  // Interleaved 1F1B (Megatron): the k-th forward runs chunk (k / P) % V of microbatch
  // (k / (P*V)) * P + k % P; backwards walk the chunks in reverse.
  const int total = M * V;
  const int warm = std::min(total, (P - s - 1) * 2 + (V - 1) * P);
  auto fwdAt = [&](int k) { return Action{Op::F, (k / (P * V)) * P + k % P, (k % (P * V)) / P}; };
  auto bwdAt = [&](int k) { return Action{Op::B, (k / (P * V)) * P + k % P, V - 1 - (k % (P * V)) / P}; };
  int f = 0, b = 0;
  for (; f < warm; ++f) out.push_back(fwdAt(f));
  for (; f < total; ++f, ++b) out.push_back(fwdAt(f)), out.push_back(bwdAt(b));
  for (; b < total; ++b) out.push_back(bwdAt(b));
  return out;
}

double theoreticalBubble(const Config& cfg) {
  const double p = cfg.pp, m = cfg.microbatches, v = cfg.virtualStages;
  if (splitBackward(cfg)) return (p - 1) / (3 * m + p - 1);  // F = B = W: p-1 idle units of 3m + p - 1
  return (p - 1) / (v * m + p - 1);
}

void simulateSchedule(const Config& cfg, int me, std::vector<int>* tickAction,
                      std::vector<std::vector<Transfer>>* tickTransfers) {
  const int P = cfg.pp, nChunks = cfg.chunks();
  std::vector<std::vector<Action>> acts(static_cast<size_t>(P));
  for (int s = 0; s < P; ++s) acts[size_t(s)] = scheduleFor(cfg, s);
  tickAction->clear();
  tickTransfers->clear();
  // Ticks at which inputs become available (delivered at the end of the producing tick).
  std::map<std::pair<int, int>, int> actReady, gradReady, fwdDone, bwdDone;
  std::vector<size_t> next(size_t(P), 0);
  for (int tick = 0;; ++tick) {
    bool allDone = true, progress = false;
    std::vector<Transfer> msgs;
    int myAction = -1;
    for (int s = 0; s < P; ++s) {
      if (next[size_t(s)] == acts[size_t(s)].size()) continue;
      allDone = false;
      const Action& a = acts[size_t(s)][next[size_t(s)]];
      const int chunk = a.v * P + s;
      auto avail = [&](std::map<std::pair<int, int>, int>& m, int mb, int ch) {
        auto it = m.find({mb, ch});
        return it != m.end() && it->second <= tick;
      };
      auto doneBefore = [&](std::map<std::pair<int, int>, int>& m) {
        auto it = m.find({a.mb, chunk});
        return it != m.end() && it->second < tick;
      };
      bool ready = a.op == Op::F   ? (chunk == 0 || avail(actReady, a.mb, chunk))
                   : a.op == Op::B ? doneBefore(fwdDone) && (chunk == nChunks - 1 || avail(gradReady, a.mb, chunk))
                                   : doneBefore(bwdDone);
      if (!ready) continue;
      progress = true;
      if (s == me) myAction = int(next[size_t(s)]);
      next[size_t(s)]++;
      if (a.op == Op::F) {
        fwdDone[{a.mb, chunk}] = tick;
        if (chunk + 1 < nChunks) {
          msgs.push_back({0, a.mb, chunk + 1, s, (chunk + 1) % P});
          actReady[{a.mb, chunk + 1}] = tick + 1;
        }
      } else if (a.op == Op::B) {
        bwdDone[{a.mb, chunk}] = tick;
        if (chunk > 0) {
          msgs.push_back({1, a.mb, chunk - 1, s, (chunk - 1) % P});
          gradReady[{a.mb, chunk - 1}] = tick + 1;
        }
      }
    }
    if (allDone) break;
    if (!progress) throw std::logic_error(fmt::format("pipeline schedule '{}' stalls at tick {}", cfg.schedule, tick));
    tickAction->push_back(myAction);
    tickTransfers->push_back(std::move(msgs));
  }
}

double Timeline::bubble() const {
  double busy = 0;
  for (auto& st : stages)
    for (auto& p : st) busy += p.end - p.start;
  return makespan > 0 ? 1.0 - busy / (double(stages.size()) * makespan) : 0.0;
}

Timeline simulateTimeline(const Config& cfg, PassCosts costs) {
  const int P = cfg.pp, nChunks = cfg.chunks();
  const bool split = splitBackward(cfg);
  std::vector<std::vector<Action>> acts(static_cast<size_t>(P));
  for (int s = 0; s < P; ++s) acts[size_t(s)] = scheduleFor(cfg, s);
  std::map<std::pair<int, int>, double> fEnd, bEnd;  // (microbatch, chunk) -> end time
  Timeline tl;
  tl.stages.resize(size_t(P));
  std::vector<size_t> next(size_t(P), 0);
  std::vector<double> free(size_t(P), 0.0);
  for (;;) {
    bool progress = false, done = true;
    for (int s = 0; s < P; ++s) {
      for (auto& n = next[size_t(s)]; n < acts[size_t(s)].size(); ++n) {
        const Action& a = acts[size_t(s)][n];
        const int chunk = a.v * P + s;
        auto endOf = [](const std::map<std::pair<int, int>, double>& m, int mb, int ch) {
          auto it = m.find({mb, ch});
          return it == m.end() ? -1.0 : it->second;
        };
        double ready = 0, cost = costs.f;
        if (a.op == Op::F) {
          ready = chunk == 0 ? 0.0 : endOf(fEnd, a.mb, chunk - 1);
        } else if (a.op == Op::B) {
          const double f = endOf(fEnd, a.mb, chunk), g = chunk + 1 == nChunks ? 0.0 : endOf(bEnd, a.mb, chunk + 1);
          ready = f < 0 || g < 0 ? -1.0 : std::max(f, g);
          cost = split ? costs.b : costs.b + costs.w;
        } else {
          ready = endOf(bEnd, a.mb, chunk);
          cost = costs.w;
        }
        if (ready < 0) break;  // its input is not computed yet
        const double start = std::max(ready, free[size_t(s)]);
        free[size_t(s)] = start + cost;
        tl.stages[size_t(s)].push_back({int(n), start, start + cost});
        if (a.op == Op::F) fEnd[{a.mb, chunk}] = start + cost;
        if (a.op == Op::B) bEnd[{a.mb, chunk}] = start + cost;
        tl.makespan = std::max(tl.makespan, start + cost);
        progress = true;
      }
      done = done && next[size_t(s)] == acts[size_t(s)].size();
    }
    if (done) return tl;
    if (!progress) throw std::logic_error(fmt::format("pipeline schedule '{}' stalls", cfg.schedule));
  }
}

std::vector<int> peakInFlight(const Config& cfg) {
  const bool split = splitBackward(cfg);
  std::vector<int> peak;
  for (int s = 0; s < cfg.pp; ++s) {
    int held = 0, most = 0;
    for (const Action& a : scheduleFor(cfg, s)) {
      if (a.op == Op::F) most = std::max(most, ++held);
      else if (a.op == Op::W || !split) --held;
    }
    peak.push_back(most);
  }
  return peak;
}

std::string drawSchedule(const Config& cfg, PassCosts costs) {
  const Timeline tl = simulateTimeline(cfg, costs);
  const int units = int(tl.makespan + 0.5);
  auto label = [&](const Action& a) {
    std::string s = fmt::format("{}{}", char(a.op), a.mb);
    if (cfg.virtualStages > 1) s += char('a' + a.v);
    return s;
  };
  size_t width = 2;
  for (int s = 0; s < cfg.pp; ++s)
    for (const Action& a : scheduleFor(cfg, s)) width = std::max(width, label(a).size());
  ++width;
  std::string out = fmt::format(
      "schedule {} | pp {} | microbatches {} | virtual stages {} | costs F={} B={} W={}{} | one column per time unit\n",
      cfg.schedule, cfg.pp, cfg.microbatches, cfg.virtualStages, costs.f, costs.b, costs.w,
      splitBackward(cfg) ? "" : " (B is the whole backward, B+W; its second unit is drawn in lower case)");
  out += fmt::format("{:>8} ", "time");
  for (int t = 0; t < units; ++t) out += fmt::format("{:<{}}", t % 5 == 0 ? std::to_string(t) : "", width);
  out += "\n";
  for (int s = 0; s < cfg.pp; ++s) {
    const std::vector<Action> acts = scheduleFor(cfg, s);
    std::vector<std::string> cells(size_t(units), ".");
    for (const TimedPass& p : tl.stages[size_t(s)]) {
      std::string l = label(acts[size_t(p.index)]);
      for (int t = int(p.start + 0.5); t < int(p.end + 0.5) && t < units; ++t) {
        cells[size_t(t)] = l;
        l[0] = char(std::tolower(l[0]));
      }
    }
    out += fmt::format("{:>8} ", fmt::format("stage {}", s));
    for (const std::string& c : cells) out += fmt::format("{:<{}}", c, width);
    out += "\n";
  }
  const std::vector<int> peak = peakInFlight(cfg);
  std::string peaks;
  for (int p : peak) peaks += fmt::format(" {}", p);
  out += fmt::format("bubble {:.3f} (formula {:.3f}), makespan {} units; peak in-flight microbatches per stage:{}\n",
                     tl.bubble(), theoreticalBubble(cfg), tl.makespan, peaks);
  return out;
}

}  // namespace trainer
