// pp.cc: schedules, their tick simulation, and the executor.
#include "pp.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace trainer {

std::vector<Action> scheduleFor(const Config& cfg, int s) {
  const int P = cfg.pp, M = cfg.microbatches, V = cfg.virtualStages;
  std::vector<Action> out;
  if (P == 1 && V == 1) {  // gradient accumulation: forward and backward of each microbatch in turn
    for (int m = 0; m < M; ++m) out.push_back({true, m, 0}), out.push_back({false, m, 0});
    return out;
  }
  if (cfg.schedule == "gpipe") {
    for (int m = 0; m < M; ++m) out.push_back({true, m, 0});
    for (int m = 0; m < M; ++m) out.push_back({false, m, 0});
    return out;
  }
  if (cfg.schedule == "1f1b" && V == 1) {
    const int warm = std::min(P - s - 1, M);
    int f = 0, b = 0;
    for (; f < warm; ++f) out.push_back({true, f, 0});
    for (; f < M; ++f, ++b) out.push_back({true, f, 0}), out.push_back({false, b, 0});
    for (; b < M; ++b) out.push_back({false, b, 0});
    return out;
  }
  // Interleaved 1F1B (Megatron): the k-th forward runs chunk (k / P) % V of microbatch
  // (k / (P*V)) * P + k % P; backwards walk the chunks in reverse.
  const int total = M * V;
  const int warm = std::min(total, (P - s - 1) * 2 + (V - 1) * P);
  auto fwdAt = [&](int k) { return Action{true, (k / (P * V)) * P + k % P, (k % (P * V)) / P}; };
  auto bwdAt = [&](int k) { return Action{false, (k / (P * V)) * P + k % P, V - 1 - (k % (P * V)) / P}; };
  int f = 0, b = 0;
  for (; f < warm; ++f) out.push_back(fwdAt(f));
  for (; f < total; ++f, ++b) out.push_back(fwdAt(f)), out.push_back(bwdAt(b));
  for (; b < total; ++b) out.push_back(bwdAt(b));
  return out;
}

double theoreticalBubble(const Config& cfg) {
  const double p = cfg.pp, m = cfg.microbatches, v = cfg.virtualStages;
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
  std::map<std::pair<int, int>, int> actReady, gradReady, fwdDone;
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
      bool ready = a.fwd ? (chunk == 0 || avail(actReady, a.mb, chunk))
                         : (fwdDone.count({a.mb, chunk}) && fwdDone[{a.mb, chunk}] < tick &&
                            (chunk == nChunks - 1 || avail(gradReady, a.mb, chunk)));
      if (!ready) continue;
      progress = true;
      if (s == me) myAction = int(next[size_t(s)]);
      next[size_t(s)]++;
      if (a.fwd) {
        fwdDone[{a.mb, chunk}] = tick;
        if (chunk + 1 < nChunks) {
          msgs.push_back({0, a.mb, chunk + 1, s, (chunk + 1) % P});
          actReady[{a.mb, chunk + 1}] = tick + 1;
        }
      } else if (chunk > 0) {
        msgs.push_back({1, a.mb, chunk - 1, s, (chunk - 1) % P});
        gradReady[{a.mb, chunk - 1}] = tick + 1;
      }
    }
    if (allDone) break;
    if (!progress) throw std::logic_error(fmt::format("pipeline schedule '{}' stalls at tick {}", cfg.schedule, tick));
    tickAction->push_back(myAction);
    tickTransfers->push_back(std::move(msgs));
  }
}

Pipeline::Pipeline(Ctx& c, Model& m) : c_(c), model_(m) {
  mine_ = scheduleFor(c.cfg, c.mesh->coord[PP]);
  simulateSchedule(c.cfg, c.mesh->coord[PP], &tickAction_, &tickMsgs_);
}

double Pipeline::run(int rowsPerMicro) {
  const double t0 = now();
  const int P = c_.cfg.pp, me = c_.mesh->coord[PP];
  const size_t msgLen = size_t(rowsPerMicro) * size_t(c_.C);
  std::map<std::tuple<int, int, int>, std::vector<float>> inbox;  // (grad, mb, chunk) -> data
  std::vector<float> produced;
  for (size_t t = 0; t < tickAction_.size(); ++t) {
    produced.clear();
    if (tickAction_[t] >= 0) {
      const Action& a = mine_[size_t(tickAction_[t])];
      const int chunk = a.v * P + me;
      double a0 = now();
      if (a.fwd) {
        auto it = inbox.find({0, a.mb, chunk});
        model_.forward(a.v, a.mb, it == inbox.end() ? nullptr : it->second.data(), produced);
        if (it != inbox.end()) inbox.erase(it);
      } else {
        auto it = inbox.find({1, a.mb, chunk});
        model_.backward(a.v, a.mb, it == inbox.end() ? nullptr : it->second.data(), produced);
        if (it != inbox.end()) inbox.erase(it);
      }
      c_.tm.busy += now() - a0;
    }
    // This tick's transfers that involve this rank, all in one group.
    bool any = false;
    for (const Transfer& m : tickMsgs_[t])
      if ((m.src == me) != (m.dst == me)) any = true;
    for (const Transfer& m : tickMsgs_[t])
      if (m.src == me && m.dst == me) inbox[{m.grad, m.mb, m.chunk}] = produced;
    if (!any) continue;
    double c0 = now();
    {
      strata::Group grp;
      for (const Transfer& m : tickMsgs_[t]) {
        if (m.src == m.dst) continue;
        if (m.src == me) c_.mesh->pp.comm.send(produced.data(), msgLen, m.dst);
        if (m.dst == me) {
          auto& buf = inbox[{m.grad, m.mb, m.chunk}];
          buf.resize(msgLen);
          c_.mesh->pp.comm.recv(buf.data(), msgLen, m.src);
        }
      }
      grp.end();
    }
    c_.tm.ppComm += now() - c0;
  }
  return now() - t0;
}

}  // namespace trainer
