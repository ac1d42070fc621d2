// backend.h: what a measured library (strata, Open MPI, Gloo, NCCL) provides to the common timing loop.
#pragma once

#include <cstddef>
#include <string>

#include "perf/common/layout.h"
#include "perf/common/types.h"

namespace strata::perf {

/// One collective call with its buffers resolved.
struct CollCall {
  Coll coll;
  DType dtype;
  Op op;
  int root;  ///< -1 for collectives without a root
  bool inPlace;
  Layout layout;
  const void* send;  ///< the call's buffers (in place: both inside recvBase)
  void* recv;
  void* sendBase;  ///< the allocations
  void* recvBase;
  void* stream = nullptr;  ///< --memory device: the rank's cudaStream_t to enqueue on; host memory: NULL
};

class DeviceRank;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  /// The library and version, for the header ("strata 0.1.0", "Open MPI v4.1.4", ...).
  virtual std::string describe() const = 0;

  /// Empty if the library can run (coll, dtype, op); else why not.
  virtual std::string unsupported(Coll coll, DType dtype, Op op) const { return ""; }
  /// --memory device: called once on every rank, with the rank's device current in this thread,
  /// before the sweep (a library that binds a communicator to a device creates it here).
  virtual void attachDevice(const DeviceRank& device) {}
  /// Sets up what `call` needs (custom ops, library handles, scratch) outside the timed loop.
  virtual void prepare(const CollCall& call) {}
  /// Releases what prepare() set up.
  virtual void finish(const CollCall& call) {}
  /// Runs `call`: to completion for host memory; enqueued on call.stream for device memory (the
  /// runner synchronizes the stream). Throws std::runtime_error on failure.
  virtual void run(const CollCall& call) = 0;
  /// Brackets -m/--agg_iters calls (a group, where the library has groups).
  virtual void groupStart() {}
  virtual void groupEnd() {}
  /// Where this rank's result starts (libraries without NCCL's in-place reduce-scatter layout
  /// write it at the start of the buffer).
  virtual const void* result(const CollCall& call) const { return call.recv; }

  virtual void barrier() = 0;
  enum class Agg { Sum, Min, Max };
  /// v aggregated over all ranks, on every rank.
  virtual double allReduce(double v, Agg how) = 0;
  /// all[r * bytes ..] = rank r's `mine`, on every rank.
  virtual void allGather(const void* mine, void* all, size_t bytes) = 0;
};

}  // namespace strata::perf
