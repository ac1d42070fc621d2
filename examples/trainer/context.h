// context.h: what one rank's training thread carries around (settings, groups, parameters, the
// span recorder) and the recorded collectives it calls. Every collective on the training thread is
// exposed time.
#pragma once

#include <fmt/format.h>

#include "config.h"
#include "data.h"
#include "mesh.h"
#include "params.h"
#include "trace.h"

namespace trainer {

class GradSync;

struct Ctx {
  Config cfg;
  Mesh* mesh = nullptr;
  ParamStore* ps = nullptr;
  GradSync* sync = nullptr;
  const Data* data = nullptr;
  Recorder rec;  // every pass, layer and strata call of this rank (both threads)
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
    collective(g, "all_reduce", n * sizeof(T), t0);
  }
  template <class T>
  void allGather(Group& g, const T* in, T* out, size_t n) {  // n per rank
    if (!g.active()) {
      if (in != out) std::copy(in, in + n, out);
      return;
    }
    double t0 = now();
    g.comm.allGather(in, out, n);
    collective(g, "all_gather", n * size_t(g.size) * sizeof(T), t0);
  }
  template <class T>
  void reduceScatter(Group& g, const T* in, T* out, size_t n) {  // n per rank
    if (!g.active()) {
      if (in != out) std::copy(in, in + n, out);
      return;
    }
    double t0 = now();
    g.comm.reduceScatter(in, out, n);
    collective(g, "reduce_scatter", n * size_t(g.size) * sizeof(T), t0);
  }
  /// Records a strata call (or group of calls) on group g that began at t0 and ends now. bytes:
  /// the whole buffer the collective works on (all ranks' parts for gathers and scatters).
  void collective(const Group& g, const char* op, size_t bytes, double t0, Lane lane = Lane::Main) {
    rec.add({t0, now(), lane, Kind::Collective, 0, op,
             fmt::format("\"comm\": \"{}\", \"ranks\": {}, \"bytes\": {}", g.name, g.size, bytes)});
  }
};

}  // namespace trainer
