/*
 * nccl_abi_prog.c: drives strata's NCCL ABI (libnccl.so.2) through <nccl.h> only, checking every
 * result against values computed here independently. Built twice: against strata's own header
 * (nccl_abi_prog) and, where it is installed, against NVIDIA's (nccl_abi_prog_nvidia); both link
 * strata's libnccl.so.2. Run by tests/nccl_abi_test.cc (ctest -L abi).
 *
 * Modes:
 *   nccl_abi_prog [procs]        one rank per process under the launcher:
 *                                strata-run -n 4 -- nccl_abi_prog   (STRATA_RANK, STRATA_WORLD_SIZE)
 *                                (under strata-run --threads: the STRATA_NTHREADS ranks as threads)
 *   nccl_abi_prog threads N      N ranks as threads of this process, one ncclGetUniqueId
 *   nccl_abi_prog initall N      ncclCommInitAll(comms, N, NULL); one thread drives all N comms with
 *                                ncclGroupStart / a call per comm / ncclGroupEnd
 *   nccl_abi_prog groupinit N    like initall, but the comms come from N grouped ncclCommInitRank
 *                                (odd ranks: ncclCommInitRankScalable)
 *
 * Checks: every collective x every datatype x every op where it applies, in and out of place, counts
 * {0, 1, 7, 1000, ~65537}, every root of rooted collectives (the full matrix is sampled so that 8
 * ranks finish in seconds), grouped send/recv as an all-to-allv, premultiplied sums, comm split,
 * bad arguments (-> ncclInvalidArgument with a last-error text, the comm stays usable).
 * Inputs are small integers so every result is exact in every type (fp8 e5m2 is exact to 8, e4m3 to
 * 16); avg of floating types is compared within rounding. Output: "rank R: N checks passed" per rank,
 * exit status 1 with the failing check named on any failure.
 */
#include <nccl.h>

#include <math.h>
#include <stddef.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- datatypes: sizes, names, exact small-value encoding ---------------------------------------- */

#define NTYPES 12
#define NOPS 6 /* sum prod max min avg premulsum */
#define OP_PREMUL 5
#define GUARD 64
#define SENTINEL 0xA5

static const size_t kSize[NTYPES] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
static const char* const kTypeName[NTYPES] = {"int8",    "uint8",   "int32",   "uint32",
                                              "int64",   "uint64",  "float16", "float32",
                                              "float64", "bfloat16", "fp8e4m3", "fp8e5m2"};
static const char* const kOpName[NOPS] = {"sum", "prod", "max", "min", "avg", "premulsum"};
/* Largest integer up to which every integer is exact and in range (sums stay below it). */
static const double kExactLimit[NTYPES] = {127, 255, 1 << 20, 1 << 20, 1 << 20, 1 << 20,
                                           2048, 1 << 20, 1 << 20, 256, 16, 8};
/* Number of distinct values for data-movement inputs (all exact in the type). */
static const unsigned kMoveRange[NTYPES] = {127, 255, 65521, 65521, 65521, 65521,
                                            2049, 65521, 65521, 257, 17, 9};
static const int kSigned[NTYPES] = {1, 0, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1};
static const int kFloat[NTYPES] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1};
/* Relative precision (half an ulp is eps/2) of the floating types, for avg. */
static const double kEps[NTYPES] = {0, 0, 0, 0, 0, 0, 0x1p-10, 0x1p-23, 0x1p-52, 0x1p-7, 0x1p-3, 0x1p-2};

static uint32_t encMini(double v, int eb, int mb, int bias) {
  uint32_t sign = 0, bits = 0;
  if (v < 0) {
    sign = 1;
    v = -v;
  }
  if (v != 0) {
    int e;
    double m = frexp(v, &e); /* v = m * 2^e, m in [0.5, 1) */
    int be = e - 1 + bias;
    if (be <= 0) {
      bits = (uint32_t)lrint(ldexp(v, mb - 1 + bias)); /* subnormal */
    } else {
      long q = lrint(ldexp(2 * m - 1, mb));
      if (q == (1L << mb)) {
        q = 0;
        ++be;
      }
      bits = ((uint32_t)be << mb) | (uint32_t)q;
    }
  }
  return (sign << (eb + mb)) | bits;
}

static double decMini(uint32_t b, int eb, int mb, int bias, int finiteOnly) {
  int sign = (b >> (eb + mb)) & 1;
  uint32_t e = (b >> mb) & ((1u << eb) - 1), m = b & ((1u << mb) - 1);
  double v;
  if (e == (1u << eb) - 1 && !finiteOnly)
    v = m ? NAN : INFINITY;
  else if (e == (1u << eb) - 1 && finiteOnly && m == (1u << mb) - 1)
    v = NAN;
  else if (e == 0)
    v = ldexp((double)m, 1 - bias - mb);
  else
    v = ldexp(1.0 + (double)m / (double)(1u << mb), (int)e - bias);
  return sign ? -v : v;
}

static void setElem(void* buf, size_t i, int t, double v) {
  char* p = (char*)buf + i * kSize[t];
  switch (t) {
    case 0: { int8_t x = (int8_t)v; memcpy(p, &x, 1); break; }
    case 1: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
    case 2: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
    case 3: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    case 4: { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
    case 5: { uint64_t x = (uint64_t)v; memcpy(p, &x, 8); break; }
    case 6: { uint16_t x = (uint16_t)encMini(v, 5, 10, 15); memcpy(p, &x, 2); break; }
    case 7: { float x = (float)v; memcpy(p, &x, 4); break; }
    case 8: memcpy(p, &v, 8); break;
    case 9: { uint16_t x = (uint16_t)encMini(v, 8, 7, 127); memcpy(p, &x, 2); break; }
    case 10: { uint8_t x = (uint8_t)encMini(v, 4, 3, 7); memcpy(p, &x, 1); break; }
    case 11: { uint8_t x = (uint8_t)encMini(v, 5, 2, 15); memcpy(p, &x, 1); break; }
  }
}

static double getElem(const void* buf, size_t i, int t) {
  const char* p = (const char*)buf + i * kSize[t];
  switch (t) {
    case 0: { int8_t x; memcpy(&x, p, 1); return x; }
    case 1: { uint8_t x; memcpy(&x, p, 1); return x; }
    case 2: { int32_t x; memcpy(&x, p, 4); return x; }
    case 3: { uint32_t x; memcpy(&x, p, 4); return x; }
    case 4: { int64_t x; memcpy(&x, p, 8); return (double)x; }
    case 5: { uint64_t x; memcpy(&x, p, 8); return (double)x; }
    case 6: { uint16_t x; memcpy(&x, p, 2); return decMini(x, 5, 10, 15, 0); }
    case 7: { float x; memcpy(&x, p, 4); return x; }
    case 8: { double x; memcpy(&x, p, 8); return x; }
    case 9: { uint16_t x; memcpy(&x, p, 2); return decMini(x, 8, 7, 127, 0); }
    case 10: { uint8_t x; memcpy(&x, p, 1); return decMini(x, 4, 3, 7, 1); }
    case 11: { uint8_t x; memcpy(&x, p, 1); return decMini(x, 5, 2, 15, 0); }
  }
  return NAN;
}

/* ---- input values ------------------------------------------------------------------------------- */

static uint32_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return (uint32_t)x;
}

