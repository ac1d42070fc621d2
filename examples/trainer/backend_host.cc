// backend_host.cc: the host lane of the compute seam: kernels.h's loops on host memory, exactly
// the arithmetic the trainer has always run (the CPU path), and the optimizer loops of optim.cc.
#include <cstring>

#include "backend.h"
#include "kernels.h"

namespace trainer {

namespace {

class HostOps final : public Ops {
 public:
  bool device() const override { return false; }
  const char* name() const override { return "host"; }
  void* stream() const override { return nullptr; }
  void bindThread() override {}
  std::unique_ptr<Ops> sibling() const override { return std::make_unique<HostOps>(); }

  void* alloc(size_t bytes) override { return ::operator new(bytes); }
  void release(void* p) override { ::operator delete(p); }
  void copy(void* dst, const void* src, size_t bytes) override { std::memmove(dst, src, bytes); }
  void upload(void* dst, const void* host, size_t bytes) override { std::memmove(dst, host, bytes); }
  void download(void* host, const void* src, size_t bytes) override { std::memmove(host, src, bytes); }
  void zero(void* p, size_t bytes) override { std::memset(p, 0, bytes); }
  void sync() override {}
  std::shared_ptr<void> record() override { return nullptr; }
  void waitFor(const std::shared_ptr<void>&) override {}

  void fill(float* y, float v, size_t n) override { std::fill(y, y + n, v); }
  void add(float* y, const float* x, size_t n) override {
    for (size_t i = 0; i < n; ++i) y[i] += x[i];
  }
  void mul(float* y, const float* m, size_t n) override {
    for (size_t i = 0; i < n; ++i) y[i] *= m[i];
  }
  void mulAdd(float* y, const float* m, const float* x, size_t n) override {
    for (size_t i = 0; i < n; ++i) y[i] = y[i] * m[i] + x[i];
  }
  void copyRows(float* dst, int ds, const float* src, int ss, int rows, int width) override {
    for (int r = 0; r < rows; ++r) std::copy(src + size_t(r) * ss, src + size_t(r) * ss + width, dst + size_t(r) * ds);
  }
  void addRows(float* dst, int ds, const float* src, int ss, int rows, int width) override {
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < width; ++j) dst[size_t(r) * ds + j] += src[size_t(r) * ss + j];
  }

  void embedFwd(float* out, const int* tok, const float* wte, int N, int C, int vStart, int vLocal) override {
    k::embedFwd(out, tok, wte, N, C, vStart, vLocal);
  }
  void embedBwd(float* dwte, const float* dout, const int* tok, int N, int C, int vStart, int vLocal) override {
    k::embedBwd(dwte, dout, tok, N, C, vStart, vLocal);
  }
  void posFwd(float* x, const float* wpe, const int* pos, int N, int C) override { k::posFwd(x, wpe, pos, N, C); }
  void posBwd(float* dwpe, const float* dx, const int* pos, int N, int C) override { k::posBwd(dwpe, dx, pos, N, C); }
  void layernormFwd(float* out, float* mean, float* rstd, const float* x, const float* w, const float* b, int N,
                    int C) override {
    k::layernormFwd(out, mean, rstd, x, w, b, N, C);
  }
  void layernormBwdInput(float* dx, const float* dout, const float* x, const float* w, const float* mean,
                         const float* rstd, int N, int C) override {
    k::layernormBwdInput(dx, dout, x, w, mean, rstd, N, C);
  }
  void layernormBwdWeight(float* dw, float* db, const float* dout, const float* x, const float* mean, const float* rstd,
                          int N, int C) override {
    k::layernormBwdWeight(dw, db, dout, x, mean, rstd, N, C);
  }
  void matmulFwd(float* out, const float* in, const float* w, const float* bias, int N, int K, int O) override {
    k::matmulFwd(out, in, w, bias, N, K, O);
  }
  void matmulBwdInput(float* din, const float* dout, const float* w, int N, int K, int O) override {
    k::matmulBwdInput(din, dout, w, N, K, O);
  }
  void matmulBwdWeight(float* dw, float* dbias, const float* dout, const float* in, int N, int K, int O) override {
    k::matmulBwdWeight(dw, dbias, dout, in, N, K, O);
  }
  void biasFwd(float* x, const float* b, int N, int C) override { k::biasFwd(x, b, N, C); }
  void biasBwd(float* db, const float* dx, int N, int C) override { k::biasBwd(db, dx, N, C); }
  void geluFwd(float* out, const float* x, size_t n) override { k::geluFwd(out, x, n); }
  void geluBwd(float* dx, const float* x, const float* dout, size_t n) override { k::geluBwd(dx, x, dout, n); }
  void attnBlockFwd(const float* q, int qStride, const int* qpos, int Nq, const float* k, const float* v, int kvStride,
                    const int* kpos, int Nk, int H, int hs, float* o, float* m, float* l) override {
    k::attnBlockFwd(q, qStride, qpos, Nq, k, v, kvStride, kpos, Nk, H, hs, o, m, l);
  }
  void attnFinalize(float* o, const float* m, const float* l, float* lse, int Nq, int H, int hs) override {
    k::attnFinalize(o, m, l, lse, Nq, H, hs);
  }
  void attnBwdPrep(float* Dd, const float* o, const float* dO, int Nq, int H, int hs) override {
    k::attnBwdPrep(Dd, o, dO, Nq, H, hs);
  }
  void attnBlockBwd(const float* q, int qStride, const int* qpos, int Nq, const float* k, const float* v, int kvStride,
                    const int* kpos, int Nk, int H, int hs, const float* dO, const float* lse, const float* Dd,
                    float* dq, float* dk, float* dv) override {
    k::attnBlockBwd(q, qStride, qpos, Nq, k, v, kvStride, kpos, Nk, H, hs, dO, lse, Dd, dq, dk, dv);
  }
  void ceLocalMax(float* rowMax, const float* logits, int N, int Vl) override { k::ceLocalMax(rowMax, logits, N, Vl); }
  void ceLocalStats(float* stats, const float* logits, const float* rowMax, const int* tgt, int N, int Vl,
                    int vStart) override {
    k::ceLocalStats(stats, logits, rowMax, tgt, N, Vl, vStart);
  }
  void ceBwd(float* dlogits, const float* logits, const float* rowMax, const float* stats, const int* tgt, int N,
             int Vl, int vStart, float scale) override {
    k::ceBwd(dlogits, logits, rowMax, stats, tgt, N, Vl, vStart, scale);
  }

  void normBlocks(double* out, const float* g, const uint8_t* count, size_t len, int block) override {
    for (size_t b = 0; b < len; b += size_t(block)) out[b / size_t(block)] = math::normBlock(g + b, count + b, size_t(block));
  }
  void adamw(float* p, const float* g, float* m, float* v, const uint8_t* decay, size_t n,
             const math::AdamArgs& a) override {
    for (size_t i = 0; i < n; ++i) math::adamw(p + i, g[i], m + i, v + i, decay[i] != 0, a);
  }
};

}  // namespace

Ops& hostOps() {
  static HostOps ops;
  return ops;
}

std::unique_ptr<Ops> makeHostOps() { return std::make_unique<HostOps>(); }

}  // namespace trainer
