// progress_queue.h: where the group's operations run: one at a time, in issue order, each
// completing its Work (and the Work's future) when done. A background progress thread runs what is
// queued, so that async_op=True overlaps; but a thread that waits for a Work whose operation has
// not started yet runs it (and what is queued before it) itself: a synchronous call then costs no
// hand-off to the progress thread and back, which two thread wake-ups made the largest part of a
// small all-reduce's time.
//
// Sends and receives are held back and run together as one strata group, so that pairs like
// "irecv from 1; isend to 1" on both ranks cannot deadlock: a batch starts when one of its Works
// is waited on or polled, when a collective is issued after it, or when the group shuts down.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <sched.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace strata_torch {

class ProgressQueue;

/// A Work completed by the progress thread. `outputs` become result() and the future's value.
class StrataWork : public c10d::Work {
 public:
  StrataWork(int rank, c10d::OpType type, const char* profilingTitle, std::vector<at::Tensor> outputs,
             const c10::optional<std::vector<at::Tensor>>& inputs, std::weak_ptr<ProgressQueue> queue);

  bool isCompleted() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  int sourceRank() const override { return sourceRank_; }

  void setSourceRank(int r) { sourceRank_ = r; }
  /// Called once by the progress thread: success when `error` is null.
  void complete(std::exception_ptr error);

 private:
  void startDeferred();  ///< lets a held-back send/recv batch start (this Work may be in it)

  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::weak_ptr<ProgressQueue> queue_;
  int sourceRank_ = -1;
};

class ProgressQueue : public std::enable_shared_from_this<ProgressQueue> {
 public:
  using Step = std::function<void()>;  ///< runs on the progress thread; throws on failure

  /// `runGroup(ops)` runs a batch of send/recv issue steps as one strata group (start, steps, end).
  explicit ProgressQueue(std::function<void(const std::vector<Step>&)> runGroup);
  ~ProgressQueue();

  /// Queues a collective (after any held-back sends/receives). `run` then `work->complete`.
  void post(Step run, c10::intrusive_ptr<StrataWork> work);
  /// Holds back a send or receive: `issue` runs inside the batch's group, `after` once it ended.
  void postP2P(Step issue, Step after, c10::intrusive_ptr<StrataWork> work);
  /// Coalescing blocks: after beginBlock, endBlock queues a Work with nothing to run; it completes
  /// after every operation queued in between, with the first error among them.
  void beginBlock();
  void endBlock(c10::intrusive_ptr<StrataWork> work);
  /// Lets the held-back sends/receives start as one batch.
  void flushP2P();
  /// Runs the queued operations up to and including `work`'s on the calling thread, when none of
  /// them has started (otherwise the progress thread runs them and this returns at once).
  void runOnCaller(const StrataWork* work);
  /// Runs `step` on the progress thread after everything queued and waits for it; rethrows what
  /// it throws.
  void runNow(const Step& step);
  /// Runs everything queued, then stops the thread. Idempotent.
  void shutdown();
  /// Reads the progress thread's CPU binding (strata binds the thread that creates a communicator
  /// when the ranks were started unbound): a waiting thread that runs operations itself then runs
  /// them on those CPUs, and gets its own binding back afterwards. Call after the communicator was
  /// made (on the progress thread).
  void adoptBinding();

 private:
  struct Job {
    Step run;
    std::vector<c10::intrusive_ptr<StrataWork>> works;
    enum Kind { kRun, kBlockBegin, kBlockEnd } kind = kRun;
  };
  struct P2P {
    Step issue, after;
    c10::intrusive_ptr<StrataWork> work;
  };
  void flushLocked();
  void loop();
  /// Runs `job` and completes its Works (mu_ not held; running_ set by the caller).
  void execute(Job& job);
  /// Fails a Work posted after shutdown.
  static void refuse(const c10::intrusive_ptr<StrataWork>& work);

  std::function<void(const std::vector<Step>&)> runGroup_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  std::vector<P2P> pending_;
  bool stop_ = false;
  bool running_ = false;            ///< a job is running (on the progress thread or a waiter)
  std::thread::id runner_;          ///< the thread running it
  bool pinCaller_ = false;          ///< the progress thread is bound to fewer CPUs than the process
  cpu_set_t runCpus_;               ///< its CPUs
  std::exception_ptr blockError_;   ///< first error since the last kBlockBegin
  std::thread thread_;
};

}  // namespace strata_torch
