// backend.cc: StrataBackend. Each operation checks its tensors on the calling thread
// (so a bad call raises at once, naming what was wrong), makes contiguous staging only where a
// tensor is not contiguous, and queues one step that calls strata on the progress thread. Data
// that is only moved (broadcast, gathers, all-to-all, send/recv) travels as bytes, so every
// dtype works; reductions map dtypes and ops in tensor_types.cc.
#include <Python.h>  // first, as Python asks: the destructor lets go of the GIL

#include "backend.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>

#include "tensor_types.h"

namespace strata_torch {

namespace {

constexpr const char* kUniqueIdKey = "strata_unique_id";

at::ScalarType torchType(strataDataType_t t) {
  switch (t) {
    case strataFloat16: return at::kHalf;
    case strataBfloat16: return at::kBFloat16;
    case strataFloat64: return at::kDouble;
    default: return at::kFloat;
  }
}

/// The contiguous tensor strata works on: `t` itself when it already is contiguous.
at::Tensor staging(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

/// Copies `buf` back into `t` when `buf` was a staging copy.
void copyBack(at::Tensor& t, const at::Tensor& buf) {
  if (!buf.is_same(t)) t.copy_(buf);
}

/// One contiguous buffer holding every tensor of `ts` in order (a copy).
at::Tensor flatten(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> flat;
  flat.reserve(ts.size());
  for (const auto& t : ts) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

/// Elements [i*n, (i+1)*n) of the flat `buf`, shaped like `like`.
at::Tensor block(const at::Tensor& buf, int64_t i, const at::Tensor& like) {
  return buf.narrow(0, i * like.numel(), like.numel()).view(like.sizes());
}

}  // namespace

StrataBackend::StrataBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                       std::chrono::milliseconds timeout)
    : BackendBase(rank, size), store_(store), timeout_(timeout) {
  strataUniqueId id;
  if (rank == 0) {
    check(strataGetUniqueId(&id), "init");
    store_->set(kUniqueIdKey, std::vector<uint8_t>(id.internal, id.internal + sizeof(id.internal)));
  } else {
    const std::vector<uint8_t> v = store_->get(kUniqueIdKey);  // waits up to the store's timeout
    if (v.size() != sizeof(id.internal))
      throw std::runtime_error("strata init: the store holds a unique id of " + std::to_string(v.size()) +
                               " bytes, expected " + std::to_string(sizeof(id.internal)));
    std::memcpy(id.internal, v.data(), v.size());
  }
  strataConfig_t cfg;
  strataConfigInit(&cfg);
  cfg.timeout = std::chrono::duration<double>(timeout).count();
  cfg.commName = "torch";
  queue_ = std::make_shared<ProgressQueue>([this](const std::vector<ProgressQueue::Step>& issues) {
    check(strataGroupStart(), "send/recv");
    std::exception_ptr first;
    for (const auto& issue : issues) {
      try {
        issue();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    const strataResult_t end = strataGroupEnd();
    if (first) std::rethrow_exception(first);
    check(end, "send/recv");
  });
  // The communicator is made on the progress thread, the one that drives it: when the ranks were
  // started without CPU binding, strata binds the thread that creates a communicator
  // (STRATA_AUTO_BIND), and that must be this one, not the Python thread whose later threads
  // (intra-op workers, data loaders) would inherit the binding.
  queue_->runNow([&] {
    const strataResult_t rc = strataCommInitRankConfig(&comm_, size, id, rank, &cfg);
    if (rc != strataSuccess) throw std::runtime_error("strata init (rank " + std::to_string(rank) + " of " +
                                                      std::to_string(size) + "): " + lastError(rc, nullptr));
  });
  queue_->adoptBinding();
  setSequenceNumberForGroup();
}

StrataBackend::~StrataBackend() { close(false); }

void StrataBackend::close(bool abort) {
  std::lock_guard<std::mutex> lock(closeMu_);
  if (!comm_) return;
  closed_.store(true);
  // Python drops the group with the GIL held; the progress thread may need the GIL to release the
  // last reference to a tensor it ran on. Let go of it while the queue drains.
  PyThreadState* saved = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  // Abort: stop the calls running now (thread-safe); what is queued then fails at once.
  if (abort) strataCommRevoke(comm_, STRATA_REVOKE_DEFAULT);
  queue_->shutdown();
  strataResult_t async = strataSuccess;
  strataCommGetAsyncError(comm_, &async);
  if (abort || async != strataSuccess) strataCommAbort(comm_);
  else strataCommDestroy(comm_);
  comm_ = nullptr;
  if (saved) PyEval_RestoreThread(saved);
}

void StrataBackend::shutdown() { close(false); }

void StrataBackend::abort() { close(true); }

void StrataBackend::checkOpen(const char* what) const {
  if (closed_.load())
    throw std::runtime_error(std::string("strata ") + what + " on rank " + std::to_string(rank_) +
                             ": the process group was shut down or aborted");
}

void StrataBackend::check(strataResult_t rc, const char* what) const {
  if (rc == strataSuccess) return;
  if (rc == strataTimeout)  // worded as Gloo's and NCCL's timeouts are, which callers match on
    throw std::runtime_error(std::string("strata ") + what + " on rank " + std::to_string(rank_) +
                             ": Timed out after " + std::to_string(timeout_.count()) +
                             " ms without progress (the group's timeout): " + lastError(rc, comm_));
  throw std::runtime_error(std::string("strata ") + what + " failed on rank " + std::to_string(rank_) + ": " +
                           lastError(rc, comm_));
}

void StrataBackend::checkRoot(int64_t root, const char* what) const {
  if (root < 0 || root >= size_)
    throw std::invalid_argument(std::string("strata ") + what + ": root rank " + std::to_string(root) +
                                " is outside the group of " + std::to_string(size_) + " ranks");
}

void StrataBackend::checkPeer(int peer, const char* what) const {
  if (peer < 0 || peer >= size_)
    throw std::invalid_argument(std::string("strata ") + what + ": peer rank " + std::to_string(peer) +
                                " is outside the group of " + std::to_string(size_) + " ranks");
  if (peer == rank_)
    throw std::invalid_argument(std::string("strata ") + what + ": peer rank " + std::to_string(peer) +
                                " is this rank");
}

c10::intrusive_ptr<StrataWork> StrataBackend::makeWork(c10d::OpType type, const char* title,
                                                            std::vector<at::Tensor> outputs,
                                                            const std::vector<at::Tensor>& inputs) {
  checkOpen(title + std::strlen("strata:"));
  if (seqSet_.load()) seq_.fetch_add(1);
  return c10::make_intrusive<StrataWork>(rank_, type, title, std::move(outputs),
                                         c10::optional<std::vector<at::Tensor>>(inputs), queue_);
}

c10::intrusive_ptr<c10d::Work> StrataBackend::enqueue(c10d::OpType type, const char* title,
                                                           std::vector<at::Tensor> outputs,
                                                           const std::vector<at::Tensor>& inputs,
                                                           ProgressQueue::Step run) {
  auto work = makeWork(type, title, std::move(outputs), inputs);
  queue_->post(std::move(run), work);
  return work;
}

// ---- reductions ----

void StrataBackend::runReduction(at::Tensor buf, const Reduction& r, int root, const char* what) {
  if (r.count == 0) return;
  const bool toAll = root < 0;
  if (r.bitwise) {
    // strata has no bitwise ops: gather every rank's bytes and reduce them here.
    at::Tensor gathered = at::empty({size_, buf.numel()}, buf.options());
    check(strataAllGather(buf.data_ptr(), gathered.data_ptr(), nbytes(buf), strataUint8, comm_), what);
    if (toAll || root == rank_) {
      at::Tensor flat = buf.view({-1});
      reduceGathered(gathered, r.torchOp, flat);
    }
    return;
  }
  strataRedOp_t op = r.op;
  if (r.premul) {
    at::Tensor scalar = at::scalar_tensor(r.premulFactor, at::TensorOptions().dtype(torchType(r.dtype)));
    check(strataRedOpCreatePreMulSum(&op, scalar.data_ptr(), r.dtype, comm_), what);
  }
  void* p = buf.data_ptr();
  const strataResult_t rc = toAll ? strataAllReduce(p, p, r.count, r.dtype, op, comm_)
                                  : strataReduce(p, root == rank_ ? p : nullptr, r.count, r.dtype, op, root, comm_);
  if (r.premul) strataRedOpDestroy(op, comm_);
  check(rc, what);
}

c10::intrusive_ptr<c10d::Work> StrataBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  checkCount(tensors, 1, "all_reduce", "");
  checkCpuDense(tensors[0], "all_reduce");
  at::Tensor t = tensors[0], buf = staging(t);
  const Reduction r = planReduction(buf, opts.reduceOp, "all_reduce");
  return enqueue(c10d::OpType::ALLREDUCE, "strata:all_reduce", tensors, tensors, [this, t, buf, r]() mutable {
    runReduction(buf, r, -1, "all_reduce");
    copyBack(t, buf);
  });
}

c10::intrusive_ptr<c10d::Work> StrataBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                       const c10d::AllreduceCoalescedOptions& opts) {
  if (tensors.empty()) throw std::invalid_argument("strata all_reduce_coalesced: no tensors");
  checkCpuDense(tensors[0], "all_reduce_coalesced");
  for (const auto& t : tensors) {
    checkCpuDense(t, "all_reduce_coalesced");
    if (t.scalar_type() != tensors[0].scalar_type())
      throw std::invalid_argument("strata all_reduce_coalesced: tensors must share one dtype, got " +
                                  std::string(c10::toString(tensors[0].scalar_type())) + " and " +
                                  c10::toString(t.scalar_type()));
  }
  at::Tensor flat = flatten(tensors);
  const Reduction r = planReduction(flat, opts.reduceOp, "all_reduce_coalesced");
  return enqueue(c10d::OpType::ALLREDUCE_COALESCED, "strata:all_reduce_coalesced", tensors, tensors,
                 [this, tensors, flat, r]() mutable {
                   runReduction(flat, r, -1, "all_reduce_coalesced");
                   int64_t off = 0;
                   for (auto& t : tensors) {
                     t.copy_(flat.narrow(0, off, t.numel()).view(t.sizes()));
                     off += t.numel();
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> StrataBackend::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  checkCount(tensors, 1, "reduce", "");
  checkCpuDense(tensors[0], "reduce");
  checkRoot(opts.rootRank, "reduce");
  if (opts.rootTensor != 0) throw std::invalid_argument("strata reduce: rootTensor must be 0 (one tensor per rank)");
  at::Tensor t = tensors[0], buf = staging(t);
  const Reduction r = planReduction(buf, opts.reduceOp, "reduce");
  const int root = static_cast<int>(opts.rootRank);
  return enqueue(c10d::OpType::REDUCE, "strata:reduce", tensors, tensors, [this, t, buf, r, root]() mutable {
    runReduction(buf, r, root, "reduce");
    if (root == rank_) copyBack(t, buf);
  });
}

c10::intrusive_ptr<c10d::Work> StrataBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                  std::vector<std::vector<at::Tensor>>& inputs,
                                                                  const c10d::ReduceScatterOptions& opts) {
  checkCount(outputs, 1, "reduce_scatter", "output");
  if (inputs.size() != 1) throw std::invalid_argument("strata reduce_scatter: expected one input list");
  checkCpuDense(outputs[0], "reduce_scatter");
  checkCount(inputs[0], static_cast<size_t>(size_), "reduce_scatter", "input");
  checkSameShape(inputs[0], outputs[0], "reduce_scatter", "input");
  at::Tensor flat = flatten(inputs[0]);
  return _reduce_scatter_base(outputs[0], flat, opts);
}

ProgressQueue::Step StrataBackend::reduceScatterStep(at::Tensor& output, at::Tensor& input,
                                                     const c10d::ReduceScatterOptions& opts, const char* what) {
  checkCpuDense(output, what);
  checkCpuDense(input, what);
  if (input.scalar_type() != output.scalar_type() || input.numel() != output.numel() * size_)
    throw std::invalid_argument(std::string("strata ") + what + ": the input must have the output's dtype and " +
                                std::to_string(size_) + " times its elements (" + std::to_string(output.numel()) +
                                " x " + std::to_string(size_) + "), got " + std::to_string(input.numel()) + " " +
                                c10::toString(input.scalar_type()));
  at::Tensor out = output, in = staging(input), buf = staging(output);
  const Reduction r = planReduction(buf, opts.reduceOp, what);
  return [this, out, in, buf, r, what]() mutable {
    if (r.bitwise || r.premul) {
      // Rare paths: reduce everything, keep this rank's block.
      at::Tensor all = in.clone();
      Reduction whole = r;
      whole.count = r.count * size_;
      runReduction(all, whole, -1, what);
      buf.view({-1}).copy_(all.view({-1}).narrow(0, rank_ * buf.numel(), buf.numel()));
    } else if (r.count > 0) {
      check(strataReduceScatter(in.data_ptr(), buf.data_ptr(), r.count, r.dtype, r.op, comm_),
            what);
    }
    copyBack(out, buf);
  };
}

c10::intrusive_ptr<c10d::Work> StrataBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                   const c10d::ReduceScatterOptions& opts) {
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, "strata:reduce_scatter_tensor", {output}, {input},
                 reduceScatterStep(output, input, opts, "reduce_scatter_tensor"));
}

// ---- data movement ----

c10::intrusive_ptr<c10d::Work> StrataBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  checkCount(tensors, 1, "broadcast", "");
  checkCpuDense(tensors[0], "broadcast");
  checkRoot(opts.rootRank, "broadcast");
  if (opts.rootTensor != 0) throw std::invalid_argument("strata broadcast: rootTensor must be 0 (one tensor per rank)");
  at::Tensor t = tensors[0], buf = staging(t);
  const int root = static_cast<int>(opts.rootRank);
  return enqueue(c10d::OpType::BROADCAST, "strata:broadcast", tensors, tensors, [this, t, buf, root]() mutable {
    check(strataBroadcast(buf.data_ptr(), buf.data_ptr(), nbytes(buf), strataUint8, root, comm_), "broadcast");
    copyBack(t, buf);
  });
}

c10::intrusive_ptr<c10d::Work> StrataBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const c10d::AllgatherOptions& opts) {
  checkCount(inputs, 1, "all_gather", "input");
  checkCpuDense(inputs[0], "all_gather");
  if (outputs.size() != 1) throw std::invalid_argument("strata all_gather: expected one output list");
  checkCount(outputs[0], static_cast<size_t>(size_), "all_gather", "output");
  checkSameShape(outputs[0], inputs[0], "all_gather", "output");
  at::Tensor in = staging(inputs[0]);
  at::Tensor flat = at::empty({size_ * in.numel()}, in.options());
  std::vector<at::Tensor> outs = outputs[0];
  return enqueue(c10d::OpType::ALLGATHER, "strata:all_gather", outs, inputs, [this, in, flat, outs]() mutable {
    check(strataAllGather(in.data_ptr(), flat.data_ptr(), nbytes(in), strataUint8, comm_), "all_gather");
    for (int i = 0; i < size_; ++i) outs[i].copy_(block(flat, i, outs[i]));
  });
}

