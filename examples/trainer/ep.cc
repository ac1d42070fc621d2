// ep.cc: router, capacity, all-to-all dispatch and combine, expert MLPs (forward and backward).
#include "ep.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels.h"

namespace trainer::ep {

namespace {

// All-to-all-v of rows of C floats over the ep group: send holds the rows for peer 0, 1, ...
// (sc[p] rows each); recv gets rc[q] rows from each q, in peer order. Self rows are copied.
void allToAllV(Ctx& c, const float* send, const std::vector<int>& sc, float* recv, const std::vector<int>& rc) {
  Group& g = c.mesh->ep;
  const int n = c.mesh->size[EP], me = c.mesh->coord[EP];
  const size_t C = size_t(c.C);
  std::vector<size_t> so(size_t(n) + 1, 0), ro(size_t(n) + 1, 0);
  for (int p = 0; p < n; ++p) so[size_t(p) + 1] = so[size_t(p)] + size_t(sc[size_t(p)]) * C;
  for (int p = 0; p < n; ++p) ro[size_t(p) + 1] = ro[size_t(p)] + size_t(rc[size_t(p)]) * C;
  std::copy(send + so[size_t(me)], send + so[size_t(me) + 1], recv + ro[size_t(me)]);
  if (n == 1) return;
  double t0 = now();
  {
    strata::Group grp;
    for (int p = 0; p < n; ++p)
      if (p != me && sc[size_t(p)]) g.comm.send(send + so[size_t(p)], so[size_t(p) + 1] - so[size_t(p)], p);
    for (int p = 0; p < n; ++p)
      if (p != me && rc[size_t(p)]) g.comm.recv(recv + ro[size_t(p)], ro[size_t(p) + 1] - ro[size_t(p)], p);
    grp.end();
  }
  const size_t moved = (so[size_t(n)] - (so[size_t(me) + 1] - so[size_t(me)])) +  // sent and received, not self
                       (ro[size_t(n)] - (ro[size_t(me) + 1] - ro[size_t(me)]));
  c.collective(g, "all_to_all_v (send/recv)", moved * sizeof(float), t0);
}

// Rows arrive grouped (peer, local expert); experts want (local expert, peer). cnt is (peer, El).
void peerToExpert(const float* src, float* dst, const std::vector<int>& cnt, int n, int El, size_t C, bool forward) {
  std::vector<size_t> pe(size_t(n * El) + 1, 0), ep(size_t(n * El) + 1, 0);  // offsets in both orders
  for (int p = 0; p < n; ++p)
    for (int e = 0; e < El; ++e) pe[size_t(p * El + e) + 1] = pe[size_t(p * El + e)] + size_t(cnt[size_t(p * El + e)]);
  for (int e = 0; e < El; ++e)
    for (int p = 0; p < n; ++p) ep[size_t(e * n + p) + 1] = ep[size_t(e * n + p)] + size_t(cnt[size_t(p * El + e)]);
  for (int p = 0; p < n; ++p)
    for (int e = 0; e < El; ++e) {
      size_t rows = size_t(cnt[size_t(p * El + e)]), a = pe[size_t(p * El + e)] * C, b = ep[size_t(e * n + p)] * C;
      if (forward) std::copy(src + a, src + a + rows * C, dst + b);
      else std::copy(src + b, src + b + rows * C, dst + a);
    }
}

std::vector<int> perPeer(const std::vector<int>& cnt, int n, int El) {
  std::vector<int> out(size_t(n), 0);
  for (int p = 0; p < n; ++p)
    for (int e = 0; e < El; ++e) out[size_t(p)] += cnt[size_t(p * El + e)];
  return out;
}

}  // namespace

void moeFwd(Ctx& c, int layer, const float* u, float* y, int Ns, const std::vector<int>& rowKeys, MoeCache& mc) {
  ParamStore& ps = *c.ps;
  const LayerIdx& li = ps.layers[size_t(layer)];
  const int E = c.E, K = c.cfg.topk, C = c.C, F = c.cfg.ffn(), El = c.El;
  const int epn = c.mesh->size[EP];
  mc = MoeCache{};
  mc.Ns = Ns;
  // 1. router
  std::vector<float> logits(size_t(Ns) * E);
  k::matmulFwd(logits.data(), u, ps.P(li.router), static_cast<const float*>(nullptr), Ns, C, E);
  mc.probs.resize(logits.size());
  k::softmaxFwd(mc.probs.data(), logits.data(), Ns, E);
  mc.idx.resize(size_t(Ns) * K);
  std::vector<int> ids(static_cast<size_t>(E));
  for (int n = 0; n < Ns; ++n) {
    std::iota(ids.begin(), ids.end(), 0);
    const float* p = mc.probs.data() + size_t(n) * E;
    std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return p[a] > p[b]; });
    for (int j = 0; j < K; ++j) mc.idx[size_t(n) * K + j] = ids[size_t(j)];
  }
  // 2. group statistics and the load-balancing loss
  std::vector<float> st(2 * size_t(E), 0.f);
  for (int n = 0; n < Ns; ++n) {
    for (int j = 0; j < K; ++j) st[size_t(mc.idx[size_t(n) * K + j])] += 1.f;
    for (int e = 0; e < E; ++e) st[size_t(E + e)] += mc.probs[size_t(n) * E + e];
  }
  c.allReduce(c.mesh->tpcp, st.data(), st.size());
  mc.groupTokens = float(Ns) * float(c.mesh->tpcp.size);
  mc.frac.resize(size_t(E));
  mc.aux = 0;
  for (int e = 0; e < E; ++e) {
    mc.frac[size_t(e)] = st[size_t(e)] / (mc.groupTokens * float(K));
    mc.aux += double(c.cfg.auxCoef) * E * mc.frac[size_t(e)] * (st[size_t(E + e)] / mc.groupTokens);
  }
  // 3. capacity: rank every assignment of the group by (slot, key), keep the first `cap` per expert
  mc.keep.assign(size_t(Ns) * K, 1);
  if (c.cfg.capacityFactor > 0) {
    const int cap = int(std::ceil(c.cfg.capacityFactor * mc.groupTokens * K / E));
    const int G = c.mesh->tpcp.size;
    std::vector<int> mine(size_t(Ns) * K * 3), all(mine.size() * size_t(G));
    for (int n = 0; n < Ns; ++n)
      for (int j = 0; j < K; ++j) {
        int* t = mine.data() + (size_t(n) * K + j) * 3;
        t[0] = j, t[1] = rowKeys[size_t(n)], t[2] = mc.idx[size_t(n) * K + j];
      }
    c.allGather(c.mesh->tpcp, mine.data(), all.data(), mine.size());
    std::vector<int> ord(all.size() / 3);
    std::iota(ord.begin(), ord.end(), 0);
    std::sort(ord.begin(), ord.end(), [&](int a, int b) {
      return std::pair(all[size_t(a) * 3], all[size_t(a) * 3 + 1]) < std::pair(all[size_t(b) * 3], all[size_t(b) * 3 + 1]);
    });
    std::vector<int> used(size_t(E), 0);
    const int lo = c.mesh->tpcp.rank * Ns * K;
    for (int o : ord) {
      bool ok = used[size_t(all[size_t(o) * 3 + 2])]++ < cap;
      if (o >= lo && o < lo + Ns * K) mc.keep[size_t(o - lo)] = ok;
    }
  }
  // 4. dispatch: assignments grouped by destination rank, then local expert
  mc.sendCount.assign(size_t(epn * El), 0);
  for (int d = 0; d < epn * El; ++d)
    for (int a = 0; a < Ns * K; ++a)
      if (mc.keep[size_t(a)] && mc.idx[size_t(a)] == d) mc.order.push_back(a), mc.sendCount[size_t(d)]++;
  mc.recvCount = mc.sendCount;
  if (epn > 1) {
    double t0 = now();
    c.mesh->ep.comm.allToAll(mc.sendCount.data(), mc.recvCount.data(), size_t(El));
    c.collective(c.mesh->ep, "all_to_all", mc.sendCount.size() * sizeof(int), t0);
  }
  std::vector<float> sendBuf(mc.order.size() * size_t(C));
  for (size_t i = 0; i < mc.order.size(); ++i)
    std::copy(u + size_t(mc.order[i] / K) * C, u + size_t(mc.order[i] / K + 1) * C, sendBuf.begin() + ptrdiff_t(i) * C);
  const int nRecv = std::accumulate(mc.recvCount.begin(), mc.recvCount.end(), 0);
  std::vector<float> recvBuf(size_t(nRecv) * C);
  allToAllV(c, sendBuf.data(), perPeer(mc.sendCount, epn, El), recvBuf.data(), perPeer(mc.recvCount, epn, El));
  mc.xe.resize(recvBuf.size());
  peerToExpert(recvBuf.data(), mc.xe.data(), mc.recvCount, epn, El, size_t(C), true);
  // 5. experts
  mc.expRows.assign(size_t(El), 0);
  for (int p = 0; p < epn; ++p)
    for (int e = 0; e < El; ++e) mc.expRows[size_t(e)] += mc.recvCount[size_t(p * El + e)];
  mc.he.resize(size_t(nRecv) * F);
  mc.oe.resize(size_t(nRecv) * C);
  std::vector<float> g;
  size_t r0 = 0;
  for (int e = 0; e < El; ++e) {
    const auto& w = li.experts[size_t(e)];
    const int ne = mc.expRows[size_t(e)];
    g.resize(size_t(ne) * F);
    k::matmulFwd(mc.he.data() + r0 * F, mc.xe.data() + r0 * C, ps.P(w.fcw), ps.P(w.fcb), ne, C, F);
    k::geluFwd(g.data(), mc.he.data() + r0 * F, size_t(ne) * F);
    k::matmulFwd(mc.oe.data() + r0 * C, g.data(), ps.P(w.fcpw), ps.P(w.fcpb), ne, F, C);
    r0 += size_t(ne);
  }
  // 6. combine: outputs travel back to the token owners, weighted by their gates
  peerToExpert(mc.oe.data(), recvBuf.data(), mc.recvCount, epn, El, size_t(C), false);
  mc.back.resize(sendBuf.size());
  allToAllV(c, recvBuf.data(), perPeer(mc.recvCount, epn, El), mc.back.data(), perPeer(mc.sendCount, epn, El));
  std::fill(y, y + size_t(Ns) * C, 0.f);
  for (size_t i = 0; i < mc.order.size(); ++i) {
    const int a = mc.order[i], n = a / K;
    const float gate = mc.probs[size_t(n) * E + size_t(mc.idx[size_t(a)])];
    for (int d = 0; d < C; ++d) y[size_t(n) * C + d] += gate * mc.back[i * size_t(C) + d];
  }
}

