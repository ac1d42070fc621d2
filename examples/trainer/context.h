// context.h: what one rank's training thread carries around (settings, groups, parameters) and
// the timed collectives it calls. Every collective on the training thread is exposed time.
#pragma once

#include <chrono>

#include "config.h"
#include "data.h"
#include "mesh.h"
#include "params.h"

namespace trainer {

class GradSync;

struct Timers {
  double commMain = 0;  // blocking collectives on the training thread (tp, cp, ep, zero-3 gathers, ...)
  double ppComm = 0;    // pipeline send/recv (includes waiting for the neighbour stage: bubble)
  double gradWait = 0;  // waiting for the communication thread's gradient buckets
  double commBg = 0;    // the communication thread's busy time (overlapped with compute when possible)
  double busy = 0;      // time inside pipeline actions (forward/backward of a chunk)
  void reset() { *this = Timers{}; }
};

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Ctx {
  Config cfg;
  Mesh* mesh = nullptr;
  ParamStore* ps = nullptr;
  GradSync* sync = nullptr;
  const Data* data = nullptr;
  Timers tm;
  // sizes
  int C = 0, T = 0, Cl = 0, Hl = 0, hs = 0, Fl = 0, Vl = 0, vStart = 0, E = 0, El = 0;
  bool sp = false;  // sequence parallel active (tp > 1)
  int tp = 1, tr = 0;

  void init(const Config& c, Mesh& m, ParamStore& p, const Data& d) {
    cfg = c;
    mesh = &m;
    ps = &p;
    data = &d;
    C = c.hidden;
    T = c.seq;
    tp = m.size[TP];
    tr = m.coord[TP];
    Cl = C / tp;
    Hl = c.heads / tp;
    hs = C / c.heads;
    Fl = c.ffn() / tp;
    Vl = c.vocab / tp;
    vStart = tr * Vl;
    E = c.experts;
    El = c.moe() ? c.experts / m.size[EP] : 0;
    sp = c.sp && tp > 1;
  }

  template <class T>
  void allReduce(Group& g, T* x, size_t n, strataRedOp_t op = strataSum) {
    if (!g.active() || n == 0) return;
    double t0 = now();
    g.comm.allReduce(x, x, n, op);
    tm.commMain += now() - t0;
  }
  template <class T>
  void allGather(Group& g, const T* in, T* out, size_t n) {  // n per rank
    if (!g.active()) {
      if (in != out) std::copy(in, in + n, out);
      return;
    }
    double t0 = now();
    g.comm.allGather(in, out, n);
    tm.commMain += now() - t0;
  }
  template <class T>
  void reduceScatter(Group& g, const T* in, T* out, size_t n) {  // n per rank
    if (!g.active()) {
      if (in != out) std::copy(in, in + n, out);
      return;
    }
    double t0 = now();
    g.comm.reduceScatter(in, out, n);
    tm.commMain += now() - t0;
  }
};

}  // namespace trainer
