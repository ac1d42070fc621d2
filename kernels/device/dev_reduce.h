// dev_reduce.h: the reduce-copy loops of the device kernels (and of their host emulation): up to
// three sources reduced element-wise into up to three destinations, with the pre-multiplied-sum
// scale on the local input and the avg divide on the result. The per-element math is
// kernels/element_ops.h, the same functions the host kernels run. Work is split over `nt` threads
// (a CUDA block; one host thread in the emulation); 16-byte vectors where every pointer allows.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/element_ops.h"
#include "kernels/hd.h"

namespace strata::dev {

/// How one step combines its inputs.
struct RedCtx {
  uint8_t dtype = 0;       ///< strataDataType_t
  uint8_t op = 0;          ///< kernels::RedKind
  bool scaleSrc0 = false;  ///< src[0] is this rank's input of a pre-multiplied sum
  bool divide = false;     ///< the result is final: divide by `nranks` (avg)
  uint64_t scalar = 0;
  int32_t nranks = 1;
};

/// Sources (src[0] first; reduced in order) and destinations of one step.
struct StepIO {
  const char* src[3] = {};
  int nsrc = 0;
  char* dst[3] = {};
  int ndst = 0;
};

STRATA_HD_INLINE void load16(void* to, const char* p) {
#if defined(__CUDA_ARCH__)
  const uint4 v = __ldcg(reinterpret_cast<const uint4*>(p));  // L2: peer-written slots are never stale
  memcpy(to, &v, 16);
#else
  memcpy(to, p, 16);
#endif
}
STRATA_HD_INLINE void store16(char* p, const void* from) {
#if defined(__CUDA_ARCH__)
  uint4 v;
  memcpy(&v, from, 16);
  *reinterpret_cast<uint4*>(p) = v;
#else
  memcpy(p, from, 16);
#endif
}

/// One element (or any small object) from memory another GPU may have written since this SM last
/// read it: through L2 on the device, so a reused FIFO slot never shows stale L1 lines.
template <class S>
STRATA_HD_INLINE S loadFresh(const char* p) {
  S v;
#if defined(__CUDA_ARCH__)
  unsigned char b[sizeof(S)];
  for (unsigned i = 0; i < sizeof(S); ++i) b[i] = __ldcg(reinterpret_cast<const unsigned char*>(p) + i);
  memcpy(&v, b, sizeof(S));
#else
  memcpy(&v, p, sizeof(S));
#endif
  return v;
}

STRATA_HD_INLINE bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

/// Plain byte copy from one source to every destination.
STRATA_HD inline void copyBytes(int tid, int nt, const StepIO& io, uint64_t bytes) {
  bool vec = aligned16(io.src[0]);
  for (int d = 0; d < io.ndst; ++d) vec = vec && aligned16(io.dst[d]);
  uint64_t done = 0;
  if (vec) {
    const uint64_t n16 = bytes / 16;
    for (uint64_t i = uint64_t(tid); i < n16; i += uint64_t(nt)) {
      alignas(16) unsigned char v[16];
      load16(v, io.src[0] + 16 * i);
      for (int d = 0; d < io.ndst; ++d) store16(io.dst[d] + 16 * i, v);
    }
    done = n16 * 16;
  }
  for (uint64_t i = done + uint64_t(tid); i < bytes; i += uint64_t(nt))
    for (int d = 0; d < io.ndst; ++d) io.dst[d][i] = loadFresh<char>(io.src[0] + i);
}

namespace detail {
using kernels::detail::DivisorT;

template <class Cd, kernels::RedKind K>
struct Combine {
  using S = typename Cd::S;
  using C = typename Cd::C;
  C k{};
  DivisorT<Cd> w{};
  bool scale = false, divide = false;
  STRATA_HD explicit Combine(const RedCtx& ctx) : scale(ctx.scaleSrc0), divide(ctx.divide) {
    if (scale) {
      S s;
      memcpy(&s, &ctx.scalar, sizeof s);
      k = Cd::dec(s);
    }
    w = DivisorT<Cd>(ctx.nranks);
  }
  STRATA_HD S first(S v) const { return scale ? kernels::detail::scaleOne<Cd>(v, k) : v; }
  STRATA_HD S add(S a, S b) const { return Cd::enc(kernels::detail::Op<K>::apply(Cd::dec(a), Cd::dec(b))); }
  STRATA_HD S last(S v) const { return divide ? kernels::detail::divideOne<Cd>(v, w) : v; }
};

template <class Cd, kernels::RedKind K>
STRATA_HD void reduceCopyT(int tid, int nt, const StepIO& io, uint64_t n, const RedCtx& ctx) {
  using S = typename Cd::S;
  constexpr int kPer = 16 / int(sizeof(S));
  const Combine<Cd, K> cb(ctx);
  bool vec = true;
  for (int s = 0; s < io.nsrc; ++s) vec = vec && aligned16(io.src[s]);
  for (int d = 0; d < io.ndst; ++d) vec = vec && aligned16(io.dst[d]);
  uint64_t done = 0;
  if (vec) {
    const uint64_t npk = n / kPer;
    for (uint64_t p = uint64_t(tid); p < npk; p += uint64_t(nt)) {
      S a[kPer], b[kPer];
      load16(a, io.src[0] + 16 * p);
      for (int e = 0; e < kPer; ++e) a[e] = cb.first(a[e]);
      for (int s = 1; s < io.nsrc; ++s) {
        load16(b, io.src[s] + 16 * p);
        for (int e = 0; e < kPer; ++e) a[e] = cb.add(a[e], b[e]);
      }
      for (int e = 0; e < kPer; ++e) a[e] = cb.last(a[e]);
      for (int d = 0; d < io.ndst; ++d) store16(io.dst[d] + 16 * p, a);
    }
    done = npk * kPer;
  }
  for (uint64_t i = done + uint64_t(tid); i < n; i += uint64_t(nt)) {
    S a = cb.first(loadFresh<S>(io.src[0] + i * sizeof(S)));
    for (int s = 1; s < io.nsrc; ++s) a = cb.add(a, loadFresh<S>(io.src[s] + i * sizeof(S)));
    a = cb.last(a);
    for (int d = 0; d < io.ndst; ++d) memcpy(io.dst[d] + i * sizeof(S), &a, sizeof(S));
  }
}

/// One LL pack (8 bytes) combined: acc = first(acc) when `isFirst`, acc = add(acc, b) else; then last.
template <class Cd, kernels::RedKind K>
STRATA_HD uint64_t packT(uint64_t acc, uint64_t b, int mode, const RedCtx& ctx) {
  using S = typename Cd::S;
  constexpr int kPer = 8 / int(sizeof(S));
  const Combine<Cd, K> cb(ctx);
  S x[kPer], y[kPer];
  memcpy(x, &acc, 8);
  memcpy(y, &b, 8);
  for (int e = 0; e < kPer; ++e) x[e] = mode == 0 ? cb.first(x[e]) : mode == 1 ? cb.add(x[e], y[e]) : cb.last(x[e]);
  memcpy(&acc, x, 8);
  return acc;
}

/// Calls F::template run<Cd, K>() for the context's dtype and op (the only dtype x op switch).
template <class F>
STRATA_HD auto dispatch(const RedCtx& ctx, F&& f) {
  using namespace kernels::detail;
  using kernels::RedKind;
  auto byOp = [&](auto cd) {
    using Cd = decltype(cd);
    switch (RedKind(ctx.op)) {
      case RedKind::Prod: return f.template run<Cd, RedKind::Prod>();
      case RedKind::Max: return f.template run<Cd, RedKind::Max>();
      case RedKind::Min: return f.template run<Cd, RedKind::Min>();
      default: return f.template run<Cd, RedKind::Sum>();
    }
  };
  switch (ctx.dtype) {
    case 0: return byOp(Plain<int8_t>{});
    case 1: return byOp(Plain<uint8_t>{});
    case 2: return byOp(Plain<int32_t>{});
    case 3: return byOp(Plain<uint32_t>{});
    case 4: return byOp(Plain<int64_t>{});
    case 5: return byOp(Plain<uint64_t>{});
    case 6: return byOp(Half{});
    case 8: return byOp(Plain<double>{});
    case 9: return byOp(Bf16{});
    case 10: return byOp(E4m3{});
    case 11: return byOp(E5m2{});
    default: return byOp(Plain<float>{});
  }
}

struct ReduceCopyF {
  int tid, nt;
  const StepIO& io;
  uint64_t n;
  const RedCtx& ctx;
  template <class Cd, kernels::RedKind K>
  STRATA_HD int run() const {
    reduceCopyT<Cd, K>(tid, nt, io, n, ctx);
    return 0;
  }
};
struct PackF {
  uint64_t acc, b;
  int mode;
  const RedCtx& ctx;
  template <class Cd, kernels::RedKind K>
  STRATA_HD uint64_t run() const {
    return packT<Cd, K>(acc, b, mode, ctx);
  }
};
}  // namespace detail

/// dst[d][i] = last(first(src[0][i]) op src[1][i] op src[2][i]) for i < n elements.
STRATA_HD STRATA_DEVICE_NOINLINE inline void reduceCopy(int tid, int nt, const StepIO& io, uint64_t n, uint32_t esize, const RedCtx& ctx) {
  if (io.ndst == 0 || n == 0) return;
  if (io.nsrc == 1 && !ctx.scaleSrc0 && !ctx.divide) return copyBytes(tid, nt, io, n * esize);
  detail::dispatch(ctx, detail::ReduceCopyF{tid, nt, io, n, ctx});
}

/// One 8-byte pack through packT (mode 0: first, 1: add, 2: last): the one out-of-line copy of the
/// dtype x op switch for packs, shared by every caller below (inlined, each would be another copy).
STRATA_HD STRATA_DEVICE_NOINLINE inline uint64_t packOp(uint64_t a, uint64_t b, int mode, const RedCtx& ctx) {
  return detail::dispatch(ctx, detail::PackF{a, b, mode, ctx});
}

/// Pack helpers (the LL protocol, deterministic mode's tree step): the first operand (scaled if it
/// is the local input), a further operand, the final result (divided for avg).
STRATA_HD inline uint64_t packFirst(uint64_t v, const RedCtx& ctx) { return ctx.scaleSrc0 ? packOp(v, 0, 0, ctx) : v; }
STRATA_HD inline uint64_t packAdd(uint64_t a, uint64_t b, const RedCtx& ctx) { return packOp(a, b, 1, ctx); }
STRATA_HD inline uint64_t packLast(uint64_t v, const RedCtx& ctx) { return ctx.divide ? packOp(v, 0, 2, ctx) : v; }

}  // namespace strata::dev
