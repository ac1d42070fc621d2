// layer_math.h: the trainer's per-element, per-row and per-column layer arithmetic, written once
// for host and CUDA device (STRATA_HD). kernels.h's host loops call these functions, and the CUDA
// backend (backend_cuda.cu) runs the same functions with one thread per element, row or column,
// so the host tests exercise the exact arithmetic the device kernels run. Each function keeps the
// operation order of the host loop it came from: calling it from the host gives bitwise the same
// results as before, and a column function sums over rows in the host loop's order (n ascending).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/hd.h"

namespace trainer::math {

// Transcendentals: std:: on the host, CUDA's overloads on the device (ulp-level differences).
template <class F>
STRATA_HD F mexp(F x) {
#ifdef __CUDA_ARCH__
  return exp(x);
#else
  return std::exp(x);
#endif
}
template <class F>
STRATA_HD F mlog(F x) {
#ifdef __CUDA_ARCH__
  return log(x);
#else
  return std::log(x);
#endif
}
template <class F>
STRATA_HD F msqrt(F x) {
#ifdef __CUDA_ARCH__
  return sqrt(x);
#else
  return std::sqrt(x);
#endif
}
template <class F>
STRATA_HD F mtanh(F x) {
#ifdef __CUDA_ARCH__
  return tanh(x);
#else
  return std::tanh(x);
#endif
}
template <class F>
STRATA_HD F mmax(F a, F b) {
  return a < b ? b : a;  // std::max's choice for equal and ordered values
}
template <class F>
STRATA_HD F negInf() {
  return -F(INFINITY);
}

// ---- GELU (tanh approximation) ---------------------------------------------------------------
template <class F>
STRATA_HD F geluScale() {
  return msqrt(F(2) / F(3.14159265358979323846));
}
template <class F>
STRATA_HD F gelu(F v, F s) {
  return F(0.5) * v * (F(1) + mtanh(s * (v + F(0.044715) * v * v * v)));
}
/// d gelu / dv at v.
template <class F>
STRATA_HD F geluGrad(F v, F s) {
  F u = s * (v + F(0.044715) * v * v * v);
  F t = mtanh(u);
  F sech2 = F(1) - t * t;
  return F(0.5) * (F(1) + t) + F(0.5) * v * sech2 * s * (F(1) + F(3) * F(0.044715) * v * v);
}

// ---- LayerNorm -------------------------------------------------------------------------------
/// One row: out (C) = (x - mean) * rstd * w + b; writes mean and rstd.
template <class F>
STRATA_HD void layernormRow(F* out, F* mean, F* rstd, const F* xr, const F* w, const F* b, int C) {
  const F eps = F(1e-5);
  F m = 0;
  for (int c = 0; c < C; ++c) m += xr[c];
  m /= C;
  F v = 0;
  for (int c = 0; c < C; ++c) v += (xr[c] - m) * (xr[c] - m);
  v /= C;
  F s = F(1) / msqrt(v + eps);
  for (int c = 0; c < C; ++c) out[c] = (xr[c] - m) * s * w[c] + b[c];
  *mean = m;
  *rstd = s;
}
/// One row of the input gradient: dx (C) += ...
template <class F>
STRATA_HD void layernormBwdInputRow(F* dx, const F* g, const F* xr, const F* w, F mean, F rstd, int C) {
  F dnMean = 0, dnNorm = 0;
  for (int c = 0; c < C; ++c) {
    F norm = (xr[c] - mean) * rstd;
    F dn = g[c] * w[c];
    dnMean += dn;
    dnNorm += dn * norm;
  }
  dnMean /= C;
  dnNorm /= C;
  for (int c = 0; c < C; ++c) {
    F norm = (xr[c] - mean) * rstd;
    dx[c] += (g[c] * w[c] - dnMean - norm * dnNorm) * rstd;
  }
}
/// Column c of the weight gradient: dw[c], db[c] += over rows n ascending.
template <class F>
STRATA_HD void layernormBwdWeightCol(F* dw, F* db, const F* dout, const F* x, const F* mean, const F* rstd, int N,
                                     int C, int c) {
  for (int n = 0; n < N; ++n) {
    const size_t i = size_t(n) * C + c;
    F norm = (x[i] - mean[n]) * rstd[n];
    dw[c] += dout[i] * norm;
    db[c] += dout[i];
  }
}

// ---- column sums (bias, embedding and position gradients) -----------------------------------
/// db[c] += sum over rows n (ascending) of dx (N,C).
template <class F>
STRATA_HD void biasBwdCol(F* db, const F* dx, int N, int C, int c) {
  for (int n = 0; n < N; ++n) db[c] += dx[size_t(n) * C + c];
}
/// Column c of dwte (vLocal,C) += dout rows of the tokens this rank owns, rows n ascending.
template <class F>
STRATA_HD void embedBwdCol(F* dwte, const F* dout, const int* tok, int N, int C, int vStart, int vLocal, int c) {
  for (int n = 0; n < N; ++n) {
    int t = tok[n] - vStart;
    if (t >= 0 && t < vLocal) dwte[size_t(t) * C + c] += dout[size_t(n) * C + c];
  }
}
/// Column c of dwpe += dx rows at their positions, rows n ascending.
template <class F>
STRATA_HD void posBwdCol(F* dwpe, const F* dx, const int* pos, int N, int C, int c) {
  for (int n = 0; n < N; ++n) dwpe[size_t(pos[n]) * C + c] += dx[size_t(n) * C + c];
}

// ---- attention (one query and head against a key block; see kernels.h attnBlockFwd) --------
template <class F>
STRATA_HD void attnQueryFwd(const F* qi, int qpos, const F* k, const F* v, int kvStride, const int* kpos, int Nk,
                            int hOff, int hs, F scale, F* oi, F* mi, F* li) {
  for (int j = 0; j < Nk; ++j) {
    if (kpos[j] > qpos) continue;
    const F* kj = k + size_t(j) * kvStride + hOff;
    F s = 0;
    for (int d = 0; d < hs; ++d) s += qi[d] * kj[d];
    s *= scale;
    if (s > *mi) {  // rescale what we have to the new maximum
      F corr = mexp(*mi - s);
      *li *= corr;
      for (int d = 0; d < hs; ++d) oi[d] *= corr;
      *mi = s;
    }
    F p = mexp(s - *mi);
    *li += p;
    const F* vj = v + size_t(j) * kvStride + hOff;
    for (int d = 0; d < hs; ++d) oi[d] += p * vj[d];
  }
}
/// o /= l, lse = m + log l for one (query, head).
template <class F>
STRATA_HD void attnFinalizeOne(F* o, F m, F l, F* lse, int hs) {
  F inv = l > 0 ? F(1) / l : F(0);
  for (int d = 0; d < hs; ++d) o[d] *= inv;
  *lse = l > 0 ? m + mlog(l) : F(0);
}
template <class F>
STRATA_HD F attnDot(const F* o, const F* dO, int hs) {
  F s = 0;
  for (int d = 0; d < hs; ++d) s += o[d] * dO[d];
  return s;
}
/// The softmax-backward quantities of one visible (query, key) pair: probability p and dscore.
template <class F>
STRATA_HD void attnPair(const F* qi, const F* kj, const F* vj, const F* gi, int hs, F scale, F L, F D, F* p, F* ds) {
  F s = 0, dp = 0;
  for (int d = 0; d < hs; ++d) {
    s += qi[d] * kj[d];
    dp += gi[d] * vj[d];
  }
  *p = mexp(s * scale - L);
  *ds = *p * (dp - D) * scale;
}

// ---- cross-entropy over a vocab shard (rows of kernels.h ceLocalMax / ceLocalStats / ceBwd) ---
template <class F>
STRATA_HD F ceRowMax(const F* lr, int Vl) {
  F mx = negInf<F>();
  for (int v = 0; v < Vl; ++v) mx = mmax(mx, lr[v]);
  return mx;
}
template <class F>
STRATA_HD void ceRowStats(F* st, const F* lr, F rowMax, int tgt, int Vl, int vStart) {
  F s = 0;
  for (int v = 0; v < Vl; ++v) s += mexp(lr[v] - rowMax);
  int t = tgt - vStart;
  st[0] = s;
  st[1] = (tgt >= 0 && t >= 0 && t < Vl) ? lr[t] - rowMax : F(0);
}
template <class F>
STRATA_HD void ceRowBwd(F* d, const F* lr, F rowMax, F sumExp, int tgt, int Vl, int vStart, F scale) {
  if (tgt < 0) {
    for (int v = 0; v < Vl; ++v) d[v] = F(0);
    return;
  }
  for (int v = 0; v < Vl; ++v) d[v] = mexp(lr[v] - rowMax) / sumExp * scale;
  int t = tgt - vStart;
  if (t >= 0 && t < Vl) d[t] -= scale;
}

// ---- optimizer --------------------------------------------------------------------------------
struct AdamArgs {
  float scale, b1, b2, c1, c2, lr, wd, eps;  // scale: the clipping factor on the gradient
};
/// One AdamW update of parameter p with gradient g and moments m, v.
STRATA_HD inline void adamw(float* p, float g0, float* m, float* v, bool decay, const AdamArgs& a) {
  const float g = g0 * a.scale;
  *m = a.b1 * *m + (1.f - a.b1) * g;
  *v = a.b2 * *v + (1.f - a.b2) * g * g;
  const float mh = *m / a.c1, vh = *v / a.c2;
  *p -= a.lr * (mh / (msqrt(vh) + a.eps) + (decay ? a.wd * *p : 0.f));
}
/// Sum of squares (in double, in order) of the counted elements of one gradient-norm block.
STRATA_HD inline double normBlock(const float* g, const uint8_t* count, size_t len) {
  double s = 0;
  for (size_t i = 0; i < len; ++i)
    if (count[i]) s += double(g[i]) * double(g[i]);
  return s;
}

}  // namespace trainer::math