ProgressQueue::Step StrataBackend::allGatherIntoStep(at::Tensor& output, at::Tensor& input, const char* what) {
  checkCpuDense(output, what);
  checkCpuDense(input, what);
  if (input.scalar_type() != output.scalar_type() || output.numel() != input.numel() * size_)
    throw std::invalid_argument(std::string("strata ") + what + ": the output must have the input's dtype and " +
                                std::to_string(size_) + " times its elements (" + std::to_string(input.numel()) +
                                " x " + std::to_string(size_) + "), got " + std::to_string(output.numel()) + " " +
                                c10::toString(output.scalar_type()));
  at::Tensor out = output, in = staging(input), buf = staging(output);
  return [this, out, in, buf, what]() mutable {
    check(strataAllGather(in.data_ptr(), buf.data_ptr(), nbytes(in), strataUint8, comm_), what);
    copyBack(out, buf);
  };
}

c10::intrusive_ptr<c10d::Work> StrataBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                              const c10d::AllgatherOptions& opts) {
  return enqueue(c10d::OpType::_ALLGATHER_BASE, "strata:all_gather_into_tensor", {output}, {input},
                 allGatherIntoStep(output, input, "all_gather_into_tensor"));
}

c10::intrusive_ptr<c10d::Work> StrataBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  // outputLists[r][i] receives rank r's inputs[i].
  if (outputLists.size() != static_cast<size_t>(size_))
    throw std::invalid_argument("strata all_gather_coalesced: expected one output list per rank (" +
                                std::to_string(size_) + "), got " + std::to_string(outputLists.size()));
  int64_t bytes = 0;
  for (const auto& in : inputs) {
    checkCpuDense(in, "all_gather_coalesced");
    bytes += static_cast<int64_t>(nbytes(in));
  }
  for (const auto& l : outputLists) {
    checkCount(l, inputs.size(), "all_gather_coalesced", "output (per rank)");
    for (size_t i = 0; i < inputs.size(); ++i) checkSameShape({l[i]}, inputs[i], "all_gather_coalesced", "output");
  }
  // Every input's bytes in one buffer, gathered in one call.
  at::Tensor send = at::empty({bytes}, at::kByte), recv = at::empty({bytes * size_}, at::kByte);
  std::vector<at::Tensor> flatOuts;
  for (auto& l : outputLists) flatOuts.insert(flatOuts.end(), l.begin(), l.end());
  return enqueue(c10d::OpType::ALLGATHER_COALESCED, "strata:all_gather_coalesced", flatOuts, inputs,
                 [this, inputs, outputLists, send, recv, bytes]() mutable {
                   int64_t off = 0;
                   for (const auto& in : inputs) {
                     const at::Tensor c = staging(in);
                     if (nbytes(c)) std::memcpy(static_cast<char*>(send.data_ptr()) + off, c.data_ptr(), nbytes(c));
                     off += static_cast<int64_t>(nbytes(c));
                   }
                   check(strataAllGather(send.data_ptr(), recv.data_ptr(), static_cast<size_t>(bytes), strataUint8,
                                         comm_),
                         "all_gather_coalesced");
                   for (int r = 0; r < size_; ++r) {
                     off = r * bytes;
                     for (size_t i = 0; i < inputs.size(); ++i) {
                       at::Tensor& o = outputLists[r][i];
                       const int64_t nb = static_cast<int64_t>(nbytes(o));
                       if (nb) {
                         at::Tensor dst = staging(o);
                         std::memcpy(dst.data_ptr(), static_cast<const char*>(recv.data_ptr()) + off, nb);
                         copyBack(o, dst);
                       }
                       off += nb;
                     }
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> StrataBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::GatherOptions& opts) {
  checkRoot(opts.rootRank, "gather");
  checkCount(inputs, 1, "gather", "input");
  checkCpuDense(inputs[0], "gather");
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    if (outputs.size() != 1) throw std::invalid_argument("strata gather: the root needs one output list");
    checkCount(outputs[0], static_cast<size_t>(size_), "gather", "output");
    checkSameShape(outputs[0], inputs[0], "gather", "output");
    outs = outputs[0];
  } else if (!outputs.empty()) {
    throw std::invalid_argument("strata gather: only the root (rank " + std::to_string(root) +
                                ") takes an output list");
  }
  at::Tensor in = staging(inputs[0]);
  at::Tensor flat = rank_ == root ? at::empty({size_ * in.numel()}, in.options()) : at::Tensor();
  return enqueue(c10d::OpType::GATHER, "strata:gather", outs, inputs, [this, in, flat, outs, root]() mutable {
    check(strataGather(in.data_ptr(), flat.defined() ? flat.data_ptr() : nullptr, nbytes(in), strataUint8, root, comm_),
          "gather");
    for (size_t i = 0; i < outs.size(); ++i) outs[i].copy_(block(flat, static_cast<int64_t>(i), outs[i]));
  });
}

c10::intrusive_ptr<c10d::Work> StrataBackend::scatter(std::vector<at::Tensor>& outputs,
                                                           std::vector<std::vector<at::Tensor>>& inputs,
                                                           const c10d::ScatterOptions& opts) {
  checkRoot(opts.rootRank, "scatter");
  checkCount(outputs, 1, "scatter", "output");
  checkCpuDense(outputs[0], "scatter");
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor flat;
  std::vector<at::Tensor> ins;
  if (rank_ == root) {
    if (inputs.size() != 1) throw std::invalid_argument("strata scatter: the root needs one input list");
    checkCount(inputs[0], static_cast<size_t>(size_), "scatter", "input");
    checkSameShape(inputs[0], outputs[0], "scatter", "input");
    ins = inputs[0];
    flat = flatten(ins);
  } else if (!inputs.empty()) {
    throw std::invalid_argument("strata scatter: only the root (rank " + std::to_string(root) +
                                ") takes an input list");
  }
  at::Tensor out = outputs[0], buf = staging(out);
  return enqueue(c10d::OpType::SCATTER, "strata:scatter", outputs, ins, [this, flat, out, buf, root]() mutable {
    check(strataScatter(flat.defined() ? flat.data_ptr() : nullptr, buf.data_ptr(), nbytes(buf), strataUint8, root,
                        comm_),
          "scatter");
    copyBack(out, buf);
  });
}

void StrataBackend::exchangeWithPeers(const std::vector<Block>& sends, const std::vector<Block>& recvs,
                                           const char* what) {
  check(strataGroupStart(), what);
  strataResult_t rc = strataSuccess;
  for (int p = 0; p < size_ && rc == strataSuccess; ++p) {
    if (p == rank_) continue;
    if (sends[p].bytes) rc = strataSend(sends[p].data, sends[p].bytes, strataUint8, p, comm_);
    if (rc == strataSuccess && recvs[p].bytes) rc = strataRecv(recvs[p].data, recvs[p].bytes, strataUint8, p, comm_);
  }
  const strataResult_t end = strataGroupEnd();  // always closes the group, even after a failed call
  check(rc != strataSuccess ? rc : end, what);
}

c10::intrusive_ptr<c10d::Work> StrataBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                 std::vector<int64_t>& outputSplits,
                                                                 std::vector<int64_t>& inputSplits,
                                                                 const c10d::AllToAllOptions& opts) {
  checkCpuDense(output, "all_to_all_single");
  checkCpuDense(input, "all_to_all_single");
  if (input.scalar_type() != output.scalar_type())
    throw std::invalid_argument("strata all_to_all_single: input and output dtypes differ");
  at::Tensor out = output, in = staging(input), buf = staging(output);
  if (outputSplits.empty() && inputSplits.empty()) {
    if (input.numel() != output.numel() || input.numel() % size_ != 0)
      throw std::invalid_argument("strata all_to_all_single: without split sizes input and output need the same "
                                  "number of elements, divisible by the group size " + std::to_string(size_) +
                                  " (got " + std::to_string(input.numel()) + " and " + std::to_string(output.numel()) +
                                  ")");
    return enqueue(c10d::OpType::ALLTOALL_BASE, "strata:all_to_all_single", {output}, {input},
                   [this, out, in, buf]() mutable {
                     check(strataAllToAll(in.data_ptr(), buf.data_ptr(), nbytes(in) / size_, strataUint8, comm_),
                           "all_to_all_single");
                     copyBack(out, buf);
                   });
  }
  // Uneven: split sizes count rows of dim 0; one send and one receive per peer, in one group.
  auto splits = [&](const std::vector<int64_t>& given, const at::Tensor& t, const char* which) {
    std::vector<int64_t> s = given;
    const int64_t rows = t.dim() > 0 ? t.size(0) : 0;
    if (s.empty()) {
      if (rows % size_ != 0)
        throw std::invalid_argument(std::string("strata all_to_all_single: ") + which + " has " +
                                    std::to_string(rows) + " rows, not divisible by the group size");
      s.assign(static_cast<size_t>(size_), rows / size_);
    }
    if (static_cast<int>(s.size()) != size_)
      throw std::invalid_argument(std::string("strata all_to_all_single: ") + which + " split sizes have " +
                                  std::to_string(s.size()) + " entries, expected " + std::to_string(size_));
    int64_t sum = 0;
    for (int64_t v : s) {
      if (v < 0) throw std::invalid_argument(std::string("strata all_to_all_single: a negative ") + which + " split");
      sum += v;
    }
    if (sum != rows)
      throw std::invalid_argument(std::string("strata all_to_all_single: ") + which + " split sizes add up to " +
                                  std::to_string(sum) + ", but dim 0 has " + std::to_string(rows) + " rows");
    return s;
  };
  const std::vector<int64_t> ins = splits(inputSplits, input, "input"), outs = splits(outputSplits, output, "output");
  if (ins[rank_] != outs[rank_])
    throw std::invalid_argument("strata all_to_all_single: this rank sends itself " + std::to_string(ins[rank_]) +
                                " rows but expects " + std::to_string(outs[rank_]));
  const int64_t inRow = input.dim() > 0 && input.size(0) > 0 ? static_cast<int64_t>(nbytes(input)) / input.size(0) : 0;
  const int64_t outRow = output.dim() > 0 && output.size(0) > 0 ? static_cast<int64_t>(nbytes(output)) / output.size(0) : 0;
  if (inRow && outRow && inRow != outRow)
    throw std::invalid_argument("strata all_to_all_single: input and output rows differ in size");
  return enqueue(c10d::OpType::ALLTOALL_BASE, "strata:all_to_all_single", {output}, {input},
                 [this, out, in, buf, ins, outs, inRow, outRow]() mutable {
                   char* src = static_cast<char*>(in.data_ptr());
                   char* dst = static_cast<char*>(buf.data_ptr());
                   std::vector<int64_t> inOff(size_ + 1, 0), outOff(size_ + 1, 0);
                   for (int p = 0; p < size_; ++p) {
                     inOff[p + 1] = inOff[p] + ins[p] * inRow;
                     outOff[p + 1] = outOff[p] + outs[p] * outRow;
                   }
                   if (ins[rank_]) std::memcpy(dst + outOff[rank_], src + inOff[rank_], ins[rank_] * inRow);
                   std::vector<Block> sends(size_), recvs(size_);
                   for (int p = 0; p < size_; ++p) {
                     sends[p] = {src + inOff[p], static_cast<size_t>(ins[p] * inRow)};
                     recvs[p] = {dst + outOff[p], static_cast<size_t>(outs[p] * outRow)};
                   }
                   exchangeWithPeers(sends, recvs, "all_to_all_single");
                   copyBack(out, buf);
                 });
}

