// process_group.h: ProcessGroupStrata, a c10d::ProcessGroup on strata's C API. Every c10d
// operation on CPU tensors; rendezvous through the Store PyTorch passes in; the group's timeout
// becomes the communicator's; operations run on a progress thread in issue order.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>

#include "progress_queue.h"
#include "tensor_types.h"
#include "strata/strata.h"

namespace strata_torch {

class ProcessGroupStrata : public c10d::ProcessGroup {
 public:
  ProcessGroupStrata(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     std::chrono::milliseconds timeout);
  ~ProcessGroupStrata() override;

  const std::string getBackendName() const override { return "strata"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputLists,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits, std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = {}) override;

  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;

  strataComm_t comm() const { return comm_; }

 private:
  c10::intrusive_ptr<StrataWork> makeWork(c10d::OpType type, const char* title, std::vector<at::Tensor> outputs,
                                          const std::vector<at::Tensor>& inputs);
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, const char* title, std::vector<at::Tensor> outputs,
                                         const std::vector<at::Tensor>& inputs, ProgressQueue::Step run);
  void check(strataResult_t rc, const char* what) const;  ///< throws with strata's message
  /// Reduces the contiguous `buf` in place: to every rank (root < 0) or to `root`.
  void runReduction(at::Tensor buf, const Reduction& r, int root, const char* what);
  void checkRoot(int64_t root, const char* what) const;
  /// Bytes at `data` (none when `bytes` is 0), one per peer.
  struct Block {
    char* data = nullptr;
    size_t bytes = 0;
  };
  /// Sends sends[p] to and receives recvs[p] from every other rank p, in one strata group.
  void exchangeWithPeers(const std::vector<Block>& sends, const std::vector<Block>& recvs, const char* what);
  void checkPeer(int peer, const char* what) const;

  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  strataComm_t comm_ = nullptr;
  std::shared_ptr<ProgressQueue> queue_;
};

/// The creator torch.distributed calls (store, rank, size, timeout).
c10::intrusive_ptr<c10d::ProcessGroup> createProcessGroupStrata(const c10::intrusive_ptr<c10d::Store>& store,
                                                               int rank, int size,
                                                               const std::chrono::duration<float>& timeout);

}  // namespace strata_torch
