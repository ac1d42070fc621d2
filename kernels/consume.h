// consume.h: copy and reduce kernels that consume their source: a shared staging slot the other
// process will write next. After reading each 64-byte line of the source they store to it, so the
// line ends up modified in this core's cache. The sender's next write into the slot then takes the
// line over from this core (a cache-to-cache transfer) instead of having to invalidate a shared
// copy here, which on the machines measured made the sender's copy-in 3-4x slower than
// memcpy (docs/PERFORMANCE.md, "Cache-line ownership of the staging slots"). The source's bytes
// are unspecified afterwards.
#pragma once

#include <cstddef>

#include "kernels/red_kind.h"
#include "strata/strata.h"

namespace strata::kernels {

/// memcpy(dst, src, bytes), then src's bytes are unspecified. dst and src must not overlap.
void consumeCopy(void* dst, void* src, size_t bytes);

/// dst[i] = a[i] op src[i] (as reduce() in host_reduce.h), then src's bytes are unspecified.
/// dst may alias a; src must not overlap dst or a.
void consumeReduce(void* dst, const void* a, void* src, size_t count, strataDataType_t dtype, RedKind op);

}  // namespace strata::kernels