static uint32_t hsh(int r, size_t i, unsigned seed) {
  return mix(((uint64_t)(unsigned)r << 40) ^ ((uint64_t)seed << 24) ^ (uint64_t)i * 0x9E3779B1ULL);
}

/* Data-movement input: distinct-looking values, exact in the type. */
static double moveVal(int t, int r, size_t i, unsigned seed) {
  unsigned m = kMoveRange[t];
  double v = (double)(hsh(r, i, seed) % m);
  return kSigned[t] ? v - (double)(m / 2) : v;
}

static const double kPremulScalar = 2.0;

/* Reduction input of rank r (of n) for op kind `op`, bounded so that the reduction is exact. */
static double redVal(int t, int op, int n, int r, size_t i, unsigned seed) {
  uint32_t h = hsh(r, i, seed);
  double lim = kExactLimit[t];
  if (op == 2 || op == 3) return (double)(h % 5) - (kSigned[t] ? 2.0 : 0.0); /* max, min */
  if (op == 1) {                                                                /* prod */
    int twos = (int)floor(log2(lim));
    if (n <= twos) return 1.0 + (double)(h % 2);
    return ((i + (size_t)r + seed) % (size_t)n) < (size_t)twos ? 2.0 : 1.0;
  }
  double bound = floor(lim / (op == OP_PREMUL ? kPremulScalar : 1.0)); /* sum, avg, premulsum */
  if (2.0 * n <= bound) return (double)(h % 3);
  if ((double)n <= bound) return (double)(h % 2);
  return ((i + (size_t)r + seed) % (size_t)n) < (size_t)bound ? 1.0 : 0.0;
}

static double redExpect(int t, int op, int n, size_t i, unsigned seed) {
  double acc = redVal(t, op, n, 0, i, seed);
  for (int q = 1; q < n; ++q) {
    double v = redVal(t, op, n, q, i, seed);
    switch (op) {
      case 1: acc *= v; break;
      case 2: acc = v > acc ? v : acc; break;
      case 3: acc = v < acc ? v : acc; break;
      default: acc += v; break;
    }
  }
  if (op == 4) acc = kFloat[t] ? acc / n : trunc(acc / n);
  if (op == OP_PREMUL) acc *= kPremulScalar;
  return acc;
}

/* ---- ranks, drivers, failures -------------------------------------------------------------------- */

typedef struct {
  ncclComm_t comm;
  int rank, nranks;
  long checks, failures;
  char firstFailure[512];
  char* sbuf; /* page-aligned host memory */
  char* rbuf;
  double* expect;
  size_t capElems;
  ncclRedOp_t op; /* premulsum op of the current case */
  char scalar[8];
} Rank;

/* The ranks one thread drives: one (procs, threads) or all (initall, groupinit). */
typedef struct {
  Rank* r;
  int L;
  int nranks;
} Driver;

static void failf(Rank* R, const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (R->failures == 0) snprintf(R->firstFailure, sizeof R->firstFailure, "%s", msg);
  if (R->failures < 10) fprintf(stderr, "rank %d: FAIL %s\n", R->rank, msg);
  R->failures++;
}

static void pass(Rank* R) { R->checks++; }

static int expectRes(Rank* R, ncclResult_t got, ncclResult_t want, const char* what) {
  if (got != want) {
    failf(R, "%s: returned %d (%s), expected %d; last error: %s", what, (int)got,
          ncclGetErrorString(got), (int)want, ncclGetLastError(R->comm));
    return 0;
  }
  return 1;
}

static void groupBegin(Driver* D) {
  if (D->L > 1) expectRes(&D->r[0], ncclGroupStart(), ncclSuccess, "ncclGroupStart");
}
static void groupEnd(Driver* D, const char* what) {
  if (D->L > 1) {
    char buf[300];
    snprintf(buf, sizeof buf, "ncclGroupEnd after %s", what);
    expectRes(&D->r[0], ncclGroupEnd(), ncclSuccess, buf);
  }
}

/* ---- one collective case ------------------------------------------------------------------------ */

typedef enum { AllReduce, Broadcast, Bcast, Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter } Coll;
static const char* const kCollName[] = {"AllReduce", "Broadcast",     "Bcast",    "Reduce", "AllGather",
                                        "ReduceScatter", "AlltoAll", "Gather", "Scatter"};

typedef struct {
  Coll c;
  int t, op; /* op = -1 for data movement */
  size_t count;
  int root;
  int inplace;
  int nullNonRoot; /* pass NULL for the buffer a non-root does not use */
  unsigned seed;
} Case;

static void describe(const Case* k, char* out, size_t n) {
  snprintf(out, n, "%s dtype=%s op=%s count=%zu root=%d inplace=%d%s", kCollName[k->c],
           kTypeName[k->t], k->op >= 0 ? kOpName[k->op] : "-", k->count, k->root, k->inplace,
           k->nullNonRoot ? " null-nonroot" : "");
}

static int isReduction(Coll c) { return c == AllReduce || c == Reduce || c == ReduceScatter; }

/* Compares `count` elements of buf with R->expect; exact unless avgTol. */
static int compareBuf(Rank* R, const char* label, const char* what, const void* buf, int t, size_t count,
                      int avgTol) {
  for (size_t i = 0; i < count; ++i) {
    double g = getElem(buf, i, t), e = R->expect[i];
    int ok = (g == e);
    if (!ok && avgTol) {
      double tol = kEps[t] * (R->nranks + 1) * (fabs(e) > 1 ? fabs(e) : 1);
      ok = fabs(g - e) <= tol;
    }
    if (!ok) {
      failf(R, "%s: %s element %zu is %g, expected %g", label, what, i, g, e);
      return 0;
    }
  }
  return 1;
}

static int checkGuard(Rank* R, const char* label, const char* what, const void* end) {
  const unsigned char* g = (const unsigned char*)end;
  for (int i = 0; i < GUARD; ++i)
    if (g[i] != SENTINEL) {
      failf(R, "%s: %s written past its end (byte %d after the last element)", label, what, i);
      return 0;
    }
  return 1;
}

static int checkUntouched(Rank* R, const char* label, const char* what, const void* buf, size_t bytes) {
  const unsigned char* g = (const unsigned char*)buf;
  for (size_t i = 0; i < bytes; ++i)
    if (g[i] != SENTINEL) {
      failf(R, "%s: %s modified at byte %zu though this rank does not receive", label, what, i);
      return 0;
    }
  return 1;
}

