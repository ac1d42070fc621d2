// backend.h: the trainer's compute seam: where tensors live and what runs the layers.
//
// An `Ops` is one lane of work on one device: memory (allocate, copy, upload, download), the
// element-wise helpers, every layer kernel of kernels.h (float), the matrix products, and the
// optimizer's norm blocks and AdamW. HostOps (backend_host.cc) runs kernels.h's loops on host
// memory, exactly as the trainer always did; CudaOps (backend_cuda.cu, built with
// STRATA_ENABLE_CUDA) keeps everything in device memory, runs the matrix products through cuBLAS
// and the rest as small kernels over layer_math.h, in order on its own CUDA stream.
//
// `Buf` (DBuf<float>) is the trainer's tensor: a std::vector on the host lane, device memory on a
// CUDA lane. A buffer takes the lane of the thread that first sizes it (`UseOps` sets a thread's
// lane; a thread without one uses the host), so the model code sizes buffers without naming a
// device. Host-only code (checkpoints, MoE) reaches the vector through vec(), which refuses device
// buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "layer_math.h"

namespace trainer {

class Ops {
 public:
  virtual ~Ops() = default;
  virtual bool device() const = 0;
  virtual const char* name() const = 0;
  /// The lane's cudaStream_t (strata's *Stream forms take it); null on the host.
  virtual void* stream() const = 0;
  /// Makes this lane's device the calling thread's current one (UseOps calls it).
  virtual void bindThread() = 0;
  /// Another lane on the same device with its own stream (the gradient communication thread's).
  virtual std::unique_ptr<Ops> sibling() const = 0;

  // ---- memory (device lanes: stream-ordered; download waits for the lane) ----
  virtual void* alloc(size_t bytes) = 0;
  virtual void release(void* p) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  virtual void upload(void* dst, const void* host, size_t bytes) = 0;
  virtual void download(void* host, const void* src, size_t bytes) = 0;
  virtual void zero(void* p, size_t bytes) = 0;
  /// Waits until the lane's work so far is done (host: nothing to wait for).
  virtual void sync() = 0;
  /// A marker of the work enqueued so far; another lane's waitFor(marker) orders after it.
  virtual std::shared_ptr<void> record() = 0;
  virtual void waitFor(const std::shared_ptr<void>& marker) = 0;

  // ---- element-wise ----
  virtual void fill(float* y, float v, size_t n) = 0;
  virtual void add(float* y, const float* x, size_t n) = 0;                       // y += x
  virtual void mul(float* y, const float* m, size_t n) = 0;                       // y *= m
  virtual void mulAdd(float* y, const float* m, const float* x, size_t n) = 0;    // y = y * m + x
  /// rows x width block between strided rows: dst[r*ds + j] = (or +=) src[r*ss + j].
  virtual void copyRows(float* dst, int dstStride, const float* src, int srcStride, int rows, int width) = 0;
  virtual void addRows(float* dst, int dstStride, const float* src, int srcStride, int rows, int width) = 0;

