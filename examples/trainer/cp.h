// cp.h: context parallelism, ring attention.
//
// Each cp rank holds T/cp positions of every sequence: chunk r and chunk 2cp-1-r of 2cp chunks,
// so every rank has the same amount of causal work. Forward: the rank's K,V block travels the
// ring (cp-1 hops) while each rank folds every block into an online softmax (running max and sum,
// flash-attention style) for its own queries. Backward: blocks travel again with a dK,dV
// accumulator; after cp hops each accumulator is back at its owner holding every rank's
// contribution. With cp = 1 this is plain causal attention over one block.
#pragma once

#include <vector>

#include "context.h"

namespace trainer::cp {

/// qkv (N, 3*Cl) rows (b, Tl) in the layout [q heads | k heads | v heads]; pos (Tl) the global
/// positions of this rank's rows. att (N, Cl) out, lse (N, Hl) kept for backward.
void attentionFwd(Ctx& c, const float* qkv, const int* pos, int b, int Tl, float* att, float* lse);
/// dqkv (N, 3*Cl) += gradients, given datt (N, Cl).
void attentionBwd(Ctx& c, const float* qkv, const int* pos, int b, int Tl, const float* att, const float* lse,
                  const float* datt, float* dqkv);

}  // namespace trainer::cp