c10::intrusive_ptr<c10d::Work> StrataBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions& opts) {
  checkCount(outputs, static_cast<size_t>(size_), "all_to_all", "output");
  checkCount(inputs, static_cast<size_t>(size_), "all_to_all", "input");
  std::vector<at::Tensor> ins, bufs;
  for (int p = 0; p < size_; ++p) {
    checkCpuDense(inputs[p], "all_to_all");
    checkCpuDense(outputs[p], "all_to_all");
    ins.push_back(staging(inputs[p]));
    bufs.push_back(staging(outputs[p]));
  }
  if (nbytes(inputs[rank_]) != nbytes(outputs[rank_]))
    throw std::invalid_argument("strata all_to_all: this rank's own input and output differ in size");
  return enqueue(c10d::OpType::ALLTOALL, "strata:all_to_all", outputs, inputs,
                 [this, outputs, ins, bufs]() mutable {
                   bufs[rank_].copy_(ins[rank_].view(bufs[rank_].sizes()));
                   std::vector<Block> sends(size_), recvs(size_);
                   for (int p = 0; p < size_; ++p) {
                     sends[p] = {static_cast<char*>(ins[p].data_ptr()), nbytes(ins[p])};
                     recvs[p] = {static_cast<char*>(bufs[p].data_ptr()), nbytes(bufs[p])};
                   }
                   exchangeWithPeers(sends, recvs, "all_to_all");
                   for (int p = 0; p < size_; ++p) copyBack(outputs[p], bufs[p]);
                 });
}

