// cp.cc: ring attention forward and backward over the cp group.
#include "cp.h"

#include <limits>

#include "kernels.h"

namespace trainer::cp {

namespace {

// Sends `out` to the next rank of the ring and receives the previous rank's block into `in`.
void ringShift(Ctx& c, const std::vector<float>& out, std::vector<float>& in) {
  Group& g = c.mesh->cp;
  in.resize(out.size());
  double t0 = now();
  {
    strata::Group grp;
    g.comm.send(out.data(), out.size(), (g.rank + 1) % g.size);
    g.comm.recv(in.data(), in.size(), (g.rank - 1 + g.size) % g.size);
    grp.end();
  }
  c.collective(g, "send/recv (ring)", 2 * out.size() * sizeof(float), t0);
}

}  // namespace

void attentionFwd(Ctx& c, const float* qkv, const int* pos, int b, int Tl, float* att, float* lse) {
  const int N = b * Tl, Cl = c.Cl, H = c.Hl, hs = c.hs, cpn = c.mesh->size[CP], r = c.mesh->coord[CP];
  // The travelling block: K and V of this rank's rows, (N, 2*Cl).
  std::vector<float> kv(size_t(N) * 2 * Cl), next;
  for (int n = 0; n < N; ++n)
    std::copy(qkv + size_t(n) * 3 * Cl + Cl, qkv + size_t(n + 1) * 3 * Cl, kv.begin() + ptrdiff_t(n) * 2 * Cl);
  std::vector<float> m(size_t(N) * H, -std::numeric_limits<float>::infinity()), l(size_t(N) * H, 0.f);
  std::fill(att, att + size_t(N) * Cl, 0.f);
  for (int s = 0; s < cpn; ++s) {
    std::vector<int> kpos = cpPositions(c.T, cpn, (r - s + cpn) % cpn);
    for (int i = 0; i < b; ++i) {
      const size_t q0 = size_t(i) * Tl;
      k::attnBlockFwd(qkv + q0 * 3 * Cl, 3 * Cl, pos, Tl, kv.data() + q0 * 2 * Cl, kv.data() + q0 * 2 * Cl + Cl, 2 * Cl,
                      kpos.data(), Tl, H, hs, att + q0 * Cl, m.data() + q0 * H, l.data() + q0 * H);
    }
    if (s + 1 < cpn) {
      ringShift(c, kv, next);
      kv.swap(next);
    }
  }
  k::attnFinalize(att, m.data(), l.data(), lse, N, H, hs);
}

void attentionBwd(Ctx& c, const float* qkv, const int* pos, int b, int Tl, const float* att, const float* lse,
                  const float* datt, float* dqkv) {
  const int N = b * Tl, Cl = c.Cl, H = c.Hl, hs = c.hs, cpn = c.mesh->size[CP], r = c.mesh->coord[CP];
  std::vector<float> Dd(size_t(N) * H);
  k::attnBwdPrep(Dd.data(), att, datt, N, H, hs);
  // The travelling block: [K V dK dV] per row, (N, 4*Cl).
  std::vector<float> blk(size_t(N) * 4 * Cl, 0.f), next;
  for (int n = 0; n < N; ++n)
    std::copy(qkv + size_t(n) * 3 * Cl + Cl, qkv + size_t(n + 1) * 3 * Cl, blk.begin() + ptrdiff_t(n) * 4 * Cl);
  for (int s = 0; s < cpn; ++s) {
    std::vector<int> kpos = cpPositions(c.T, cpn, (r - s + cpn) % cpn);
    for (int i = 0; i < b; ++i) {
      const size_t q0 = size_t(i) * Tl;
      float* kb = blk.data() + q0 * 4 * Cl;
      k::attnBlockBwd(qkv + q0 * 3 * Cl, 3 * Cl, pos, Tl, kb, kb + Cl, 4 * Cl, kpos.data(), Tl, H, hs, datt + q0 * Cl,
                      lse + q0 * H, Dd.data() + q0 * H, dqkv + q0 * 3 * Cl, kb + 2 * Cl, kb + 3 * Cl);
    }
    if (cpn > 1) {  // after cp hops every accumulator is home
      ringShift(c, blk, next);
      blk.swap(next);
    }
  }
  for (int n = 0; n < N; ++n)
    for (int j = 0; j < 2 * Cl; ++j) dqkv[size_t(n) * 3 * Cl + Cl + j] += blk[size_t(n) * 4 * Cl + 2 * Cl + j];
}

}  // namespace trainer::cp
