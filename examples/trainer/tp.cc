// tp.cc: the four region operators of tensor/sequence parallelism and vocab-parallel cross-entropy.
#include "tp.h"

#include <cmath>

#include "kernels.h"

namespace trainer::tp {

void enterFwd(Ctx& c, const float* res, float* full, int N) {
  const size_t Nr = size_t(resRows(c, N)), C = size_t(c.C);
  if (c.sp) c.allGather(c.mesh->tp, res, full, Nr * C);
  else c.ops->copy(full, res, Nr * C * sizeof(float));
}

void enterBwd(Ctx& c, float* dfull, float* dres, int N) {
  const size_t Nr = size_t(resRows(c, N)), C = size_t(c.C);
  if (c.sp) {
    // reduce-scatter in place: this rank's rows land at its own offset of dfull
    c.reduceScatter(c.mesh->tp, dfull, dfull + size_t(c.tr) * Nr * C, Nr * C);
    dfull += size_t(c.tr) * Nr * C;
  } else {
    c.allReduce(c.mesh->tp, dfull, Nr * C);
  }
  c.ops->add(dres, dfull, Nr * C);
}

void exitFwd(Ctx& c, float* partial, float* res, int N) {
  const size_t Nr = size_t(resRows(c, N)), C = size_t(c.C);
  if (c.sp) {
    c.reduceScatter(c.mesh->tp, partial, partial + size_t(c.tr) * Nr * C, Nr * C);
    partial += size_t(c.tr) * Nr * C;
  } else {
    c.allReduce(c.mesh->tp, partial, Nr * C);
  }
  c.ops->copy(res, partial, Nr * C * sizeof(float));
}

void exitBwd(Ctx& c, const float* dres, float* dfull, int N) { enterFwd(c, dres, dfull, N); }

double crossEntropyFwd(Ctx& c, const float* logits, const int* tgt, const int* tgtHost, int N, Buf& rowMax,
                       Buf& stats) {
  rowMax.resize(size_t(N));
  stats.resize(2 * size_t(N));
  c.ops->ceLocalMax(rowMax.data(), logits, N, c.Vl);
  c.allReduce(c.mesh->tp, rowMax.data(), size_t(N), strataMax);
  c.ops->ceLocalStats(stats.data(), logits, rowMax.data(), tgt, N, c.Vl, c.vStart);
  c.allReduce(c.mesh->tp, stats.data(), 2 * size_t(N));
  const std::vector<float> st = stats.toHost();  // a host read: waits for the lane
  double sum = 0;
  for (int n = 0; n < N; ++n)
    if (tgtHost[n] >= 0) sum += double(std::log(st[2 * size_t(n)]) - st[2 * size_t(n) + 1]);
  return sum;
}

}  // namespace trainer::tp