// ---- point to point ----

c10::intrusive_ptr<c10d::Work> StrataBackend::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  checkCount(tensors, 1, "send", "");
  checkCpuDense(tensors[0], "send");
  checkPeer(dstRank, "send");
  at::Tensor buf = staging(tensors[0]);
  auto work = makeWork(c10d::OpType::SEND, "strata:send", tensors, tensors);
  queue_->postP2P(
      [this, buf, dstRank] {
        if (nbytes(buf)) check(strataSend(buf.data_ptr(), nbytes(buf), strataUint8, dstRank, comm_), "send");
      },
      nullptr, work);
  return work;
}

c10::intrusive_ptr<c10d::Work> StrataBackend::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  checkCount(tensors, 1, "recv", "");
  checkCpuDense(tensors[0], "recv");
  checkPeer(srcRank, "recv");
  at::Tensor t = tensors[0], buf = staging(t);
  auto work = makeWork(c10d::OpType::RECV, "strata:recv", tensors, tensors);
  work->setSourceRank(srcRank);
  queue_->postP2P(
      [this, buf, srcRank] {
        if (nbytes(buf)) check(strataRecv(buf.data_ptr(), nbytes(buf), strataUint8, srcRank, comm_), "recv");
      },
      [t, buf]() mutable { copyBack(t, buf); }, work);
  return work;
}

