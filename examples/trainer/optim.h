// optim.h: global gradient-norm clipping and AdamW over the elements this rank owns.
//
// The norm is summed in double over fixed blocks of kNormBlock elements of every unit; with ZeRO
// the block sums of all shards are all-gathered and added in unit order, so the norm comes out
// bitwise the same whether a class is sharded or not. Each class's total is counted once (by its
// group's rank 0) and the classes are summed over the world.
#pragma once

#include "context.h"

namespace trainer {

/// Clips and applies one AdamW step (t counts from 1). Returns the gradient norm before clipping.
double optimizerStep(Ctx& c, int t);

}  // namespace trainer