void moeBwd(Ctx& c, int layer, const float* u, const float* dy, float* du, MoeCache& mc, float auxScale) {
  ParamStore& ps = *c.ps;
  const LayerIdx& li = ps.layers[size_t(layer)];
  const int E = c.E, K = c.cfg.topk, C = c.C, F = c.cfg.ffn(), El = c.El, Ns = mc.Ns;
  const int epn = c.mesh->size[EP];
  // 1. combine backward: gradient of each expert output and of each gate
  std::vector<float> dprobs(size_t(Ns) * E, 0.f), dOut(mc.order.size() * size_t(C));
  for (size_t i = 0; i < mc.order.size(); ++i) {
    const int a = mc.order[i], n = a / K, e = mc.idx[size_t(a)];
    const float gate = mc.probs[size_t(n) * E + e];
    float dg = 0;
    for (int d = 0; d < C; ++d) {
      dOut[i * size_t(C) + d] = gate * dy[size_t(n) * C + d];
      dg += dy[size_t(n) * C + d] * mc.back[i * size_t(C) + d];
    }
    dprobs[size_t(n) * E + e] += dg;
  }
  // 2. to the experts (same route as the dispatch)
  const int nRecv = int(mc.xe.size() / size_t(C));
  std::vector<float> buf(size_t(nRecv) * C), dOe(buf.size());
  allToAllV(c, dOut.data(), perPeer(mc.sendCount, epn, El), buf.data(), perPeer(mc.recvCount, epn, El));
  peerToExpert(buf.data(), dOe.data(), mc.recvCount, epn, El, size_t(C), true);
  // 3. expert MLP backward
  std::vector<float> dxe(buf.size(), 0.f), g, dg, dh;
  size_t r0 = 0;
  for (int e = 0; e < El; ++e) {
    const auto& w = li.experts[size_t(e)];
    const int ne = mc.expRows[size_t(e)];
    const float* he = mc.he.data() + r0 * F;
    g.resize(size_t(ne) * F);
    k::geluFwd(g.data(), he, size_t(ne) * F);
    dg.assign(size_t(ne) * F, 0.f);
    dh.assign(size_t(ne) * F, 0.f);
    k::matmulBwd(dg.data(), ps.G(w.fcpw), ps.G(w.fcpb), dOe.data() + r0 * C, g.data(), ps.P(w.fcpw), ne, F, C);
    k::geluBwd(dh.data(), he, dg.data(), size_t(ne) * F);
    k::matmulBwd(dxe.data() + r0 * C, ps.G(w.fcw), ps.G(w.fcb), dh.data(), mc.xe.data() + r0 * C, ps.P(w.fcw), ne, C, F);
    r0 += size_t(ne);
  }
  // 4. input gradients back to the token owners
  peerToExpert(dxe.data(), buf.data(), mc.recvCount, epn, El, size_t(C), false);
  std::vector<float> dBack(dOut.size());
  allToAllV(c, buf.data(), perPeer(mc.recvCount, epn, El), dBack.data(), perPeer(mc.sendCount, epn, El));
  for (size_t i = 0; i < mc.order.size(); ++i) {
    const int n = mc.order[i] / K;
    for (int d = 0; d < C; ++d) du[size_t(n) * C + d] += dBack[i * size_t(C) + d];
  }
  // 5. router: gates, load-balancing loss, softmax, linear
  for (int n = 0; n < Ns; ++n)
    for (int e = 0; e < E; ++e)
      dprobs[size_t(n) * E + e] += auxScale * c.cfg.auxCoef * float(E) * mc.frac[size_t(e)] / mc.groupTokens;
  std::vector<float> dlogits(dprobs.size());
  k::softmaxBwd(dlogits.data(), mc.probs.data(), dprobs.data(), Ns, E);
  k::matmulBwd(du, ps.G(li.router), static_cast<float*>(nullptr), dlogits.data(), u, ps.P(li.router), Ns, C, E);
}

}  // namespace trainer::ep
