// tuner.h: picks an algorithm per collective. STRATA_ALGO overrides when the named algorithm
// implements the collective. On one node, measured size thresholds decide (they capture cache
// effects the model does not); across nodes, the cost model times every candidate's schedules on
// the communicator's layout and the fastest wins.
#pragma once

#include <cstddef>

#include "collectives/schedule.h"

namespace strata {

class CostModel;

struct TunerInput {
  CollType coll;
  int nranks;
  size_t bytes;        ///< bytes of the collective's full buffer (count * n for all-to-all etc.)
  bool allLocal;       ///< every peer on this node (shared memory or threads)
  size_t count = 0;    ///< elements (CollArgs::count)
  size_t elemBytes = 0;
  const CostModel* model = nullptr;  ///< the communicator's; null: thresholds only
};

Algo chooseAlgo(const TunerInput& in);

/// Deterministic mode: the algorithm for a reduction of `bytes` (per rank's buffer). One-shot,
/// direct and linear all sum every element with the same balanced tree over the ranks in rank
/// order (algorithms.h, reduceTree), whatever the layout, transport or segmenting, so their
/// results are bitwise identical to each other on any machine shape: one-shot for small
/// all-reduces (one exchange), direct (two-shot) above; direct reduce-scatter; linear reduce.
Algo deterministicAlgo(CollType coll, size_t bytes);

/// The candidates the cost model compares for a collective on `nranks` ranks (the latency-bound
/// ones only where their schedules stay small).
int tunerCandidates(CollType coll, int nranks, Algo out[8]);

}  // namespace strata
