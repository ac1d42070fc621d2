// kernels.h: the trainer's layers as plain forward/backward function pairs (llm.c style).
//
// Every function is a loop nest that reads like the math (the per-element, per-row and per-(query,
// head) bodies live in layer_math.h, shared with the CUDA backend), templated on the float type so the
// gradient-check test (tests/trainer/grad_check_test.cc) runs them in double against finite
// differences and the trainer runs them in float. Shapes are in the comments; all tensors are
// row-major. Backward functions ACCUMULATE (+=) into parameter gradients and, unless said
// otherwise, into input gradients, so callers zero what they need first.
//
// Sums run in a fixed order (row by row, k ascending), so a row's forward result never depends on
// which other rows share its call: that is what lets a token computed on another rank (expert
// parallelism, sequence chunks) come out bitwise equal to the single-rank run.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "layer_math.h"

namespace trainer::k {

// ---- embedding (vocab-parallel) ------------------------------------------------------------
// out (N,C) = wte[tok[n] - vStart] when the token is in [vStart, vStart+vLocal), else 0.
template <class F>
void embedFwd(F* out, const int* tok, const F* wte, int N, int C, int vStart, int vLocal) {
  for (int n = 0; n < N; ++n) {
    F* o = out + size_t(n) * C;
    int t = tok[n] - vStart;
    if (t >= 0 && t < vLocal) std::copy(wte + size_t(t) * C, wte + size_t(t + 1) * C, o);
    else std::fill(o, o + C, F(0));
  }
}
// dwte (vLocal,C) += dout rows of the tokens this rank owns.
template <class F>
void embedBwd(F* dwte, const F* dout, const int* tok, int N, int C, int vStart, int vLocal) {
  for (int n = 0; n < N; ++n) {
    int t = tok[n] - vStart;
    if (t < 0 || t >= vLocal) continue;
    for (int c = 0; c < C; ++c) dwte[size_t(t) * C + c] += dout[size_t(n) * C + c];
  }
}
// x (N,C) += wpe[pos[n]];  backward: dwpe[pos[n]] += dx[n].
template <class F>
void posFwd(F* x, const F* wpe, const int* pos, int N, int C) {
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) x[size_t(n) * C + c] += wpe[size_t(pos[n]) * C + c];
}
template <class F>
void posBwd(F* dwpe, const F* dx, const int* pos, int N, int C) {
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) dwpe[size_t(pos[n]) * C + c] += dx[size_t(n) * C + c];
}

// ---- layernorm -----------------------------------------------------------------------------
// out (N,C) = (x - mean) * rstd * w + b; mean, rstd (N) are kept for backward.
template <class F>
void layernormFwd(F* out, F* mean, F* rstd, const F* x, const F* w, const F* b, int N, int C) {
  for (int n = 0; n < N; ++n) math::layernormRow(out + size_t(n) * C, mean + n, rstd + n, x + size_t(n) * C, w, b, C);
}
// The two halves of layernorm's backward, with the same per-element arithmetic: dx (N,C) += (B) ...
template <class F>
void layernormBwdInput(F* dx, const F* dout, const F* x, const F* w, const F* mean, const F* rstd, int N, int C) {
  for (int n = 0; n < N; ++n)
    math::layernormBwdInputRow(dx + size_t(n) * C, dout + size_t(n) * C, x + size_t(n) * C, w, mean[n], rstd[n], C);
}
// ... and dw, db (C) += (W).
template <class F>
void layernormBwdWeight(F* dw, F* db, const F* dout, const F* x, const F* mean, const F* rstd, int N, int C) {
  for (int n = 0; n < N; ++n) {
    const F* xr = x + size_t(n) * C;
    const F* g = dout + size_t(n) * C;
    for (int c = 0; c < C; ++c) {
      F norm = (xr[c] - mean[n]) * rstd[n];
      dw[c] += g[c] * norm;
      db[c] += g[c];
    }
  }
}
// The whole backward: dx (N,C) +=, dw, db (C) += (the two halves; each accumulates on its own, so
// the result is the same as one fused loop's).
template <class F>
void layernormBwd(F* dx, F* dw, F* db, const F* dout, const F* x, const F* w, const F* mean, const F* rstd, int N,
                  int C) {
  layernormBwdInput(dx, dout, x, w, mean, rstd, N, C);
  layernormBwdWeight(dw, db, dout, x, mean, rstd, N, C);
}

