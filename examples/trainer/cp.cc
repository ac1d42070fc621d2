// cp.cc: ring attention forward and backward over the cp group.
#include "cp.h"

#include <limits>

#include "kernels.h"

namespace trainer::cp {

namespace {

// Sends `out` to the next rank of the ring and receives the previous rank's block into `in`
// (device buffers: the stream forms on the training lane's stream).
void ringShift(Ctx& c, const Buf& out, Buf& in) {
  Group& g = c.mesh->cp;
  in.resize(out.size());
  double t0 = now();
  const int next = (g.rank + 1) % g.size, prev = (g.rank - 1 + g.size) % g.size;
  {
    strata::Group grp;
    if (c.ops->device()) {
      strata::check(strataSendStream(out.data(), out.size(), strataFloat32, next, g.comm.get(), c.ops->stream()),
                    g.comm.get());
      strata::check(strataRecvStream(in.data(), in.size(), strataFloat32, prev, g.comm.get(), c.ops->stream()),
                    g.comm.get());
    } else {
      g.comm.send(out.data(), out.size(), next);
      g.comm.recv(in.data(), in.size(), prev);
    }
    grp.end();
  }
  c.collective(g, "send/recv (ring)", 2 * out.size() * sizeof(float), t0);
}

}  // namespace

void attentionFwd(Ctx& c, const float* qkv, const int* pos, int b, int Tl, float* att, float* lse) {
  const int N = b * Tl, Cl = c.Cl, H = c.Hl, hs = c.hs, cpn = c.mesh->size[CP], r = c.mesh->coord[CP];
  // The travelling block: K and V of this rank's rows, (N, 2*Cl).
  Ops& o = *c.ops;
  Buf kv(size_t(N) * 2 * Cl), next;
  o.copyRows(kv.data(), 2 * Cl, qkv + Cl, 3 * Cl, N, 2 * Cl);
  Buf m, l(size_t(N) * H);
  m.assign(size_t(N) * H, -std::numeric_limits<float>::infinity());
  o.fill(att, 0.f, size_t(N) * Cl);
  IntBuf kpos;
  for (int s = 0; s < cpn; ++s) {
    kpos.upload(cpPositions(c.T, cpn, (r - s + cpn) % cpn));
    for (int i = 0; i < b; ++i) {
      const size_t q0 = size_t(i) * Tl;
      o.attnBlockFwd(qkv + q0 * 3 * Cl, 3 * Cl, pos, Tl, kv.data() + q0 * 2 * Cl, kv.data() + q0 * 2 * Cl + Cl, 2 * Cl,
                      kpos.data(), Tl, H, hs, att + q0 * Cl, m.data() + q0 * H, l.data() + q0 * H);
    }
    if (s + 1 < cpn) {
      ringShift(c, kv, next);
      kv.swap(next);
    }
  }
  o.attnFinalize(att, m.data(), l.data(), lse, N, H, hs);
}

void attentionBwd(Ctx& c, const float* qkv, const int* pos, int b, int Tl, const float* att, const float* lse,
                  const float* datt, float* dqkv) {
  const int N = b * Tl, Cl = c.Cl, H = c.Hl, hs = c.hs, cpn = c.mesh->size[CP], r = c.mesh->coord[CP];
  Ops& o = *c.ops;
  Buf Dd(size_t(N) * H);
  o.attnBwdPrep(Dd.data(), att, datt, N, H, hs);
  // The travelling block: [K V dK dV] per row, (N, 4*Cl).
  Buf blk(size_t(N) * 4 * Cl), next;
  o.copyRows(blk.data(), 4 * Cl, qkv + Cl, 3 * Cl, N, 2 * Cl);
  IntBuf kpos;
  for (int s = 0; s < cpn; ++s) {
    kpos.upload(cpPositions(c.T, cpn, (r - s + cpn) % cpn));
    for (int i = 0; i < b; ++i) {
      const size_t q0 = size_t(i) * Tl;
      float* kb = blk.data() + q0 * 4 * Cl;
      o.attnBlockBwd(qkv + q0 * 3 * Cl, 3 * Cl, pos, Tl, kb, kb + Cl, 4 * Cl, kpos.data(), Tl, H, hs, datt + q0 * Cl,
                      lse + q0 * H, Dd.data() + q0 * H, dqkv + q0 * 3 * Cl, kb + 2 * Cl, kb + 3 * Cl);
    }
    if (cpn > 1) {  // after cp hops every accumulator is home
      ringShift(c, blk, next);
      blk.swap(next);
    }
  }
  o.addRows(dqkv + Cl, 3 * Cl, blk.data() + 2 * Cl, 4 * Cl, N, 2 * Cl);
}

}  // namespace trainer::cp
