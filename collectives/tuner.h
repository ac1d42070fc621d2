// tuner.h: picks an algorithm per collective from its size, the rank count and the transports in
// use; STRATA_ALGO overrides when the named algorithm implements the collective.
#pragma once

#include <cstddef>

#include "collectives/schedule.h"

namespace strata {

struct TunerInput {
  CollType coll;
  int nranks;
  size_t bytes;        ///< bytes of the collective's full buffer (count * n for all-to-all etc.)
  bool allLocal;       ///< every peer reachable through shared memory or threads
};

Algo chooseAlgo(const TunerInput& in);

}  // namespace strata
