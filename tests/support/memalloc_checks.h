// memalloc_checks.h: every collective on buffers from strataMemAlloc (host memory: shareable
// regions that same-machine peers read single-copy), at sizes across the single-copy threshold,
// in place and out of place, checked exactly (int32 sums and data movement).
#pragma once

#include "strata/strata.h"
#include "support/coll_checks.h"

namespace strata::testing {

void runMemAllocSweep(strataComm_t comm, bool quick, CheckReport* report);

}  // namespace strata::testing