c10::intrusive_ptr<c10d::Work> StrataBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  throw std::invalid_argument("strata recv: receiving from any source is not supported; pass the source rank");
}

c10::intrusive_ptr<c10d::Work> StrataBackend::barrier(const c10d::BarrierOptions& opts) {
  return enqueue(c10d::OpType::BARRIER, "strata:barrier", {}, {}, [this] { check(strataBarrier(comm_), "barrier"); });
}

// ---- PyTorch 2.x: coalesced tensor collectives, coalescing, split ----

#if STRATA_TORCH_BACKEND
namespace {

/// One step that runs `steps` in order.
ProgressQueue::Step inOrder(std::vector<ProgressQueue::Step> steps) {
  return [steps = std::move(steps)] {
    for (const auto& s : steps) s();
  };
}

void checkPairs(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs, const char* what) {
  if (outputs.size() != inputs.size())
    throw std::invalid_argument(std::string("strata ") + what + ": " + std::to_string(outputs.size()) +
                                " outputs for " + std::to_string(inputs.size()) + " inputs");
}

}  // namespace

c10::intrusive_ptr<c10d::Work> StrataBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                              std::vector<at::Tensor>& inputs,
                                                                              const c10d::AllgatherOptions& opts) {
  checkPairs(outputs, inputs, "all_gather_into_tensor_coalesced");
  std::vector<ProgressQueue::Step> steps;
  for (size_t i = 0; i < inputs.size(); ++i)
    steps.push_back(allGatherIntoStep(outputs[i], inputs[i], "all_gather_into_tensor_coalesced"));
  return enqueue(c10d::OpType::COALESCED, "strata:all_gather_into_tensor_coalesced", outputs, inputs,
                 inOrder(std::move(steps)));
}

