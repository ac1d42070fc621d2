// nccl_backend.h: runs the perf sweep's collectives with NVIDIA's NCCL (loaded at run time) on the
// ranks' device buffers and streams (or on host buffers, for an NCCL that takes them); rendezvous, barriers and the timing reductions go through the
// strata host communicator the ranks were launched with.
#pragma once

#include <string>

#include "perf/common/backend.h"
#include "perf/peers/nccl_lib.h"

namespace strata::perf {

class NcclBackend : public Backend {
 public:
  /// `host`: this rank's strata host communicator (its rank and size become NCCL's).
  NcclBackend(const NcclLib& lib, Backend& host);
  ~NcclBackend() override;
  int rank() const override { return host_.rank(); }
  int nranks() const override { return host_.nranks(); }
  std::string describe() const override;  ///< "NCCL 2.28.9 (/path/libnccl.so.2.28.9)"
  std::string unsupported(Coll coll, DType dtype, Op op) const override;
  /// Rank 0's ncclGetUniqueId over the host communicator, then ncclCommInitRank on every rank; a
  /// failure on any rank fails all of them, with NCCL's message.
  void attachDevice(const DeviceRank& device) override;
  /// On host memory (--memory host: an NCCL that takes host buffers) the communicator is made at the
  /// first call, on every rank alike.
  void prepare(const CollCall& call) override;
  void finish(const CollCall& call) override;
  void run(const CollCall& call) override;
  void groupStart() override;
  void groupEnd() override;
  void barrier() override { host_.barrier(); }
  double allReduce(double v, Agg how) override { return host_.allReduce(v, how); }
  void allGather(const void* mine, void* all, size_t bytes) override { host_.allGather(mine, all, bytes); }

  /// Frees the NCCL communicator: destroys it, or aborts it after a failure (peers may be stuck).
  void close(bool failed);

 private:
  void check(NcclResult rc, const char* what) const;
  std::string error(NcclResult rc) const;
  void sendRecvGroup(const CollCall& c, const void* send);
  bool sharesGpu(const DeviceRank& device);
  void initComm(const std::string& hint, int device);
  void* scratchAlloc(size_t bytes) const;
  void scratchFree(void* p) const;

  const NcclLib& lib_;
  Backend& host_;
  NcclComm comm_ = nullptr;
  const DeviceRank* dev_ = nullptr;
  int ccMajor_ = 0;
  std::string note_;  ///< appended to describe()
  int op_ = 0;        ///< the call's ncclRedOp_t (a pre-multiplied sum between prepare and finish)
  bool customOp_ = false;
  void* scratch_ = nullptr;  ///< staged input of in-place all-to-all and send/recv
  size_t scratchBytes_ = 0;
};

}  // namespace strata::perf