static ncclResult_t makePremul(Rank* R, int t, unsigned seed) {
  /* Alternate residences: host-immediate must be read now (overwrite afterwards to prove it);
   * device residence with a host pointer is read at creation on strata's host path. */
  ncclScalarResidence_t res = (seed & 1) ? ncclScalarDevice : ncclScalarHostImmediate;
  setElem(R->scalar, 0, t, kPremulScalar);
  ncclResult_t rc = ncclRedOpCreatePreMulSum(&R->op, R->scalar, (ncclDataType_t)t, res, R->comm);
  if (res == ncclScalarHostImmediate) setElem(R->scalar, 0, t, 3.0);
  return rc;
}

static void runCase(Driver* D, const Case* k) {
  const int n = D->nranks, t = k->t;
  const size_t c = k->count, ts = kSize[t];
  char label[200];
  describe(k, label, sizeof label);
  const void* sp[64];
  void* rp[64];
  int opOk[64];
  const char* inPtr[64];
  size_t inElems[64];

  /* Fill inputs and sentinels. */
  for (int l = 0; l < D->L; ++l) {
    Rank* R = &D->r[l];
    const int r = R->rank, root = k->root, amRoot = (r == root);
    memset(R->rbuf, SENTINEL, R->capElems * ts + GUARD);
    memset(R->sbuf, SENTINEL, R->capElems * ts + GUARD);
    size_t sendElems = c;
    if (k->c == ReduceScatter || k->c == AlltoAll || (k->c == Scatter && amRoot)) sendElems = (size_t)n * c;
    char* in = R->sbuf; /* where the inputs go */
    sp[l] = R->sbuf;
    rp[l] = R->rbuf;
    switch (k->c) {
      case AllReduce: case Reduce:
        if (k->inplace) { in = R->rbuf; sp[l] = R->rbuf; }
        if (k->c == Reduce && !amRoot && !k->inplace && k->nullNonRoot) rp[l] = NULL;
        break;
      case Broadcast:
        if (k->inplace) { in = R->rbuf; sp[l] = R->rbuf; if (!amRoot) in = NULL; }
        else if (!amRoot && k->nullNonRoot) { sp[l] = NULL; in = NULL; }
        break;
      case Bcast:
        in = amRoot ? R->rbuf : NULL;
        sp[l] = R->rbuf;
        break;
      case AllGather:
        if (k->inplace) { in = R->rbuf + (size_t)r * c * ts; sp[l] = in; }
        break;
      case ReduceScatter:
        if (k->inplace) { in = R->rbuf; sp[l] = R->rbuf; rp[l] = R->rbuf + (size_t)r * c * ts; }
        break;
      case AlltoAll:
        break;
      case Gather:
        if (k->inplace && amRoot) { in = R->rbuf + (size_t)root * c * ts; sp[l] = in; }
        if (!amRoot && k->nullNonRoot) rp[l] = NULL;
        break;
      case Scatter:
        if (!amRoot) {
          in = NULL;
          if (k->nullNonRoot) sp[l] = NULL;
        } else if (k->inplace) {
          in = R->rbuf; sp[l] = R->rbuf; rp[l] = R->rbuf + (size_t)root * c * ts;
        }
        break;
    }
    inPtr[l] = in;
    inElems[l] = sendElems;
    if (in)
      for (size_t i = 0; i < sendElems; ++i)
        setElem(in, i, t, isReduction(k->c) ? redVal(t, k->op, n, r, i, k->seed) : moveVal(t, r, i, k->seed));
    opOk[l] = 1;
    R->op = (ncclRedOp_t)(k->op < 0 ? 0 : k->op);
    if (k->op == OP_PREMUL) opOk[l] = expectRes(R, makePremul(R, t, k->seed), ncclSuccess, "ncclRedOpCreatePreMulSum");
  }

  /* Issue the call on every local rank (grouped when one thread drives several). */
  groupBegin(D);
  for (int l = 0; l < D->L; ++l) {
    Rank* R = &D->r[l];
    ncclDataType_t dt = (ncclDataType_t)t;
    ncclResult_t rc = ncclSuccess;
    switch (k->c) {
      case AllReduce: rc = ncclAllReduce(sp[l], rp[l], c, dt, R->op, R->comm, NULL); break;
      case Broadcast: rc = ncclBroadcast(sp[l], rp[l], c, dt, k->root, R->comm, NULL); break;
      case Bcast: rc = ncclBcast(rp[l], c, dt, k->root, R->comm, NULL); break;
      case Reduce: rc = ncclReduce(sp[l], rp[l], c, dt, R->op, k->root, R->comm, NULL); break;
      case AllGather: rc = ncclAllGather(sp[l], rp[l], c, dt, R->comm, NULL); break;
      case ReduceScatter: rc = ncclReduceScatter(sp[l], rp[l], c, dt, R->op, R->comm, NULL); break;
      case AlltoAll: rc = ncclAlltoAll(sp[l], rp[l], c, dt, R->comm, NULL); break;
      case Gather: rc = ncclGather(sp[l], rp[l], c, dt, k->root, R->comm, NULL); break;
      case Scatter: rc = ncclScatter(sp[l], rp[l], c, dt, k->root, R->comm, NULL); break;
    }
    expectRes(R, rc, ncclSuccess, label);
  }
  groupEnd(D, label);

  /* Verify. */
  for (int l = 0; l < D->L; ++l) {
    Rank* R = &D->r[l];
    const int r = R->rank, root = k->root, amRoot = (r == root);
    const long before = R->failures;
    size_t outElems = 0; /* elements expected in rbuf-relative output region rp */
    const char* out = (const char*)rp[l];
    switch (k->c) {
      case AllReduce:
        for (size_t i = 0; i < c; ++i) R->expect[i] = redExpect(t, k->op, n, i, k->seed);
        outElems = c;
        break;
      case Reduce:
        if (amRoot) {
          for (size_t i = 0; i < c; ++i) R->expect[i] = redExpect(t, k->op, n, i, k->seed);
          outElems = c;
        } else if (!k->inplace && rp[l]) {
          checkUntouched(R, label, "recvbuff", R->rbuf, c * ts);
        }
        break;
      case Broadcast: case Bcast:
        for (size_t i = 0; i < c; ++i) R->expect[i] = moveVal(t, root, i, k->seed);
        outElems = c;
        break;
      case AllGather:
        for (int q = 0; q < n; ++q)
          for (size_t i = 0; i < c; ++i) R->expect[(size_t)q * c + i] = moveVal(t, q, i, k->seed);
        outElems = (size_t)n * c;
        break;
      case ReduceScatter:
        for (size_t i = 0; i < c; ++i) R->expect[i] = redExpect(t, k->op, n, (size_t)r * c + i, k->seed);
        outElems = c;
        break;
      case AlltoAll:
        for (int q = 0; q < n; ++q)
          for (size_t i = 0; i < c; ++i)
            R->expect[(size_t)q * c + i] = moveVal(t, q, (size_t)r * c + i, k->seed);
        outElems = (size_t)n * c;
        break;
      case Gather:
        if (amRoot) {
          for (int q = 0; q < n; ++q)
            for (size_t i = 0; i < c; ++i) R->expect[(size_t)q * c + i] = moveVal(t, q, i, k->seed);
          outElems = (size_t)n * c;
        } else if (rp[l]) {
          checkUntouched(R, label, "recvbuff", R->rbuf, (size_t)n * c * ts);
        }
        break;
      case Scatter:
        for (size_t i = 0; i < c; ++i) R->expect[i] = moveVal(t, root, (size_t)r * c + i, k->seed);
        outElems = c;
        break;
    }
    /* Receivers: every rank, except for Reduce/Gather where only the root receives. */
    const int receives = !(k->c == Reduce || k->c == Gather) || amRoot;
    if (receives && out) {
      compareBuf(R, label, "result", out, t, outElems, k->op == 4 && kFloat[t]);
      /* Nothing past the output (for in-place RS/Scatter: past the whole shared buffer). */
      const char* end = out + outElems * ts;
      if (k->inplace && (k->c == ReduceScatter || k->c == Scatter)) end = R->rbuf + (size_t)n * c * ts;
      checkGuard(R, label, "recvbuff", end);
    } else if (receives) {
      failf(R, "%s: internal: no output buffer", label);
    }
    /* Out of place: the inputs are left as they were. */
    if (!k->inplace && inPtr[l] == R->sbuf) {
      for (size_t i = 0; i < inElems[l]; ++i)
        R->expect[i] = isReduction(k->c) ? redVal(t, k->op, n, r, i, k->seed) : moveVal(t, r, i, k->seed);
      compareBuf(R, label, "sendbuff (must be unchanged)", R->sbuf, t, inElems[l], 0);
    }
    if (k->op == OP_PREMUL && opOk[l]) expectRes(R, ncclRedOpDestroy(R->op, R->comm), ncclSuccess, "ncclRedOpDestroy");
    if (R->failures == before) pass(R);
  }
}