c10::intrusive_ptr<c10d::Work> StrataBackend::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                              std::vector<at::Tensor>& inputs,
                                                                              const c10d::ReduceScatterOptions& opts) {
  checkPairs(outputs, inputs, "reduce_scatter_tensor_coalesced");
  std::vector<ProgressQueue::Step> steps;
  for (size_t i = 0; i < inputs.size(); ++i)
    steps.push_back(reduceScatterStep(outputs[i], inputs[i], opts, "reduce_scatter_tensor_coalesced"));
  return enqueue(c10d::OpType::COALESCED, "strata:reduce_scatter_tensor_coalesced", outputs, inputs,
                 inOrder(std::move(steps)));
}

void StrataBackend::startCoalescing() {
  checkOpen("start_coalescing");
  if (coalescing_.exchange(true))
    throw std::runtime_error("strata start_coalescing: this group is already coalescing (nested _coalescing_manager)");
  queue_->beginBlock();
}

c10::intrusive_ptr<c10d::Work> StrataBackend::endCoalescing() {
  if (!coalescing_.exchange(false))
    throw std::runtime_error("strata end_coalescing: start_coalescing was not called");
  // Every operation of the block is queued already and the queue runs in order: a Work queued now
  // completes after all of them, with the first error among them.
  auto work = makeWork(c10d::OpType::COALESCED, "strata:coalesced", {}, {});
  queue_->endBlock(work);
  return work;
}