// ---- linear ----------------------------------------------------------------------------------
// Dot product in a fixed order: eight interleaved partial sums (so the compiler can use vector
// registers), combined pairwise, then the tail. Deterministic and independent of anything but a, b.
template <class F>
inline F dotFixed(const F* __restrict a, const F* __restrict b, int K) {
  F acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int kk = 0;
  for (; kk + 8 <= K; kk += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[kk + j] * b[kk + j];
  F s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; kk < K; ++kk) s += a[kk] * b[kk];
  return s;
}

// out (N,O) = in (N,K) @ w (O,K)^T + bias (O, may be null).
template <class F>
void matmulFwd(F* out, const F* in, const F* w, const F* bias, int N, int K, int O) {
  for (int n = 0; n < N; ++n) {
    const F* x = in + size_t(n) * K;
    for (int o = 0; o < O; ++o)
      out[size_t(n) * O + o] = (bias ? bias[o] : F(0)) + dotFixed(x, w + size_t(o) * K, K);
  }
}
// din (N,K) += dout @ w (din may be null); dw (O,K) += dout^T @ in; dbias (O) += sum_n dout.
template <class F>
void matmulBwd(F* din, F* dw, F* dbias, const F* dout, const F* in, const F* w, int N, int K, int O) {
  for (int n = 0; n < N; ++n) {
    const F* d = dout + size_t(n) * O;
    const F* __restrict x = in + size_t(n) * K;
    F* __restrict dx = din ? din + size_t(n) * K : nullptr;
    for (int o = 0; o < O; ++o) {
      const F g = d[o];
      const F* __restrict wr = w + size_t(o) * K;
      F* __restrict dwr = dw + size_t(o) * K;
      if (dx)
        for (int kk = 0; kk < K; ++kk) dx[kk] += g * wr[kk];
      for (int kk = 0; kk < K; ++kk) dwr[kk] += g * x[kk];
      if (dbias) dbias[o] += g;
    }
  }
}
// The same backward in two halves (zero-bubble pipelines run them at different times). Every
// element sees the same operations in the same order as in matmulBwd, so the results are equal.
// din (N,K) += dout @ w: the input gradient (B).
template <class F>
void matmulBwdInput(F* din, const F* dout, const F* w, int N, int K, int O) {
  for (int n = 0; n < N; ++n) {
    const F* d = dout + size_t(n) * O;
    F* __restrict dx = din + size_t(n) * K;
    for (int o = 0; o < O; ++o) {
      const F g = d[o];
      const F* __restrict wr = w + size_t(o) * K;
      for (int kk = 0; kk < K; ++kk) dx[kk] += g * wr[kk];
    }
  }
}
// dw (O,K) += dout^T @ in; dbias (O) += sum_n dout (may be null): the weight gradient (W).
template <class F>
void matmulBwdWeight(F* dw, F* dbias, const F* dout, const F* in, int N, int K, int O) {
  for (int n = 0; n < N; ++n) {
    const F* d = dout + size_t(n) * O;
    const F* __restrict x = in + size_t(n) * K;
    for (int o = 0; o < O; ++o) {
      const F g = d[o];
      F* __restrict dwr = dw + size_t(o) * K;
      for (int kk = 0; kk < K; ++kk) dwr[kk] += g * x[kk];
      if (dbias) dbias[o] += g;
    }
  }
}
// x (N,C) += b (C);  backward: db += column sums of dx.
template <class F>
void biasFwd(F* x, const F* b, int N, int C) {
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) x[size_t(n) * C + c] += b[c];
}
template <class F>
void biasBwd(F* db, const F* dx, int N, int C) {
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) db[c] += dx[size_t(n) * C + c];
}