/* ---- grouped send/recv: all-to-allv with per-peer counts ---------------------------------------- */

static size_t a2avCount(int s, int d, unsigned seed, size_t unit) {
  return (size_t)((s * 7 + d * 3 + (int)seed) % 6) * unit;
}

static void runAlltoallv(Driver* D, int t, unsigned seed, size_t unit) {
  const int n = D->nranks;
  const size_t ts = kSize[t];
  char label[160];
  snprintf(label, sizeof label, "Send/Recv all-to-allv dtype=%s unit=%zu seed=%u", kTypeName[t], unit, seed);
  for (int l = 0; l < D->L; ++l) {
    Rank* R = &D->r[l];
    memset(R->rbuf, SENTINEL, R->capElems * ts + GUARD);
    size_t off = 0;
    for (int d = 0; d < n; ++d) {
      size_t cnt = a2avCount(R->rank, d, seed, unit);
      for (size_t i = 0; i < cnt; ++i) setElem(R->sbuf, off + i, t, moveVal(t, R->rank, (size_t)d * 100003 + i, seed));
      off += cnt;
    }
  }
  expectRes(&D->r[0], ncclGroupStart(), ncclSuccess, "ncclGroupStart (send/recv)");
  for (int l = 0; l < D->L; ++l) {
    Rank* R = &D->r[l];
    size_t soff = 0, roff = 0;
    for (int p = 0; p < n; ++p) {
      size_t sc = a2avCount(R->rank, p, seed, unit), rc = a2avCount(p, R->rank, seed, unit);
      expectRes(R, ncclSend(R->sbuf + soff * ts, sc, (ncclDataType_t)t, p, R->comm, NULL), ncclSuccess, label);
      expectRes(R, ncclRecv(R->rbuf + roff * ts, rc, (ncclDataType_t)t, p, R->comm, NULL), ncclSuccess, label);
      soff += sc;
      roff += rc;
    }
  }
  expectRes(&D->r[0], ncclGroupEnd(), ncclSuccess, "ncclGroupEnd (send/recv)");
  for (int l = 0; l < D->L; ++l) {
    Rank* R = &D->r[l];
    const long before = R->failures;
    size_t roff = 0;
    for (int s = 0; s < n; ++s) {
      size_t cnt = a2avCount(s, R->rank, seed, unit);
      for (size_t i = 0; i < cnt; ++i) R->expect[roff + i] = moveVal(t, s, (size_t)R->rank * 100003 + i, seed);
      roff += cnt;
    }
    compareBuf(R, label, "received", R->rbuf, t, roff, 0);
    checkGuard(R, label, "recvbuff", R->rbuf + roff * ts);
    if (R->failures == before) pass(R);
  }
}

/* ---- the collective matrix ---------------------------------------------------------------------- */

