// check.h: writes verifiable inputs for a call and counts the elements of its result that are wrong.
#pragma once

#include <cstddef>

#include "perf/common/backend.h"
#include "perf/common/values.h"

namespace strata::perf {

/// Poisons this rank's output (NaN / all-ones bytes), then writes its inputs.
void fillInputs(const CollCall& call, const Values& values, int rank, int nranks);

/// Elements of this rank's result (starting at `result`) that differ from the exact expected values.
size_t countWrongElements(const CollCall& call, const Values& values, const void* result, int rank, int nranks);

}  // namespace strata::perf