  // ---- layers (kernels.h's signatures; int arrays live where the lane's memory does) ----
  virtual void embedFwd(float* out, const int* tok, const float* wte, int N, int C, int vStart, int vLocal) = 0;
  virtual void embedBwd(float* dwte, const float* dout, const int* tok, int N, int C, int vStart, int vLocal) = 0;
  virtual void posFwd(float* x, const float* wpe, const int* pos, int N, int C) = 0;
  virtual void posBwd(float* dwpe, const float* dx, const int* pos, int N, int C) = 0;
  virtual void layernormFwd(float* out, float* mean, float* rstd, const float* x, const float* w, const float* b, int N,
                            int C) = 0;
  virtual void layernormBwdInput(float* dx, const float* dout, const float* x, const float* w, const float* mean,
                                 const float* rstd, int N, int C) = 0;
  virtual void layernormBwdWeight(float* dw, float* db, const float* dout, const float* x, const float* mean,
                                  const float* rstd, int N, int C) = 0;
  virtual void matmulFwd(float* out, const float* in, const float* w, const float* bias, int N, int K, int O) = 0;
  virtual void matmulBwdInput(float* din, const float* dout, const float* w, int N, int K, int O) = 0;
  virtual void matmulBwdWeight(float* dw, float* dbias, const float* dout, const float* in, int N, int K, int O) = 0;
  virtual void biasFwd(float* x, const float* b, int N, int C) = 0;
  virtual void biasBwd(float* db, const float* dx, int N, int C) = 0;
  virtual void geluFwd(float* out, const float* x, size_t n) = 0;
  virtual void geluBwd(float* dx, const float* x, const float* dout, size_t n) = 0;
  virtual void attnBlockFwd(const float* q, int qStride, const int* qpos, int Nq, const float* k, const float* v,
                            int kvStride, const int* kpos, int Nk, int H, int hs, float* o, float* m, float* l) = 0;
  virtual void attnFinalize(float* o, const float* m, const float* l, float* lse, int Nq, int H, int hs) = 0;
  virtual void attnBwdPrep(float* Dd, const float* o, const float* dO, int Nq, int H, int hs) = 0;
  virtual void attnBlockBwd(const float* q, int qStride, const int* qpos, int Nq, const float* k, const float* v,
                            int kvStride, const int* kpos, int Nk, int H, int hs, const float* dO, const float* lse,
                            const float* Dd, float* dq, float* dk, float* dv) = 0;
  virtual void ceLocalMax(float* rowMax, const float* logits, int N, int Vl) = 0;
  virtual void ceLocalStats(float* stats, const float* logits, const float* rowMax, const int* tgt, int N, int Vl,
                            int vStart) = 0;
  virtual void ceBwd(float* dlogits, const float* logits, const float* rowMax, const float* stats, const int* tgt,
                     int N, int Vl, int vStart, float scale) = 0;

  // ---- optimizer ----
  /// hostOut[b] = sum of squares (double, in order) of the counted elements of block b of
  /// g[0, len), blocks of `block` elements; written to host memory (waits for the lane).
  virtual void normBlocks(double* hostOut, const float* g, const uint8_t* count, size_t len, int block) = 0;
  /// AdamW on n elements: p, g, m, v and the decay mask are already offset to the first one.
  virtual void adamw(float* p, const float* g, float* m, float* v, const uint8_t* decay, size_t n,
                     const math::AdamArgs& a) = 0;
};

/// The host lane (one instance serves every thread), and a new one (host lanes hold no state).
Ops& hostOps();
std::unique_ptr<Ops> makeHostOps();
/// This thread's lane: the one set by UseOps, else the host.
Ops& currentOps();

/// Sets this thread's lane for its lifetime.
class UseOps {
 public:
  explicit UseOps(Ops* ops);
  ~UseOps();
  UseOps(const UseOps&) = delete;
  UseOps& operator=(const UseOps&) = delete;

 private:
  Ops* prev_;
};

enum class Device { Host, Cuda };

/// Why `device` cannot run here (empty: it can). Cuda: needs a CUDA build and a CUDA device.
std::string deviceUnavailable(Device device);
/// A lane on `device`. Cuda: device (localRank % device count), a new stream; throws when unavailable.
/// Host: a host lane.
std::unique_ptr<Ops> makeOps(Device device, int localRank);

/// The trainer's tensor: host vector or device memory, by the lane that sized it first.
template <class T>
class DBuf {
 public:
  DBuf() = default;
  explicit DBuf(size_t n) { assign(n, T(0)); }
  DBuf(const DBuf& o) { *this = o; }
  DBuf(DBuf&& o) noexcept { swap(o); }
  ~DBuf() { freeDev(); }
  DBuf& operator=(const DBuf& o) {
    if (this == &o) return *this;
    if (!o.dev()) {
      if (dev()) throw std::logic_error("DBuf: host copy into a device buffer");
      host_ = o.host_;
      ops_ = o.ops_;
      return *this;
    }
    ops_ = o.ops_;
    sizeTo(o.n_, false);
    if (n_) ops_->copy(p_, o.p_, n_ * sizeof(T));
    return *this;
  }
  DBuf& operator=(DBuf&& o) noexcept {
    swap(o);
    return *this;
  }