static void runMatrix(Driver* D) {
  const int n = D->nranks;
  static const size_t kCounts[] = {1, 7, 1000, 0, 7, 1000, 1, 7};
  const size_t big = 65537, bigPerRank = (65537 / (size_t)n) | 1; /* n-fold collectives: ~65537 total */
  unsigned seed = 1;
  Case k;

  for (int t = 0; t < NTYPES; ++t)
    for (int op = 0; op < NOPS; ++op)
      for (int ip = 0; ip < 2; ++ip) {
        k = (Case){AllReduce, t, op, kCounts[(t * 5 + op * 2 + ip) % 8], -1, ip, 0, seed++};
        runCase(D, &k);
      }
  for (int t = 0; t < NTYPES; ++t) {
    k = (Case){AllReduce, t, t % NOPS, big, -1, t % 2, 0, seed++};
    runCase(D, &k);
  }

  for (int t = 0; t < NTYPES; ++t)
    for (int op = 0; op < NOPS; ++op) {
      int i = t * NOPS + op;
      k = (Case){Reduce, t, op, kCounts[i % 8], i % n, i % 3 == 0, i % 2, seed++};
      runCase(D, &k);
      k = (Case){ReduceScatter, t, op, kCounts[(i + 3) % 8], -1, i % 2, 0, seed++};
      runCase(D, &k);
    }
  for (int root = 0; root < n; ++root) {
    k = (Case){Reduce, 7, 0, 1000, root, root % 2, 1, seed++};
    runCase(D, &k);
    k = (Case){Reduce, 2, 2, 7, root, 0, 0, seed++};
    runCase(D, &k);
  }
  for (int t = 0; t < NTYPES; t += 3) {
    k = (Case){Reduce, t, (t + 1) % NOPS, big, t % n, 0, 1, seed++};
    runCase(D, &k);
    k = (Case){ReduceScatter, t, (t + 2) % NOPS, bigPerRank, -1, t % 2, 0, seed++};
    runCase(D, &k);
  }

  for (int t = 0; t < NTYPES; ++t)
    for (int ip = 0; ip < 2; ++ip) {
      int i = t * 2 + ip;
      k = (Case){AllGather, t, -1, kCounts[i % 8], -1, ip, 0, seed++};
      runCase(D, &k);
      k = (Case){Broadcast, t, -1, kCounts[(i + 2) % 8], i % n, ip, i % 3 == 1, seed++};
      runCase(D, &k);
    }
  for (int root = 0; root < n; ++root) {
    k = (Case){Broadcast, 2, -1, 1000, root, root % 2, root % 3 == 0, seed++};
    runCase(D, &k);
    k = (Case){Bcast, (root * 5) % NTYPES, -1, kCounts[root % 8], root, 1, 0, seed++};
    runCase(D, &k);
  }
  for (int t = 1; t < NTYPES; t += 4) {
    k = (Case){AllGather, t, -1, bigPerRank, -1, t % 2, 0, seed++};
    runCase(D, &k);
    k = (Case){Broadcast, t, -1, big, n - 1, 0, 0, seed++};
    runCase(D, &k);
  }

  for (int t = 0; t < NTYPES; ++t) {
    k = (Case){AlltoAll, t, -1, kCounts[t % 8], -1, 0, 0, seed++};
    runCase(D, &k);
    k = (Case){Gather, t, -1, kCounts[(t + 1) % 8], (t * 3) % n, t % 2, t % 3 == 0, seed++};
    runCase(D, &k);
    k = (Case){Scatter, t, -1, kCounts[(t + 2) % 8], (t * 5) % n, t % 2, t % 3 == 1, seed++};
    runCase(D, &k);
  }
  for (int root = 0; root < n; ++root)
    for (int ip = 0; ip < 2; ++ip) {
      k = (Case){Gather, (root + ip * 7) % NTYPES, -1, 7, root, ip, ip == 0, seed++};
      runCase(D, &k);
      k = (Case){Scatter, (root * 2 + ip) % NTYPES, -1, 1000, root, ip, ip == 0, seed++};
      runCase(D, &k);
    }
  k = (Case){AlltoAll, 7, -1, bigPerRank, -1, 0, 0, seed++};
  runCase(D, &k);
  k = (Case){Gather, 8, -1, bigPerRank, 0, 1, 0, seed++};
  runCase(D, &k);
  k = (Case){Scatter, 6, -1, bigPerRank, n - 1, 0, 1, seed++};
  runCase(D, &k);

  static const int kA2avTypes[] = {0, 2, 6, 8, 9, 11};
  for (int i = 0; i < 6; ++i) runAlltoallv(D, kA2avTypes[i], seed++, (size_t)1 + (size_t)i * 3);
  runAlltoallv(D, 7, seed++, 997);
}

/* ---- API surface, split, bad arguments ---------------------------------------------------------- */

/* A sum all-reduce of (rank + 1) over int32 through the pnccl alias, checked: the communicator works. */
static void checkAllReduceWorks(Driver* D, ncclComm_t* comms, const int* subRank, int subN, const char* what) {
  int32_t in[64][5], out[64][5];
  groupBegin(D);
  for (int l = 0; l < D->L; ++l) {
    if (!comms[l]) continue;
    for (int i = 0; i < 5; ++i) in[l][i] = (subRank[l] + 1) * (i + 1);
    expectRes(&D->r[l], pncclAllReduce(in[l], out[l], 5, ncclInt32, ncclSum, comms[l], NULL), ncclSuccess, what);
  }
  groupEnd(D, what);
  for (int l = 0; l < D->L; ++l) {
    if (!comms[l]) continue;
    const long before = D->r[l].failures;
    for (int i = 0; i < 5; ++i)
      if (out[l][i] != subN * (subN + 1) / 2 * (i + 1)) {
        failf(&D->r[l], "%s: element %d is %d, expected %d", what, i, out[l][i], subN * (subN + 1) / 2 * (i + 1));
        break;
      }
    if (D->r[l].failures == before) pass(&D->r[l]);
  }
}

static void expectInvalid(Rank* R, ncclResult_t rc, const char* what) {
  if (!expectRes(R, rc, ncclInvalidArgument, what)) return;
  const char* msg = ncclGetLastError(R->comm);
  if (msg == NULL || msg[0] == '\0') {
    failf(R, "%s: ncclGetLastError is empty after ncclInvalidArgument", what);
    return;
  }
  pass(R);
}

