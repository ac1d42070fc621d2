// device_plan.h: turns one device collective, or one group's device sends and receives, into
// kernel launches (dev::DevWork descriptors): the algorithm (ring or tree; the rank-order tree in
// deterministic mode), protocol (LL or Simple) and channel count for the size, and the
// send/recv/copy entries of all-to-all, gather, scatter and grouped point-to-point. Pure host code
// with no CUDA dependency, so the emulation tests plan exactly as the CUDA executor does.
#pragma once

#include <string>
#include <vector>

#include "collectives/schedule.h"
#include "kernels/device/dev_work.h"
#include "kernels/red_kind.h"
#include "strata/strata.h"
#include "transport/status.h"

namespace strata {

struct DevPlanParams {
  int rank = 0, nranks = 1;
  int channels = 8;
  uint64_t slotBytes = 128 << 10, llSlotBytes = 32 << 10;
  uint64_t llMaxBytes = 64 << 10, treeMaxBytes = 32 << 10;
  std::string algo = "auto", proto = "auto";
  /// Some peer is on another node (reached through the network proxy): Simple only, since the
  /// proxy forwards whole steps announced by the head counter and LL has none (its per-line flags
  /// would make a partly forwarded slot look complete line by line). The same on every rank.
  bool simpleOnly = false;
  /// Deterministic mode (the communicator's, the same on every rank): all-reduce, reduce-scatter
  /// and reduce use Algo::RankTree, whose every element is the rank-order tree of rank_tree.h (the
  /// host algorithms' association too); `algo` does not apply to them.
  bool deterministic = false;
  /// From the configuration registry (STRATA_CUDA_*).
  static DevPlanParams fromConfig(int rank, int nranks);
};

/// A device collective with its op resolved.
struct DevCall {
  CollType coll = CollType::AllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  strataDataType_t dtype = strataFloat32;
  kernels::RedKind op = kernels::RedKind::Sum;
  bool avg = false;
  bool premul = false;
  uint64_t scalarBits = 0;  ///< the pre-multiplied sum's scalar, in `dtype`
  int root = 0;
};

/// One grouped device send or receive.
struct DevP2P {
  bool isSend = true;
  void* buf = nullptr;
  size_t bytes = 0;
  int peer = 0;
};

struct DevLaunch {
  dev::DevWork work;  ///< conns, abortFlag and errorFlag are filled by the executor
  int blocks = 1;
};

/// Appends the launches of `call` to *out (none for a zero-byte call).
Status planDeviceCollective(const DevPlanParams& p, const DevCall& call, std::vector<DevLaunch>* out);
/// Appends the launches of one group's sends and receives on one communicator.
Status planDeviceP2P(const DevPlanParams& p, const std::vector<DevP2P>& ops, std::vector<DevLaunch>* out);

}  // namespace strata