// ---- GELU (tanh approximation) ---------------------------------------------------------------
template <class F>
void geluFwd(F* out, const F* x, size_t n) {
  const F s = math::geluScale<F>();
  for (size_t i = 0; i < n; ++i) out[i] = math::gelu(x[i], s);
}
// dx (n) += gelu'(x) * dout.
template <class F>
void geluBwd(F* dx, const F* x, const F* dout, size_t n) {
  const F s = math::geluScale<F>();
  for (size_t i = 0; i < n; ++i) dx[i] += math::geluGrad(x[i], s) * dout[i];
}

// ---- causal attention over one block of keys (flash / ring style) ---------------------------
// Queries: Nq rows of q (head h at h*hs, row stride qStride) with global positions qpos.
// Keys/values: Nk rows of k, v (row stride kvStride) with positions kpos; key j is visible to
// query i when kpos[j] <= qpos[i]. Running state per (query, head): o (Nq, H*hs) unnormalised,
// m (max score), l (sum of exp). Start with o = 0, m = -inf, l = 0; call once per key block in any
// order; then attnFinalize. A single block holding every key is plain causal attention.
template <class F>
void attnBlockFwd(const F* q, int qStride, const int* qpos, int Nq, const F* k, const F* v, int kvStride,
                  const int* kpos, int Nk, int H, int hs, F* o, F* m, F* l) {
  const F scale = F(1) / std::sqrt(F(hs));
  for (int i = 0; i < Nq; ++i)
    for (int h = 0; h < H; ++h) {
      const size_t ih = size_t(i) * H + h;
      math::attnQueryFwd(q + size_t(i) * qStride + size_t(h) * hs, qpos[i], k, v, kvStride, kpos, Nk, h * hs, hs,
                         scale, o + ih * hs, m + ih, l + ih);
    }
}
// o /= l; lse (Nq,H) = m + log l.
template <class F>
void attnFinalize(F* o, const F* m, const F* l, F* lse, int Nq, int H, int hs) {
  for (int i = 0; i < Nq * H; ++i) math::attnFinalizeOne(o + size_t(i) * hs, m[i], l[i], lse + i, hs);
}
// Dd (Nq,H) = rowsum(dO * O) per head: the softmax-backward term shared by every key block.
template <class F>
void attnBwdPrep(F* Dd, const F* o, const F* dO, int Nq, int H, int hs) {
  for (int i = 0; i < Nq * H; ++i) Dd[i] = math::attnDot(o + size_t(i) * hs, dO + size_t(i) * hs, hs);
}
// One key block's backward: dq (row stride qStride) +=, dk, dv (row stride kvStride) +=.
// dO is (Nq, H*hs); lse and Dd are (Nq, H).
template <class F>
void attnBlockBwd(const F* q, int qStride, const int* qpos, int Nq, const F* k, const F* v, int kvStride,
                  const int* kpos, int Nk, int H, int hs, const F* dO, const F* lse, const F* Dd, F* dq, F* dk,
                  F* dv) {
  const F scale = F(1) / std::sqrt(F(hs));
  for (int i = 0; i < Nq; ++i) {
    for (int h = 0; h < H; ++h) {
      const F* qi = q + size_t(i) * qStride + size_t(h) * hs;
      const F* gi = dO + (size_t(i) * H + h) * hs;
      F* dqi = dq + size_t(i) * qStride + size_t(h) * hs;
      const F L = lse[size_t(i) * H + h], D = Dd[size_t(i) * H + h];
      for (int j = 0; j < Nk; ++j) {
        if (kpos[j] > qpos[i]) continue;
        const F* kj = k + size_t(j) * kvStride + size_t(h) * hs;
        const F* vj = v + size_t(j) * kvStride + size_t(h) * hs;
        F p, ds;
        math::attnPair(qi, kj, vj, gi, hs, scale, L, D, &p, &ds);
        F* dkj = dk + size_t(j) * kvStride + size_t(h) * hs;
        F* dvj = dv + size_t(j) * kvStride + size_t(h) * hs;
        for (int d = 0; d < hs; ++d) {
          dvj[d] += p * gi[d];
          dqi[d] += ds * kj[d];
          dkj[d] += ds * qi[d];
        }
      }
    }
  }
}
// Plain reference: full softmax per query, no blocks (tests compare the block kernels to it).
template <class F>
void attnReference(F* out, const F* q, int qStride, const int* qpos, int Nq, const F* k, const F* v, int kvStride,
                   const int* kpos, int Nk, int H, int hs) {
  const F scale = F(1) / std::sqrt(F(hs));
  for (int i = 0; i < Nq; ++i)
    for (int h = 0; h < H; ++h) {
      F mx = -std::numeric_limits<F>::infinity();
      for (int j = 0; j < Nk; ++j) {
        if (kpos[j] > qpos[i]) continue;
        F s = 0;
        for (int d = 0; d < hs; ++d) s += q[size_t(i) * qStride + h * hs + d] * k[size_t(j) * kvStride + h * hs + d];
        mx = std::max(mx, s * scale);
      }
      F sum = 0;
      F* oi = out + (size_t(i) * H + h) * hs;
      std::fill(oi, oi + hs, F(0));
      for (int j = 0; j < Nk; ++j) {
        if (kpos[j] > qpos[i]) continue;
        F s = 0;
        for (int d = 0; d < hs; ++d) s += q[size_t(i) * qStride + h * hs + d] * k[size_t(j) * kvStride + h * hs + d];
        F p = std::exp(s * scale - mx);
        sum += p;
        for (int d = 0; d < hs; ++d) oi[d] += p * v[size_t(j) * kvStride + h * hs + d];
      }
      for (int d = 0; d < hs; ++d) oi[d] /= sum;
    }
}