static void runApiChecks(Driver* D) {
  const int n = D->nranks;
  for (int l = 0; l < D->L; ++l) {
    Rank* R = &D->r[l];
    int v = 0, cnt = 0, rk = -1, dev = -2;
    if (expectRes(R, ncclGetVersion(&v), ncclSuccess, "ncclGetVersion")) {
      if (v != NCCL_VERSION_CODE) failf(R, "ncclGetVersion: %d, header says %d", v, NCCL_VERSION_CODE);
      else pass(R);
    }
    int pv = 0, pcnt = 0; /* the profiling aliases are the same functions */
    if (expectRes(R, pncclGetVersion(&pv), ncclSuccess, "pncclGetVersion") &&
        expectRes(R, pncclCommCount(R->comm, &pcnt), ncclSuccess, "pncclCommCount")) {
      if (pv != NCCL_VERSION_CODE || pcnt != n) failf(R, "pncclGetVersion/pncclCommCount: %d/%d", pv, pcnt);
      else pass(R);
    }
    if (expectRes(R, ncclCommCount(R->comm, &cnt), ncclSuccess, "ncclCommCount") &&
        expectRes(R, ncclCommUserRank(R->comm, &rk), ncclSuccess, "ncclCommUserRank")) {
      if (cnt != n || rk != R->rank) failf(R, "ncclCommCount/UserRank: %d/%d, expected %d/%d", cnt, rk, n, R->rank);
      else pass(R);
    }
    if (expectRes(R, ncclCommCuDevice(R->comm, &dev), ncclSuccess, "ncclCommCuDevice")) {
      if (dev < -1) failf(R, "ncclCommCuDevice: device not set");
      else pass(R);
    }
    for (int e = 0; e < (int)ncclNumResults; ++e) {
      const char* s = ncclGetErrorString((ncclResult_t)e);
      if (s == NULL || s[0] == '\0') failf(R, "ncclGetErrorString(%d) is empty", e);
    }
    pass(R);
    ncclResult_t async = ncclInternalError;
    if (expectRes(R, ncclCommGetAsyncError(R->comm, &async), ncclSuccess, "ncclCommGetAsyncError")) {
      if (async != ncclSuccess) failf(R, "ncclCommGetAsyncError: %d on a healthy communicator", (int)async);
      else pass(R);
    }
    void* h = NULL;
    if (expectRes(R, ncclCommRegister(R->comm, R->rbuf, 4096, &h), ncclSuccess, "ncclCommRegister") &&
        expectRes(R, ncclCommDeregister(R->comm, h), ncclSuccess, "ncclCommDeregister"))
      pass(R);
    /* ncclMemAlloc: device memory where a GPU is (not touched here), else page-aligned host memory. */
    void* m = NULL;
    if (ncclMemAlloc(&m, 12345) != ncclSuccess || m == NULL) failf(R, "ncclMemAlloc of 12345 bytes failed");
    else if (((uintptr_t)m & 255) != 0) failf(R, "ncclMemAlloc: %p is not 256-byte aligned", m);
    else pass(R);
    if (m && ncclMemFree(m) != ncclSuccess) failf(R, "ncclMemFree failed");
  }

  /* Bad arguments: each fails at once (no communication), with a last-error text. */
  for (int l = 0; l < D->L; ++l) {
    Rank* R = &D->r[l];
    int32_t a[8] = {0}, b[8];
    int cnt = 0;
    ncclUniqueId zeroId;
    memset(&zeroId, 0, sizeof zeroId);
    ncclComm_t none = NULL;
    expectInvalid(R, ncclAllReduce(a, b, 8, ncclInt32, ncclSum, NULL, NULL), "bad args: ncclAllReduce comm=NULL");
    expectInvalid(R, ncclAllReduce(a, b, 8, (ncclDataType_t)99, ncclSum, R->comm, NULL), "bad args: ncclAllReduce dtype=99");
    expectInvalid(R, ncclAllReduce(a, b, 8, (ncclDataType_t)-1, ncclSum, R->comm, NULL), "bad args: ncclAllReduce dtype=-1");
    expectInvalid(R, ncclAllReduce(a, b, 8, ncclInt32, (ncclRedOp_t)-1, R->comm, NULL), "bad args: ncclAllReduce op=-1");
    expectInvalid(R, ncclReduce(a, b, 8, ncclInt32, ncclSum, n, R->comm, NULL), "bad args: ncclReduce root=nranks");
    expectInvalid(R, ncclBroadcast(a, b, 8, ncclInt32, -1, R->comm, NULL), "bad args: ncclBroadcast root=-1");
    expectInvalid(R, ncclGather(a, b, 8, ncclInt32, n + 3, R->comm, NULL), "bad args: ncclGather root out of range");
    expectInvalid(R, ncclSend(a, 8, ncclInt32, n, R->comm, NULL), "bad args: ncclSend peer=nranks");
    expectInvalid(R, ncclRecv(b, 8, ncclInt32, -1, R->comm, NULL), "bad args: ncclRecv peer=-1");
    expectInvalid(R, ncclAllReduce(NULL, b, 5, ncclInt32, ncclSum, R->comm, NULL), "bad args: ncclAllReduce sendbuff=NULL count=5");
    expectInvalid(R, ncclAllGather(a, NULL, 2, ncclFloat32, R->comm, NULL), "bad args: ncclAllGather recvbuff=NULL count=2");
    expectInvalid(R, ncclReduceScatter(a, b, 1, (ncclDataType_t)12, ncclSum, R->comm, NULL), "bad args: ncclReduceScatter dtype=12");
    expectInvalid(R, ncclCommCount(NULL, &cnt), "bad args: ncclCommCount comm=NULL");
    expectInvalid(R, ncclRedOpDestroy(ncclSum, R->comm), "bad args: ncclRedOpDestroy of a built-in op");
    expectInvalid(R, ncclCommInitRank(&none, n, zeroId, n), "bad args: ncclCommInitRank rank=nranks");
    ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
    bad.magic = 0;
    expectInvalid(R, ncclCommInitRankConfig(&none, n, zeroId, 0, &bad), "bad args: ncclCommInitRankConfig bad magic");
  }
  /* An op value that names no created op reaches the core, which must reject it. One thread with
   * several ranks groups the calls so that a core that does not validate cannot deadlock here. */
  {
    int32_t a[64][4] = {{0}}, b[64][4];
    if (D->L > 1) ncclGroupStart();
    for (int l = 0; l < D->L; ++l)
      expectInvalid(&D->r[l], ncclAllReduce(a[l], b[l], 4, ncclInt32, (ncclRedOp_t)99, D->r[l].comm, NULL),
                    "bad args: ncclAllReduce op=99 (no such user op)");
    if (D->L > 1) {
      ncclResult_t rc = ncclGroupEnd();
      if (rc != ncclSuccess && rc != ncclInvalidArgument)
        failf(&D->r[0], "ncclGroupEnd after a rejected call: %d (%s)", (int)rc, ncclGetErrorString(rc));
    }
  }
  ncclComm_t comms[64];
  int ranks[64];
  for (int l = 0; l < D->L; ++l) {
    comms[l] = D->r[l].comm;
    ranks[l] = D->r[l].rank;
  }
  checkAllReduceWorks(D, comms, ranks, n, "ncclAllReduce after the bad-argument calls");
}

/* Checks local to this process: no communication with the other processes of the job. */
static void runLocalChecks(Rank* R) {
  ncclResult_t rc = ncclGroupEnd(); /* no matching ncclGroupStart */
  if (rc != ncclInvalidUsage) failf(R, "ncclGroupEnd without ncclGroupStart: %d, expected ncclInvalidUsage", (int)rc);
  else if (ncclGetLastError(NULL)[0] == '\0') failf(R, "ncclGroupEnd without ncclGroupStart: no last error");
  else pass(R);

  void* p = (void*)1;
  if (ncclMemAlloc(&p, 0) != ncclSuccess) failf(R, "ncclMemAlloc of 0 bytes failed");
  else pass(R);

  ncclWindow_t win = NULL;
  if (expectRes(R, ncclCommWindowRegister(R->comm, R->rbuf, 4096, &win, NCCL_WIN_DEFAULT), ncclSuccess, "ncclCommWindowRegister") &&
      expectRes(R, ncclCommWindowDeregister(R->comm, win), ncclSuccess, "ncclCommWindowDeregister"))
    pass(R);

  int dup[2] = {1, 1}, devs[2] = {3, 5};
  ncclComm_t two[2] = {NULL, NULL};
  expectInvalid(R, ncclCommInitAll(two, 2, dup), "bad args: ncclCommInitAll duplicate device");
  /* A device list is accepted: two more host ranks in this process, driven by one thread. */
  if (expectRes(R, ncclCommInitAll(two, 2, devs), ncclSuccess, "ncclCommInitAll(2, devlist)")) {
    int32_t in[2][3] = {{1, 2, 3}, {10, 20, 30}}, out[2][3];
    ncclGroupStart();
    for (int i = 0; i < 2; ++i) expectRes(R, ncclAllReduce(in[i], out[i], 3, ncclInt32, ncclMax, two[i], NULL), ncclSuccess, "ncclAllReduce on ncclCommInitAll(devlist)");
    expectRes(R, ncclGroupEnd(), ncclSuccess, "ncclGroupEnd on ncclCommInitAll(devlist)");
    if (out[0][0] != 10 || out[1][2] != 30) failf(R, "ncclAllReduce max on ncclCommInitAll(devlist): %d %d", out[0][0], out[1][2]);
    else pass(R);
    for (int i = 0; i < 2; ++i) expectRes(R, ncclCommAbort(two[i]), ncclSuccess, "ncclCommAbort");
  }
}

