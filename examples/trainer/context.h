// context.h: what one rank's training thread carries around (settings, groups, parameters, the
// span recorder), its compute lane (backend.h) and the recorded collectives it calls. Every
// collective on the training thread is exposed time. Float tensors follow the lane: on a CUDA lane
// they are device buffers and go through strata's *Stream forms on the lane's stream; other types
// (the loss and norm sums in double) are host values, and a device lane is synchronised before
// such a host collective so no device work of this thread is still in flight on a communicator.
#pragma once

#include <fmt/format.h>

#include <type_traits>

#include "backend.h"
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
  Ops* ops = &hostOps();  // the training thread's compute lane
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
    if (onLane<T>()) laneAllReduce(*ops, g, x, n, op);
    else hostFirst(), g.comm.allReduce(x, x, n, op);
    collective(g, "all_reduce", n * sizeof(T), t0);
  }
  template <class T>
  void allGather(Group& g, const T* in, T* out, size_t n) {  // n per rank
    if (!g.active()) {
      if (in == out) return;
      if (onLane<T>()) ops->copy(out, in, n * sizeof(T));
      else std::copy(in, in + n, out);
      return;
    }
    double t0 = now();
    if constexpr (std::is_same_v<T, float>)
      if (onLane<T>()) {
        strata::check(strataAllGatherStream(in, out, n, strataFloat32, g.comm.get(), ops->stream()), g.comm.get());
        return collective(g, "all_gather", n * size_t(g.size) * sizeof(T), t0);
      }
    hostFirst();
    g.comm.allGather(in, out, n);
    collective(g, "all_gather", n * size_t(g.size) * sizeof(T), t0);
  }
  template <class T>
  void reduceScatter(Group& g, const T* in, T* out, size_t n) {  // n per rank
    if (!g.active()) {
      if (in == out) return;
      if (onLane<T>()) ops->copy(out, in, n * sizeof(T));
      else std::copy(in, in + n, out);
      return;
    }
    double t0 = now();
    if (onLane<T>()) laneReduceScatter(*ops, g, in, out, n);
    else hostFirst(), g.comm.reduceScatter(in, out, n);
    collective(g, "reduce_scatter", n * size_t(g.size) * sizeof(T), t0);
  }
  /// Float tensors on a device lane: strata's stream forms on the lane's stream (any thread's lane).
  template <class T>
  static void laneAllReduce(Ops& lane, Group& g, T* x, size_t n, strataRedOp_t op = strataSum) {
    if constexpr (std::is_same_v<T, float>)
      if (lane.device())
        return strata::check(strataAllReduceStream(x, x, n, strataFloat32, op, g.comm.get(), lane.stream()),
                             g.comm.get());
    g.comm.allReduce(x, x, n, op);
  }
  template <class T>
  static void laneReduceScatter(Ops& lane, Group& g, const T* in, T* out, size_t n) {
    if constexpr (std::is_same_v<T, float>)
      if (lane.device())
        return strata::check(
            strataReduceScatterStream(in, out, n, strataFloat32, strataSum, g.comm.get(), lane.stream()),
            g.comm.get());
    g.comm.reduceScatter(in, out, n);
  }
  template <class T>
  bool onLane() const {
    return std::is_same_v<T, float> && ops->device();
  }
  /// Before a host-buffer collective: this thread's device work is done (nothing in flight).
  void hostFirst() {
    if (ops->device()) ops->sync();
  }

  /// Records a strata call (or group of calls) on group g that began at t0 and ends now. bytes:
  /// the whole buffer the collective works on (all ranks' parts for gathers and scatters).
  void collective(const Group& g, const char* op, size_t bytes, double t0, Lane lane = Lane::Main) {
    rec.add({t0, now(), lane, Kind::Collective, 0, op,
             fmt::format("\"comm\": \"{}\", \"ranks\": {}, \"bytes\": {}", g.name, g.size, bytes)});
  }
};

}  // namespace trainer
