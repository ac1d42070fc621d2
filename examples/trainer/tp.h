// tp.h: tensor parallelism (Megatron) and sequence parallelism.
//
// The residual stream lives in the "residual layout": every tp rank holds all N rows (plain TP) or
// its N/tp rows (SP). Column-parallel linears (qkv, mlp.fc) need all rows: `enter` copies (TP) or
// all-gathers (SP) them, and its backward all-reduces (TP) or reduce-scatters (SP) the partial
// input gradients. Row-parallel linears (attn.proj, mlp.proj) produce partial sums: `exit`
// all-reduces (TP) or reduce-scatters (SP) them back into the residual layout; its backward is a
// copy (TP) or an all-gather (SP). With tp = 1 all four are copies.
//
// The vocabulary is split too: each tp rank holds V/tp rows of the tied embedding, looks up only
// its tokens (zeros elsewhere, summed by `exit`), and computes logits for its vocab slice; the
// cross-entropy then needs only per-row max and sums across ranks, never the full logits.
#pragma once

#include <vector>

#include "context.h"

namespace trainer::tp {

/// Rows this rank holds in the residual layout, and the first of them.
inline int resRows(const Ctx& c, int N) { return c.sp ? N / c.tp : N; }
inline int resFirst(const Ctx& c, int N) { return c.sp ? c.tr * (N / c.tp) : 0; }

void enterFwd(Ctx& c, const float* res, float* full, int N);        // (Nr,C) -> (N,C)
void enterBwd(Ctx& c, float* dfull, float* dres, int N);            // dres += reduce(dfull); dfull is clobbered
void exitFwd(Ctx& c, float* partial, float* res, int N);            // res = reduce(partial); partial clobbered
void exitBwd(Ctx& c, const float* dres, float* dfull, int N);       // (Nr,C) -> (N,C)

/// Vocab-parallel cross-entropy on logits (N,Vl). Fills rowMax (N) and stats (N,2); returns the
/// sum of the scored rows' losses (double).
/// tgt: the targets on the lane (device with --device cuda); tgtHost: the same on the host, for
/// the loss sum (read after the stats come back to the host, which waits for the lane).
double crossEntropyFwd(Ctx& c, const float* logits, const int* tgt, const int* tgtHost, int N, Buf& rowMax, Buf& stats);

}  // namespace trainer::tp