static void runSplitChecks(Driver* D) {
  const int n = D->nranks;
  ncclComm_t sub[64];
  int subRank[64];
  /* Split by parity, key reversing the order: members sorted by descending old rank. The config
   * has the size of an older, shorter layout: fields past it (commName) must not be read. */
  ncclConfig_t old = NCCL_CONFIG_INITIALIZER;
  old.size = offsetof(ncclConfig_t, splitShare);
  old.commName = (const char*)(uintptr_t)1; /* would crash if read */
  groupBegin(D);
  for (int l = 0; l < D->L; ++l) {
    int r = D->r[l].rank;
    sub[l] = NULL;
    expectRes(&D->r[l], ncclCommSplit(D->r[l].comm, r % 2, n - r, &sub[l], &old), ncclSuccess, "ncclCommSplit parity (old config size)");
  }
  groupEnd(D, "ncclCommSplit parity");
  int subN0 = (n + 1) / 2, subN1 = n / 2;
  int okAll = 1;
  for (int l = 0; l < D->L; ++l) {
    Rank* R = &D->r[l];
    int r = R->rank, color = r % 2, expN = color ? subN1 : subN0, expRank = 0, cnt = -1, rk = -1;
    for (int q = r + 2; q < n; q += 2) expRank++;
    subRank[l] = expRank;
    if (!sub[l]) { failf(R, "ncclCommSplit parity: no communicator returned"); okAll = 0; continue; }
    ncclCommCount(sub[l], &cnt);
    ncclCommUserRank(sub[l], &rk);
    if (cnt != expN || rk != expRank) {
      failf(R, "ncclCommSplit parity: size/rank %d/%d, expected %d/%d", cnt, rk, expN, expRank);
      okAll = 0;
    } else {
      pass(R);
    }
  }
  if (okAll) {
    /* Each parity class reduces separately: (subRank+1) summed over its own members. */
    int32_t in[64][3], out[64][3];
    groupBegin(D);
    for (int l = 0; l < D->L; ++l) {
      for (int i = 0; i < 3; ++i) in[l][i] = subRank[l] + 1 + i;
      expectRes(&D->r[l], ncclAllReduce(in[l], out[l], 3, ncclInt32, ncclSum, sub[l], NULL), ncclSuccess, "ncclAllReduce on split comm");
    }
    groupEnd(D, "ncclAllReduce on split comm");
    for (int l = 0; l < D->L; ++l) {
      int m = D->r[l].rank % 2 ? subN1 : subN0, bad = 0;
      for (int i = 0; i < 3; ++i)
        if (out[l][i] != m * (m + 1) / 2 + m * i) bad = 1;
      if (bad) failf(&D->r[l], "ncclAllReduce on split comm: got %d, expected %d", out[l][0], m * (m + 1) / 2);
      else pass(&D->r[l]);
    }
  }
  for (int l = 0; l < D->L; ++l)
    if (sub[l]) expectRes(&D->r[l], ncclCommDestroy(sub[l]), ncclSuccess, "ncclCommDestroy split comm");

  /* Second split: the last rank opts out; the rest get a named, non-blocking communicator. */
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.commName = "abi-split";
  groupBegin(D);
  for (int l = 0; l < D->L; ++l) {
    int r = D->r[l].rank;
    int color = (n > 1 && r == n - 1) ? NCCL_SPLIT_NOCOLOR : 7;
    sub[l] = NULL;
    ncclResult_t rc = ncclCommSplit(D->r[l].comm, color, r, &sub[l], &cfg);
    if (rc != ncclInProgress) expectRes(&D->r[l], rc, ncclSuccess, "ncclCommSplit NOCOLOR non-blocking");
  }
  groupEnd(D, "ncclCommSplit NOCOLOR");
  int m = n > 1 ? n - 1 : 1;
  for (int l = 0; l < D->L; ++l) {
    Rank* R = &D->r[l];
    int r = R->rank;
    subRank[l] = r;
    if (n > 1 && r == n - 1) {
      if (sub[l] != NULL) failf(R, "ncclCommSplit NCCL_SPLIT_NOCOLOR: a communicator was returned");
      else pass(R);
      continue;
    }
    if (!sub[l]) { failf(R, "ncclCommSplit non-blocking: no communicator returned"); continue; }
    ncclResult_t async = ncclInProgress;
    for (int spin = 0; spin < 1000000 && async == ncclInProgress; ++spin)
      if (ncclCommGetAsyncError(sub[l], &async) != ncclSuccess) break;
    if (async != ncclSuccess) failf(R, "ncclCommSplit non-blocking: async state %d", (int)async);
    else pass(R);
  }
  checkAllReduceWorks(D, sub, subRank, m, "ncclAllReduce on the non-blocking split comm");
  for (int l = 0; l < D->L; ++l)
    if (sub[l]) expectRes(&D->r[l], ncclCommDestroy(sub[l]), ncclSuccess, "ncclCommDestroy split comm 2");

  /* Shrink without rank 0 (NCCL 2.27; older NVIDIA headers lack it): rank 0 takes no part; the
   * others renumber from 0. */
#ifdef NCCL_SHRINK_DEFAULT
  if (n > 1) {
    int excluded[1] = {0};
    groupBegin(D);
    for (int l = 0; l < D->L; ++l) {
      sub[l] = NULL;
      subRank[l] = D->r[l].rank - 1;
      if (D->r[l].rank == 0) continue;
      expectRes(&D->r[l], ncclCommShrink(D->r[l].comm, excluded, 1, &sub[l], NULL, NCCL_SHRINK_DEFAULT), ncclSuccess,
                "ncclCommShrink without rank 0");
    }
    groupEnd(D, "ncclCommShrink");
    for (int l = 0; l < D->L; ++l) {
      Rank* R = &D->r[l];
      int cnt = -1, rk = -1;
      if (R->rank == 0) continue;
      if (!sub[l]) { failf(R, "ncclCommShrink: no communicator returned"); continue; }
      ncclCommCount(sub[l], &cnt);
      ncclCommUserRank(sub[l], &rk);
      if (cnt != n - 1 || rk != R->rank - 1) failf(R, "ncclCommShrink: size/rank %d/%d, expected %d/%d", cnt, rk, n - 1, R->rank - 1);
      else pass(R);
    }
    checkAllReduceWorks(D, sub, subRank, n - 1, "ncclAllReduce on the shrunk comm");
    for (int l = 0; l < D->L; ++l)
      if (sub[l]) expectRes(&D->r[l], ncclCommDestroy(sub[l]), ncclSuccess, "ncclCommDestroy shrunk comm");
  }
#endif
}

/* ---- setup and modes ---------------------------------------------------------------------------- */

