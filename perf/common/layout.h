// layout.h: what one message size means for each collective (nccl-tests' getCollByteCount and getBw).
#pragma once

#include <cstddef>

#include "perf/common/types.h"

namespace strata::perf {

/// Element counts of one collective call at one size; offsets are per rank, for the in-place layout
/// where both buffers live in the receive buffer (send = recv + sendInPlaceOffset * rank, and
/// recv = recv + recvInPlaceOffset * rank).
struct Layout {
  size_t count = 0;      ///< the count argument of the call (the "count" column)
  size_t sendCount = 0;  ///< elements in this rank's send buffer
  size_t recvCount = 0;  ///< elements in this rank's receive buffer
  size_t sendInPlaceOffset = 0;
  size_t recvInPlaceOffset = 0;
};

/// The layout of `coll` for `bytes` of `dtype` over `nranks` ranks.
Layout layoutFor(Coll coll, size_t bytes, DType dtype, int nranks);

/// The "size" column: bytes of the larger of the send and receive buffers.
size_t reportedBytes(const Layout& l, DType dtype);

/// busbw / algbw: 2(n-1)/n for all-reduce; (n-1)/n for reduce-scatter, all-gather, all-to-all,
/// gather, scatter; 1 for broadcast, reduce, send/recv.
double busFactor(Coll coll, int nranks);

}  // namespace strata::perf
