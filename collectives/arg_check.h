// arg_check.h: the STRATA_CHECK_ARGS debug mode. Before running, every rank's list of collectives
// is compared over the bootstrap ring, and a mismatch (different collective, count, dtype, op or
// root) fails on every rank with a message naming the rank that differs, instead of a hang or
// silently wrong data.
#pragma once

#include <vector>

#include "collectives/task.h"
#include "transport/status.h"

namespace strata {

class Comm;

Status checkSameCollectives(Comm& comm, const std::vector<const CollCall*>& calls);

}  // namespace strata