static int setupRank(Rank* R, ncclComm_t comm, int rank, int nranks) {
  memset(R, 0, sizeof *R);
  R->comm = comm;
  R->rank = rank;
  R->nranks = nranks;
  R->capElems = 65537 + (size_t)nranks * 64 + (size_t)nranks * 6 * 997;
  size_t bytes = R->capElems * 8 + GUARD;
  void *s = NULL, *r = NULL;
  if (posix_memalign(&s, 4096, bytes) != 0 || posix_memalign(&r, 4096, bytes) != 0) {
    fprintf(stderr, "rank %d: FAIL cannot allocate %zu bytes\n", rank, bytes);
    return 0;
  }
  R->sbuf = (char*)s;
  R->rbuf = (char*)r;
  R->expect = (double*)malloc(R->capElems * sizeof(double));
  return R->expect != NULL;
}

static void runAll(Driver* D) {
  runApiChecks(D);
  for (int l = 0; l < D->L; ++l) runLocalChecks(&D->r[l]);
  runMatrix(D);
  runSplitChecks(D);
}

static int finish(Driver* D, int destroyComms) {
  int failed = 0;
  for (int l = 0; l < D->L; ++l) {
    Rank* R = &D->r[l];
    if (destroyComms && R->comm) {
      expectRes(R, ncclCommFinalize(R->comm), ncclSuccess, "ncclCommFinalize");
      expectRes(R, ncclCommDestroy(R->comm), ncclSuccess, "ncclCommDestroy");
    }
    free(R->sbuf);
    free(R->rbuf);
    free(R->expect);
    if (R->failures) {
      printf("rank %d: FAILED %ld checks (%ld passed); first: %s\n", R->rank, R->failures, R->checks, R->firstFailure);
      failed = 1;
    } else {
      printf("rank %d: %ld checks passed\n", R->rank, R->checks);
    }
  }
  fflush(stdout);
  return failed;
}

static int envInt(const char* name, int dflt) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : dflt;
}

static int modeProcs(void) {
  int rank = envInt("STRATA_RANK", 0), nranks = envInt("STRATA_WORLD_SIZE", 1);
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  ncclResult_t rc = ncclGetUniqueId(&id);
  if (rc == ncclSuccess) rc = ncclCommInitRank(&comm, nranks, id, rank);
  if (rc != ncclSuccess) {
    fprintf(stderr, "rank %d: FAIL init: %s: %s\n", rank, ncclGetErrorString(rc), ncclGetLastError(NULL));
    return 1;
  }
  Rank R;
  if (!setupRank(&R, comm, rank, nranks)) return 1;
  Driver D = {&R, 1, nranks};
  runAll(&D);
  return finish(&D, 1);
}

typedef struct {
  ncclUniqueId id;
  int rank, nranks, failed;
} ThreadArg;

static void* threadMain(void* p) {
  ThreadArg* a = (ThreadArg*)p;
  ncclComm_t comm = NULL;
  ncclResult_t rc;
  if (a->rank % 2 == 0) {
    rc = ncclCommInitRank(&comm, a->nranks, a->id, a->rank);
  } else {
    /* Odd ranks: a named, non-blocking communicator (strata completes it before returning). */
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    cfg.commName = "abi-threads";
    rc = ncclCommInitRankConfig(&comm, a->nranks, a->id, a->rank, &cfg);
    ncclResult_t async = rc;
    for (int spin = 0; spin < 1000000 && rc == ncclInProgress && async == ncclInProgress; ++spin)
      if (ncclCommGetAsyncError(comm, &async) != ncclSuccess) break;
    if (rc == ncclInProgress) rc = async;
  }
  if (rc != ncclSuccess) {
    fprintf(stderr, "rank %d: FAIL init: %s: %s\n", a->rank, ncclGetErrorString(rc), ncclGetLastError(NULL));
    a->failed = 1;
    return NULL;
  }
  Rank R;
  if (!setupRank(&R, comm, a->rank, a->nranks)) { a->failed = 1; return NULL; }
  Driver D = {&R, 1, a->nranks};
  runAll(&D);
  a->failed = finish(&D, 1);
  return NULL;
}

static int modeThreads(int n) {
  ncclUniqueId id;
  ncclResult_t rc = ncclGetUniqueId(&id);
  if (rc != ncclSuccess) {
    fprintf(stderr, "FAIL ncclGetUniqueId: %s: %s\n", ncclGetErrorString(rc), ncclGetLastError(NULL));
    return 1;
  }
  pthread_t th[64];
  ThreadArg args[64];
  for (int i = 0; i < n; ++i) {
    args[i].id = id;
    args[i].rank = i;
    args[i].nranks = n;
    args[i].failed = 0;
    pthread_create(&th[i], NULL, threadMain, &args[i]);
  }
  int failed = 0;
  for (int i = 0; i < n; ++i) {
    pthread_join(th[i], NULL);
    failed |= args[i].failed;
  }
  return failed;
}

static int modeSingleThread(int n, int useInitAll) {
  ncclComm_t comms[64];
  ncclResult_t rc;
  const char* how = useInitAll ? "ncclCommInitAll" : "grouped ncclCommInitRank";
  if (useInitAll) {
    rc = ncclCommInitAll(comms, n, NULL);
  } else {
    ncclUniqueId id;
    rc = ncclGetUniqueId(&id);
    if (rc == ncclSuccess) rc = ncclGroupStart();
    for (int i = 0; i < n && rc == ncclSuccess; ++i)
      rc = i % 2 ? ncclCommInitRankScalable(&comms[i], n, i, 1, &id, NULL) : ncclCommInitRank(&comms[i], n, id, i);
    ncclResult_t e = ncclGroupEnd();
    if (rc == ncclSuccess) rc = e;
  }
  if (rc != ncclSuccess) {
    fprintf(stderr, "FAIL %s: %s: %s\n", how, ncclGetErrorString(rc), ncclGetLastError(NULL));
    return 1;
  }
  Rank R[64];
  for (int i = 0; i < n; ++i)
    if (!setupRank(&R[i], comms[i], i, n)) return 1;
  Driver D = {R, n, n};
  runAll(&D);
  return finish(&D, 1);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "procs";
  int n = argc > 2 ? atoi(argv[2]) : 0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (strcmp(mode, "procs") == 0) {
    /* strata-run --threads: one process runs the job's ranks as threads (STRATA_NTHREADS). */
    int nthreads = envInt("STRATA_NTHREADS", 0);
    return nthreads > 0 && nthreads <= 64 ? modeThreads(nthreads) : modeProcs();
  }
  if (n < 1 || n > 64) {
    fprintf(stderr, "usage: %s [procs | threads N | initall N | groupinit N]  (1 <= N <= 64)\n", argv[0]);
    return 2;
  }
  if (strcmp(mode, "threads") == 0) return modeThreads(n);
  if (strcmp(mode, "initall") == 0) return modeSingleThread(n, 1);
  if (strcmp(mode, "groupinit") == 0) return modeSingleThread(n, 0);
  fprintf(stderr, "unknown mode %s\n", mode);
  return 2;
}