c10::intrusive_ptr<c10d::Backend> StrataBackend::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                       const std::vector<int>& ranks,
                                                       const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  checkOpen("split");
  const auto me = std::find(ranks.begin(), ranks.end(), rank_);
  if (me == ranks.end()) return nullptr;  // not a member: no backend, as NCCL's split answers
  for (int r : ranks)
    if (r < 0 || r >= size_)
      throw std::invalid_argument("strata split: rank " + std::to_string(r) + " is outside the group of " +
                                  std::to_string(size_));
  // Each subgroup joins as new_group's do, through the store torch made for it: a collective
  // strataCommSplit would need every parent rank, and split_group is called by members only.
  const auto timeout = opts ? opts->timeout : timeout_;
  auto child = c10::make_intrusive<StrataBackend>(store, static_cast<int>(me - ranks.begin()),
                                                  static_cast<int>(ranks.size()), timeout);
  return child;
}

c10::intrusive_ptr<c10d::Backend::Options> StrataBackend::getBackendOptions() {
  return c10::make_intrusive<c10d::Backend::Options>("strata", timeout_);
}
#endif

// ---- sequence numbers (as Gloo keeps them: rank 0 picks a start, the store shares it) ----

void StrataBackend::setSequenceNumberForGroup() {
  if (seqSet_.load()) return;  // set once, at construction: a second start would differ between ranks
  uint64_t start = 0;
  if (rank_ == 0) {
    start = 1 + (static_cast<uint64_t>(std::random_device{}()) << 16);
    std::vector<uint8_t> v(sizeof start);
    std::memcpy(v.data(), &start, sizeof start);
    store_->set(c10d::kSeqNumStoreKey, v);
  } else {
    const std::vector<uint8_t> v = store_->get(c10d::kSeqNumStoreKey);
    std::memcpy(&start, v.data(), std::min(v.size(), sizeof start));
  }
  seq_.store(start);
  seqSet_.store(true);
}

uint64_t StrataBackend::getSequenceNumberForGroup() { return seqSet_.load() ? seq_.load() : 0; }

c10::intrusive_ptr<BackendBase> createStrataBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    const std::chrono::duration<float>& timeout) {
  return c10::make_intrusive<StrataBackend>(store, rank, size,
                                                 std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
}

}  // namespace strata_torch
