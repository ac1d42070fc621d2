// backend_cuda.cu: the CUDA lane of the compute seam (built with STRATA_ENABLE_CUDA).
//
// Every tensor is device memory from the stream-ordered allocator; all work runs in order on the
// lane's stream. Matrix products go through cuBLAS (FP32, default math mode: no TF32); everything
// else is one small kernel per layer function, running layer_math.h's host/device functions with
// one thread per element, row, (query, head) or column. Column sums (bias, LayerNorm weights,
// embedding) run one thread per column over the rows in ascending order, as the host loop sums
// them, so no atomics and every result is deterministic. Compiled with --fmad=false
// (CMakeLists.txt): the element-wise arithmetic then rounds as the host's does, and only the
// transcendentals (exp, log, tanh, sqrt are exact) and cuBLAS' summation order differ from the CPU.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "backend_cuda.h"

namespace trainer {

namespace {

void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA ") + what + ": " + cudaGetErrorString(e));
}
void ckb(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS ") + what + ": status " + std::to_string(int(s)));
}

constexpr int kThreads = 128;
unsigned blocks(size_t n) { return unsigned((n + kThreads - 1) / kThreads); }
unsigned strideBlocks(size_t n) { return blocks(n) < 4096u ? blocks(n) : 4096u; }  // grid-stride kernels

// ---- kernels: one per layer function, float only --------------------------------------------
__global__ void kFill(float* y, float v, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) y[i] = v;
}
// op 0: y += x; 1: y *= x; 2: y = y * x + z
__global__ void kElem(float* y, const float* x, const float* z, size_t n, int op) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    if (op == 0) y[i] += x[i];
    else if (op == 1) y[i] *= x[i];
    else y[i] = y[i] * x[i] + z[i];
  }
}
__global__ void kRows(float* dst, int ds, const float* src, int ss, int rows, int width, bool add) {
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= size_t(rows) * width) return;
  size_t r = i / width, j = i % width;
  if (add) dst[r * ds + j] += src[r * ss + j];
  else dst[r * ds + j] = src[r * ss + j];
}
__global__ void kEmbedFwd(float* out, const int* tok, const float* wte, int N, int C, int vStart, int vLocal) {
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= size_t(N) * C) return;
  int n = int(i / C), c = int(i % C), t = tok[n] - vStart;
  out[i] = (t >= 0 && t < vLocal) ? wte[size_t(t) * C + c] : 0.f;
}
__global__ void kEmbedBwd(float* dwte, const float* dout, const int* tok, int N, int C, int vStart, int vLocal) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c < C) math::embedBwdCol(dwte, dout, tok, N, C, vStart, vLocal, c);
}
__global__ void kPosFwd(float* x, const float* wpe, const int* pos, int N, int C) {
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < size_t(N) * C) x[i] += wpe[size_t(pos[i / C]) * C + i % C];
}
__global__ void kPosBwd(float* dwpe, const float* dx, const int* pos, int N, int C) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c < C) math::posBwdCol(dwpe, dx, pos, N, C, c);
}
__global__ void kLnFwd(float* out, float* mean, float* rstd, const float* x, const float* w, const float* b, int N,
                       int C) {
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n < N) math::layernormRow(out + size_t(n) * C, mean + n, rstd + n, x + size_t(n) * C, w, b, C);
}
__global__ void kLnBwdInput(float* dx, const float* dout, const float* x, const float* w, const float* mean,
                            const float* rstd, int N, int C) {
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n < N)
    math::layernormBwdInputRow(dx + size_t(n) * C, dout + size_t(n) * C, x + size_t(n) * C, w, mean[n], rstd[n], C);
}
__global__ void kLnBwdWeight(float* dw, float* db, const float* dout, const float* x, const float* mean,
                             const float* rstd, int N, int C) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c < C) math::layernormBwdWeightCol(dw, db, dout, x, mean, rstd, N, C, c);
}
__global__ void kBiasFwd(float* x, const float* b, int N, int C) {
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < size_t(N) * C) x[i] += b[i % C];
}
__global__ void kBiasBwd(float* db, const float* dx, int N, int C) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c < C) math::biasBwdCol(db, dx, N, C, c);
}
__global__ void kGelu(float* out, const float* x, const float* dout, size_t n, bool backward) {
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float s = math::geluScale<float>();
  if (backward) out[i] += math::geluGrad(x[i], s) * dout[i];
  else out[i] = math::gelu(x[i], s);
}
__global__ void kAttnFwd(const float* q, int qStride, const int* qpos, int Nq, const float* k, const float* v,
                         int kvStride, const int* kpos, int Nk, int H, int hs, float scale, float* o, float* m, float* l) {
  int ih = blockIdx.x * blockDim.x + threadIdx.x;
  if (ih >= Nq * H) return;
  int i = ih / H, h = ih % H;
  math::attnQueryFwd(q + size_t(i) * qStride + size_t(h) * hs, qpos[i], k, v, kvStride, kpos, Nk, h * hs, hs, scale,
                     o + size_t(ih) * hs, m + ih, l + ih);
}
__global__ void kAttnFinalize(float* o, const float* m, const float* l, float* lse, int NH, int hs) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < NH) math::attnFinalizeOne(o + size_t(i) * hs, m[i], l[i], lse + i, hs);
}
__global__ void kAttnPrep(float* Dd, const float* o, const float* dO, int NH, int hs) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < NH) Dd[i] = math::attnDot(o + size_t(i) * hs, dO + size_t(i) * hs, hs);
}
// dq of one (query, head): keys j ascending, as the host loop.
__global__ void kAttnBwdQ(const float* q, int qStride, const int* qpos, int Nq, const float* k, const float* v,
                          int kvStride, const int* kpos, int Nk, int H, int hs, float scale, const float* dO,
                          const float* lse, const float* Dd, float* dq) {
  int ih = blockIdx.x * blockDim.x + threadIdx.x;
  if (ih >= Nq * H) return;
  int i = ih / H, h = ih % H;
  const float* qi = q + size_t(i) * qStride + size_t(h) * hs;
  const float* gi = dO + size_t(ih) * hs;
  float* dqi = dq + size_t(i) * qStride + size_t(h) * hs;
  for (int j = 0; j < Nk; ++j) {
    if (kpos[j] > qpos[i]) continue;
    const float* kj = k + size_t(j) * kvStride + size_t(h) * hs;
    float p, ds;
    math::attnPair(qi, kj, v + size_t(j) * kvStride + size_t(h) * hs, gi, hs, scale, lse[ih], Dd[ih], &p, &ds);
    for (int d = 0; d < hs; ++d) dqi[d] += ds * kj[d];
  }
}
// dk, dv of one (key, head): queries i ascending, as the host loop.
__global__ void kAttnBwdKV(const float* q, int qStride, const int* qpos, int Nq, const float* k, const float* v,
                           int kvStride, const int* kpos, int Nk, int H, int hs, float scale, const float* dO,
                           const float* lse, const float* Dd, float* dk, float* dv) {
  int jh = blockIdx.x * blockDim.x + threadIdx.x;
  if (jh >= Nk * H) return;
  int j = jh / H, h = jh % H;
  const float* kj = k + size_t(j) * kvStride + size_t(h) * hs;
  const float* vj = v + size_t(j) * kvStride + size_t(h) * hs;
  float* dkj = dk + size_t(j) * kvStride + size_t(h) * hs;
  float* dvj = dv + size_t(j) * kvStride + size_t(h) * hs;
  for (int i = 0; i < Nq; ++i) {
    if (kpos[j] > qpos[i]) continue;
    const size_t ih = size_t(i) * H + h;
    const float* qi = q + size_t(i) * qStride + size_t(h) * hs;
    const float* gi = dO + ih * hs;
    float p, ds;
    math::attnPair(qi, kj, vj, gi, hs, scale, lse[ih], Dd[ih], &p, &ds);
    for (int d = 0; d < hs; ++d) {
      dvj[d] += p * gi[d];
      dkj[d] += ds * qi[d];
    }
  }
}
__global__ void kCeMax(float* rowMax, const float* logits, int N, int Vl) {
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n < N) rowMax[n] = math::ceRowMax(logits + size_t(n) * Vl, Vl);
}
__global__ void kCeStats(float* stats, const float* logits, const float* rowMax, const int* tgt, int N, int Vl,
                         int vStart) {
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n < N) math::ceRowStats(stats + 2 * size_t(n), logits + size_t(n) * Vl, rowMax[n], tgt[n], Vl, vStart);
}
__global__ void kCeBwd(float* dlogits, const float* logits, const float* rowMax, const float* stats, const int* tgt,
                       int N, int Vl, int vStart, float scale) {
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n < N)
    math::ceRowBwd(dlogits + size_t(n) * Vl, logits + size_t(n) * Vl, rowMax[n], stats[2 * size_t(n)], tgt[n], Vl,
                   vStart, scale);
}
__global__ void kNormBlocks(double* out, const float* g, const uint8_t* count, size_t nBlocks, int block) {
  size_t b = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (b < nBlocks) out[b] = math::normBlock(g + b * block, count + b * block, size_t(block));
}
__global__ void kAdamw(float* p, const float* g, float* m, float* v, const uint8_t* decay, size_t n,
                       math::AdamArgs a) {
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < n) math::adamw(p + i, g[i], m + i, v + i, decay[i] != 0, a);
}