// ---- softmax cross-entropy over a vocab shard --------------------------------------------------
// logits (N,Vl) hold vocab entries [vStart, vStart+Vl). A target < 0 is ignored.
// Step 1: rowMax (N) = local max.  (The caller max-reduces across the vocab shards.)
template <class F>
void ceLocalMax(F* rowMax, const F* logits, int N, int Vl) {
  for (int n = 0; n < N; ++n) rowMax[n] = math::ceRowMax(logits + size_t(n) * Vl, Vl);
}
// Step 2: stats (N,2) = {sum exp(logit - max), target logit - max (0 if not in this shard)}.
// (The caller sum-reduces across shards.)  Loss of row n = log(stats[n][0]) - stats[n][1].
template <class F>
void ceLocalStats(F* stats, const F* logits, const F* rowMax, const int* tgt, int N, int Vl, int vStart) {
  for (int n = 0; n < N; ++n) math::ceRowStats(stats + 2 * size_t(n), logits + size_t(n) * Vl, rowMax[n], tgt[n], Vl, vStart);
}
// dlogits (N,Vl) = (softmax - onehot) * scale  (written, not accumulated); ignored rows get 0.
template <class F>
void ceBwd(F* dlogits, const F* logits, const F* rowMax, const F* stats, const int* tgt, int N, int Vl, int vStart,
           F scale) {
  for (int n = 0; n < N; ++n)
    math::ceRowBwd(dlogits + size_t(n) * Vl, logits + size_t(n) * Vl, rowMax[n], stats[2 * n], tgt[n], Vl, vStart,
                   scale);
}

// ---- row softmax (router) ---------------------------------------------------------------------
template <class F>
void softmaxFwd(F* p, const F* x, int N, int E) {
  for (int n = 0; n < N; ++n) {
    F mx = x[size_t(n) * E];
    for (int e = 1; e < E; ++e) mx = std::max(mx, x[size_t(n) * E + e]);
    F s = 0;
    for (int e = 0; e < E; ++e) s += (p[size_t(n) * E + e] = std::exp(x[size_t(n) * E + e] - mx));
    for (int e = 0; e < E; ++e) p[size_t(n) * E + e] /= s;
  }
}
// dx (N,E) = p * (dp - sum(p*dp))  (written).
template <class F>
void softmaxBwd(F* dx, const F* p, const F* dp, int N, int E) {
  for (int n = 0; n < N; ++n) {
    F s = 0;
    for (int e = 0; e < E; ++e) s += p[size_t(n) * E + e] * dp[size_t(n) * E + e];
    for (int e = 0; e < E; ++e) dx[size_t(n) * E + e] = p[size_t(n) * E + e] * (dp[size_t(n) * E + e] - s);
  }
}

}  // namespace trainer::k
