// backend.h: StrataBackend, strata's C API as a torch.distributed backend: a c10d::Backend on
// PyTorch 2.x, a c10d::ProcessGroup on 1.x (torch_compat.h). Every c10d operation on CPU tensors;
// rendezvous through the Store PyTorch passes in; the group's timeout becomes the communicator's;
// operations run in issue order, on a progress thread or on the thread that waits for them.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

#include "progress_queue.h"
#include "tensor_types.h"
#include "torch_compat.h"
#include "strata/strata.h"

namespace strata_torch {

class StrataBackend : public BackendBase {
 public:
  StrataBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout);
  ~StrataBackend() override;

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

#if STRATA_TORCH_BACKEND
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts = {}) override;
  /// Coalescing (torch's _coalescing_manager): operations issued in between run as issued; the
  /// Work endCoalescing returns completes when all of them have.
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  bool supportsSplitting() const override { return kBackendHasSplit; }
  // The members below override c10d::Backend's on the 2.x versions that declare them (no
  // `override`: older ones do not), and are callable from Python through strata_torch on all.
  bool supportsCoalescing() const { return true; }
  /// A backend of the ranks `ranks` (this group's ranks, sorted; this rank among them), joined
  /// through `store`: torch's split_group on versions whose Backend has split.
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<c10d::Backend::Options>& opts);
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions();
#endif
  /// Runs what is queued, then frees the communicator; later operations raise. Idempotent.
  void shutdown();
  /// Stops what is running or queued (each pending Work fails with "aborted"), then frees the
  /// communicator; callable from any thread while an operation hangs. Idempotent.
  void abort();
  bool isShutDown() const { return closed_.load(); }

  strataComm_t comm() const { return comm_; }

 private:
  c10::intrusive_ptr<StrataWork> makeWork(c10d::OpType type, const char* title, std::vector<at::Tensor> outputs,
                                          const std::vector<at::Tensor>& inputs);
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, const char* title, std::vector<at::Tensor> outputs,
                                         const std::vector<at::Tensor>& inputs, ProgressQueue::Step run);
  void check(strataResult_t rc, const char* what) const;  ///< throws with strata's message
  /// Checks one all_gather_into_tensor / reduce_scatter_tensor and returns its step (also the
  /// parts of their coalesced forms).
  ProgressQueue::Step allGatherIntoStep(at::Tensor& output, at::Tensor& input, const char* what);
  ProgressQueue::Step reduceScatterStep(at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts,
                                        const char* what);
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
  void checkOpen(const char* what) const;  ///< throws once the group was shut down or aborted
  /// Ends the communicator once: destroyed, or aborted when it failed or `abort` is set.
  void close(bool abort);

  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  strataComm_t comm_ = nullptr;
  std::shared_ptr<ProgressQueue> queue_;
  std::atomic<bool> closed_{false};
  std::mutex closeMu_;                     ///< one close at a time (shutdown, abort, destructor)
  std::atomic<uint64_t> seq_{0};           ///< the group's sequence number (shared start)
  std::atomic<bool> seqSet_{false};
  std::atomic<bool> coalescing_{false};
};

/// The creator torch.distributed calls (store, rank, size, timeout).
c10::intrusive_ptr<BackendBase> createStrataBackend(const c10::intrusive_ptr<c10d::Store>& store,
                                                               int rank, int size,
                                                               const std::chrono::duration<float>& timeout);

}  // namespace strata_torch