  T* data() { return dev() ? p_ : host_.data(); }
  const T* data() const { return dev() ? p_ : host_.data(); }
  size_t size() const { return dev() ? n_ : host_.size(); }
  bool empty() const { return size() == 0; }
  /// Elements held in memory (the vector's capacity on the host).
  size_t capacity() const { return dev() ? cap_ : host_.capacity(); }
  bool onDevice() const { return dev(); }

  /// As std::vector::resize: keeps the first elements, new ones are zero.
  void resize(size_t n) {
    bind();
    if (!dev()) return host_.resize(n);
    sizeTo(n, true);
  }
  /// n elements equal to v (0 or another float for float buffers).
  void assign(size_t n, T v) {
    bind();
    if (!dev()) return host_.assign(n, v);
    sizeTo(n, false);
    fillDev(v);
  }
  /// n elements copied from src, which lives where this buffer's lane keeps memory.
  void assign(const T* src, size_t n) {
    bind();
    if (!dev()) return host_.assign(src, src + n);
    sizeTo(n, false);
    if (n) ops_->copy(p_, src, n * sizeof(T));
  }
  /// The elements of a host vector (uploaded on a device lane).
  void upload(const std::vector<T>& h) {
    bind();
    if (!dev()) {
      host_ = h;
      return;
    }
    sizeTo(h.size(), false);
    if (!h.empty()) ops_->upload(p_, h.data(), h.size() * sizeof(T));
  }
  /// A host copy of the elements (waits for the lane on a device).
  std::vector<T> toHost() const {
    if (!dev()) return host_;
    std::vector<T> h(n_);
    if (n_) ops_->download(h.data(), p_, n_ * sizeof(T));
    return h;
  }
  void clear() {
    if (dev()) n_ = 0;
    else host_.clear();
  }
  /// Gives the memory back (std::vector<T>().swap(v)).
  void releaseMemory() {
    freeDev();
    std::vector<T>().swap(host_);
  }
  void swap(DBuf& o) noexcept {
    std::swap(ops_, o.ops_);
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    std::swap(cap_, o.cap_);
    host_.swap(o.host_);
  }
  /// The host vector (host-only code: checkpoints, MoE, tests).
  std::vector<T>& vec() {
    if (dev()) throw std::logic_error("a device tensor used by host-only code");
    return host_;
  }
  const std::vector<T>& vec() const {
    if (dev()) throw std::logic_error("a device tensor used by host-only code");
    return host_;
  }

 private:
  bool dev() const { return ops_ && ops_->device(); }
  void bind() {
    if (!ops_) ops_ = &currentOps();
  }
  void sizeTo(size_t n, bool keep) {
    if (n > cap_) {
      T* q = static_cast<T*>(ops_->alloc(n * sizeof(T)));
      if (keep && n_) ops_->copy(q, p_, n_ * sizeof(T));
      if (keep) ops_->zero(q + n_, (n - n_) * sizeof(T));
      if (p_) ops_->release(p_);
      p_ = q;
      cap_ = n;
    } else if (keep && n > n_) {
      ops_->zero(p_ + n_, (n - n_) * sizeof(T));
    }
    n_ = n;
  }
  void fillDev(T v) {
    if (!n_) return;
    if constexpr (std::is_same_v<T, float>) {
      if (v != T(0)) return ops_->fill(p_, v, n_);
    } else {
      if (v != T(0)) throw std::logic_error("DBuf: only zero fills for non-float device buffers");
    }
    ops_->zero(p_, n_ * sizeof(T));
  }
  void freeDev() {
    if (p_) ops_->release(p_);
    p_ = nullptr;
    n_ = cap_ = 0;
  }

  Ops* ops_ = nullptr;
  T* p_ = nullptr;
  size_t n_ = 0, cap_ = 0;
  std::vector<T> host_;
};

using Buf = DBuf<float>;
using IntBuf = DBuf<int>;
using ByteBuf = DBuf<uint8_t>;

}  // namespace trainer
