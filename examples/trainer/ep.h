// ep.h: mixture-of-experts FFN with expert parallelism.
//
// Router: logits = u @ Wr^T, probs = softmax, each token picks its top-k experts with gate = prob
// (not renormalised). Capacity: with --capacity-factor f > 0 an expert takes at most
// ceil(f * tokens * k / E) assignments of a routing group, in priority (slot, sequence, position);
// the rest are dropped (the residual carries the token). Auxiliary load-balancing loss (Switch):
// aux = coef * E * sum_e frac_e * meanprob_e.
//
// A routing group is one data rank's microbatch (b sequences): its tokens are spread over the tp
// (sequence-parallel slices) and cp ranks, so counts and probabilities are all-reduced, and the
// capacity ranking is all-gathered, over the tp*cp group. That makes routing identical to the
// single-rank run whatever the layout.
//
// Expert parallelism: ep ranks each hold E/ep experts. Tokens go to their experts' owners with an
// all-to-all of counts followed by grouped send/recv (all-to-all-v), run through the expert MLP,
// and come back the same way; the backward pass mirrors both exchanges.
#pragma once

#include <vector>

#include "context.h"

namespace trainer::ep {

struct MoeCache {
  int Ns = 0;
  std::vector<float> probs;          // (Ns, E)
  std::vector<int> idx;              // (Ns, k) chosen experts
  std::vector<uint8_t> keep;         // (Ns, k) within capacity
  std::vector<float> frac;           // (E) fraction of assignments (group-wide)
  float groupTokens = 0;
  std::vector<int> order;            // send order: row*k+slot, grouped by destination rank, expert
  std::vector<int> sendCount, recvCount;  // (ep, El) assignments to / from each rank per local expert
  std::vector<float> xe, he, oe;     // per local expert rows, in (expert, source rank) order
  std::vector<int> expRows;          // (El) rows per local expert
  std::vector<float> back;           // expert outputs back at the sender, in send order (n, C)
  double aux = 0;
};

/// y (Ns,C) = MoE(u (Ns,C)) for rows `rowIds` of the microbatch (global keys for capacity ranking).
/// `layer` indexes ParamStore::layers; `auxScale` weights this group's aux loss in the total.
void moeFwd(Ctx& c, int layer, const float* u, float* y, int Ns, const std::vector<int>& rowKeys, MoeCache& mc);
/// du (Ns,C) += gradient; parameter gradients accumulate into the scratch buffers.
void moeBwd(Ctx& c, int layer, const float* u, const float* dy, float* du, MoeCache& mc, float auxScale);

}  // namespace trainer::ep