float attnScale(int hs) { return 1.f / std::sqrt(float(hs)); }

class CudaOps final : public Ops {
 public:
  explicit CudaOps(int device) : dev_(device) {
    ck(cudaSetDevice(dev_), "cudaSetDevice");
    ck(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreate");
    ckb(cublasCreate(&blas_), "cublasCreate");
    ckb(cublasSetStream(blas_, s_), "cublasSetStream");
    ckb(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");  // FP32, no TF32
    cudaMemPool_t pool;  // keep freed blocks in the pool: buffers come and go every layer
    if (cudaDeviceGetDefaultMemPool(&pool, dev_) == cudaSuccess) {
      uint64_t keep = UINT64_MAX;
      cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
  }
  ~CudaOps() override {
    cudaStreamSynchronize(s_);
    cublasDestroy(blas_);
    cudaStreamDestroy(s_);
  }
  bool device() const override { return true; }
  const char* name() const override { return "cuda"; }
  void* stream() const override { return s_; }
  void bindThread() override { ck(cudaSetDevice(dev_), "cudaSetDevice"); }
  std::unique_ptr<Ops> sibling() const override { return std::make_unique<CudaOps>(dev_); }

  void* alloc(size_t bytes) override {
    void* p = nullptr;
    ck(cudaMallocAsync(&p, bytes ? bytes : 1, s_), "cudaMallocAsync");
    return p;
  }
  void release(void* p) override { cudaFreeAsync(p, s_); }
  void copy(void* dst, const void* src, size_t bytes) override {
    ck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s_), "copy");
  }
  void upload(void* dst, const void* host, size_t bytes) override {
    ck(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, s_), "upload");
    ck(cudaStreamSynchronize(s_), "upload");  // the host source may go away after this call
  }
  void download(void* host, const void* src, size_t bytes) override {
    ck(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, s_), "download");
    ck(cudaStreamSynchronize(s_), "download");
  }
  void zero(void* p, size_t bytes) override { ck(cudaMemsetAsync(p, 0, bytes, s_), "memset"); }
  void sync() override { ck(cudaStreamSynchronize(s_), "cudaStreamSynchronize"); }
  std::shared_ptr<void> record() override {
    cudaEvent_t e;
    ck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    ck(cudaEventRecord(e, s_), "cudaEventRecord");
    return std::shared_ptr<void>(e, [](void* x) { cudaEventDestroy(static_cast<cudaEvent_t>(x)); });
  }
  void waitFor(const std::shared_ptr<void>& marker) override {
    if (marker) ck(cudaStreamWaitEvent(s_, static_cast<cudaEvent_t>(marker.get()), 0), "cudaStreamWaitEvent");
  }

  void fill(float* y, float v, size_t n) override {
    if (n) {
      kFill<<<strideBlocks(n), kThreads, 0, s_>>>(y, v, n);
      launched("fill");
    }
  }
  void add(float* y, const float* x, size_t n) override { elem(y, x, nullptr, n, 0); }
  void mul(float* y, const float* m, size_t n) override { elem(y, m, nullptr, n, 1); }
  void mulAdd(float* y, const float* m, const float* x, size_t n) override { elem(y, m, x, n, 2); }
  void copyRows(float* dst, int ds, const float* src, int ss, int rows, int width) override {
    rowsOp(dst, ds, src, ss, rows, width, false);
  }
  void addRows(float* dst, int ds, const float* src, int ss, int rows, int width) override {
    rowsOp(dst, ds, src, ss, rows, width, true);
  }

  void embedFwd(float* out, const int* tok, const float* wte, int N, int C, int vStart, int vLocal) override {
    if (N) {
      kEmbedFwd<<<blocks(size_t(N) * C), kThreads, 0, s_>>>(out, tok, wte, N, C, vStart, vLocal);
      launched("embed");
    }
  }
  void embedBwd(float* dwte, const float* dout, const int* tok, int N, int C, int vStart, int vLocal) override {
    kEmbedBwd<<<blocks(size_t(C)), kThreads, 0, s_>>>(dwte, dout, tok, N, C, vStart, vLocal);
    launched("embedBwd");
  }
  void posFwd(float* x, const float* wpe, const int* pos, int N, int C) override {
    if (N) {
      kPosFwd<<<blocks(size_t(N) * C), kThreads, 0, s_>>>(x, wpe, pos, N, C);
      launched("pos");
    }
  }
  void posBwd(float* dwpe, const float* dx, const int* pos, int N, int C) override {
    kPosBwd<<<blocks(size_t(C)), kThreads, 0, s_>>>(dwpe, dx, pos, N, C);
    launched("posBwd");
  }
  void layernormFwd(float* out, float* mean, float* rstd, const float* x, const float* w, const float* b, int N,
                    int C) override {
    if (N) {
      kLnFwd<<<blocks(size_t(N)), kThreads, 0, s_>>>(out, mean, rstd, x, w, b, N, C);
      launched("layernorm");
    }
  }
  void layernormBwdInput(float* dx, const float* dout, const float* x, const float* w, const float* mean,
                         const float* rstd, int N, int C) override {
    if (N) {
      kLnBwdInput<<<blocks(size_t(N)), kThreads, 0, s_>>>(dx, dout, x, w, mean, rstd, N, C);
      launched("lnBwd");
    }
  }
  void layernormBwdWeight(float* dw, float* db, const float* dout, const float* x, const float* mean, const float* rstd,
                          int N, int C) override {
    kLnBwdWeight<<<blocks(size_t(C)), kThreads, 0, s_>>>(dw, db, dout, x, mean, rstd, N, C);
    launched("lnBwdW");
  }
  // Row-major out (N,O) = in (N,K) @ w (O,K)^T: column-major out^T (O,N) = w^T^T ... i.e. op(T) on w.
  void matmulFwd(float* out, const float* in, const float* w, const float* bias, int N, int K, int O) override {
    if (!N || !O) return;
    const float one = 1.f, zero0 = 0.f;
    ckb(cublasSgemm(blas_, CUBLAS_OP_T, CUBLAS_OP_N, O, N, K, &one, w, K, in, K, &zero0, out, O), "sgemm fwd");
    if (bias) biasFwd(out, bias, N, O);
  }
  // din (N,K) += dout (N,O) @ w (O,K): column-major din^T (K,N) += w^T (K,O) dout^T (O,N).
  void matmulBwdInput(float* din, const float* dout, const float* w, int N, int K, int O) override {
    if (!N || !K) return;
    const float one = 1.f;
    ckb(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, K, N, O, &one, w, K, dout, O, &one, din, K), "sgemm dX");
  }
  // dw (O,K) += dout^T (O,N) @ in (N,K): column-major dw^T (K,O) += in^T (K,N) dout (N,O).
  void matmulBwdWeight(float* dw, float* dbias, const float* dout, const float* in, int N, int K, int O) override {
    if (!O || !K) return;
    const float one = 1.f;
    if (N) ckb(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_T, K, O, N, &one, in, K, dout, O, &one, dw, K), "sgemm dW");
    if (dbias) biasBwd(dbias, dout, N, O);
  }
  void biasFwd(float* x, const float* b, int N, int C) override {
    if (N) {
      kBiasFwd<<<blocks(size_t(N) * C), kThreads, 0, s_>>>(x, b, N, C);
      launched("bias");
    }
  }
  void biasBwd(float* db, const float* dx, int N, int C) override {
    kBiasBwd<<<blocks(size_t(C)), kThreads, 0, s_>>>(db, dx, N, C);
    launched("biasBwd");
  }
  void geluFwd(float* out, const float* x, size_t n) override {
    if (n) {
      kGelu<<<blocks(n), kThreads, 0, s_>>>(out, x, nullptr, n, false);
      launched("gelu");
    }
  }
  void geluBwd(float* dx, const float* x, const float* dout, size_t n) override {
    if (n) {
      kGelu<<<blocks(n), kThreads, 0, s_>>>(dx, x, dout, n, true);
      launched("geluBwd");
    }
  }
  void attnBlockFwd(const float* q, int qStride, const int* qpos, int Nq, const float* k, const float* v, int kvStride,
                    const int* kpos, int Nk, int H, int hs, float* o, float* m, float* l) override {
    if (!Nq) return;
    kAttnFwd<<<blocks(size_t(Nq) * H), kThreads, 0, s_>>>(q, qStride, qpos, Nq, k, v, kvStride, kpos, Nk, H, hs,
                                                          attnScale(hs), o, m, l);
    launched("attention");
  }
  void attnFinalize(float* o, const float* m, const float* l, float* lse, int Nq, int H, int hs) override {
    if (Nq) {
      kAttnFinalize<<<blocks(size_t(Nq) * H), kThreads, 0, s_>>>(o, m, l, lse, Nq * H, hs);
      launched("attnFin");
    }
  }
  void attnBwdPrep(float* Dd, const float* o, const float* dO, int Nq, int H, int hs) override {
    if (Nq) {
      kAttnPrep<<<blocks(size_t(Nq) * H), kThreads, 0, s_>>>(Dd, o, dO, Nq * H, hs);
      launched("attnPrep");
    }
  }
  void attnBlockBwd(const float* q, int qStride, const int* qpos, int Nq, const float* k, const float* v, int kvStride,
                    const int* kpos, int Nk, int H, int hs, const float* dO, const float* lse, const float* Dd,
                    float* dq, float* dk, float* dv) override {
    if (!Nq || !Nk) return;
    const float sc = attnScale(hs);
    kAttnBwdQ<<<blocks(size_t(Nq) * H), kThreads, 0, s_>>>(q, qStride, qpos, Nq, k, v, kvStride, kpos, Nk, H, hs, sc,
                                                           dO, lse, Dd, dq);
    launched("attnBwdQ");
    kAttnBwdKV<<<blocks(size_t(Nk) * H), kThreads, 0, s_>>>(q, qStride, qpos, Nq, k, v, kvStride, kpos, Nk, H, hs, sc,
                                                            dO, lse, Dd, dk, dv);
    launched("attnBwdKV");
  }
  void ceLocalMax(float* rowMax, const float* logits, int N, int Vl) override {
    if (N) {
      kCeMax<<<blocks(size_t(N)), kThreads, 0, s_>>>(rowMax, logits, N, Vl);
      launched("ceMax");
    }
  }
  void ceLocalStats(float* stats, const float* logits, const float* rowMax, const int* tgt, int N, int Vl,
                    int vStart) override {
    if (N) {
      kCeStats<<<blocks(size_t(N)), kThreads, 0, s_>>>(stats, logits, rowMax, tgt, N, Vl, vStart);
      launched("ce");
    }
  }
  void ceBwd(float* dlogits, const float* logits, const float* rowMax, const float* stats, const int* tgt, int N,
             int Vl, int vStart, float scale) override {
    if (N) {
      kCeBwd<<<blocks(size_t(N)), kThreads, 0, s_>>>(dlogits, logits, rowMax, stats, tgt, N, Vl, vStart, scale);
      launched("ceBwd");
    }
  }

  void normBlocks(double* hostOut, const float* g, const uint8_t* count, size_t len, int block) override {
    const size_t nb = len / size_t(block);
    if (!nb) return;
    double* d = static_cast<double*>(alloc(nb * sizeof(double)));
    kNormBlocks<<<blocks(nb), kThreads, 0, s_>>>(d, g, count, nb, block);
    launched("normBlocks");
    download(hostOut, d, nb * sizeof(double));
    release(d);
  }
  void adamw(float* p, const float* g, float* m, float* v, const uint8_t* decay, size_t n,
             const math::AdamArgs& a) override {
    if (n) {
      kAdamw<<<blocks(n), kThreads, 0, s_>>>(p, g, m, v, decay, n, a);
      launched("adamw");
    }
  }

 private:
  void launched(const char* what) { ck(cudaGetLastError(), what); }
  void elem(float* y, const float* x, const float* z, size_t n, int op) {
    if (n) {
      kElem<<<strideBlocks(n), kThreads, 0, s_>>>(y, x, z, n, op);
      launched("elementwise");
    }
  }
  void rowsOp(float* dst, int ds, const float* src, int ss, int rows, int width, bool add) {
    const size_t n = size_t(rows) * width;
    if (n) {
      kRows<<<blocks(n), kThreads, 0, s_>>>(dst, ds, src, ss, rows, width, add);
      launched("rows");
    }
  }

  int dev_;
  cudaStream_t s_ = nullptr;
  cublasHandle_t blas_ = nullptr;
};

}  // namespace

int cudaDevices(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = cudaGetErrorString(e);
    return 0;
  }
  if (n == 0 && why) *why = "the CUDA runtime reports 0 devices";
  return n;
}

std::unique_ptr<Ops> makeCudaOps(int localRank) {
  std::string why;
  const int n = cudaDevices(&why);
  if (n <= 0) throw std::runtime_error("--device cuda: no CUDA device (" + why + ")");
  return std::make_unique<CudaOps>(localRank % n);
}

}  // namespace trainer
