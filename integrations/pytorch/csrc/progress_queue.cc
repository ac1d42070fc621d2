// progress_queue.cc: the progress thread, running on the waiting thread, held-back send/recv
// batches, coalescing blocks, and Work completion.
#include "progress_queue.h"

#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>

#include <pthread.h>

#include <future>
#include <iterator>
#include <stdexcept>

namespace strata_torch {

StrataWork::StrataWork(int rank, c10d::OpType type, const char* profilingTitle, std::vector<at::Tensor> outputs,
                       const c10::optional<std::vector<at::Tensor>>& inputs, std::weak_ptr<ProgressQueue> queue)
    : c10d::Work(rank, type, profilingTitle, inputs),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))),
      queue_(std::move(queue)) {}

void StrataWork::startDeferred() {
  if (auto q = queue_.lock()) q->flushP2P();
}

bool StrataWork::isCompleted() {
  startDeferred();
  return c10d::Work::isCompleted();
}

bool StrataWork::wait(std::chrono::milliseconds timeout) {
  startDeferred();
  if (auto q = queue_.lock()) q->runOnCaller(this);
  return c10d::Work::wait(timeout);
}

void StrataWork::complete(std::exception_ptr error) {
  finish(error);
  // The future's callbacks (DDP comm hooks) run here, on the progress thread, outside any lock.
  if (error) future_->setError(error);
  else future_->markCompleted(c10::IValue(outputs_));
}

ProgressQueue::ProgressQueue(std::function<void(const std::vector<Step>&)> runGroup)
    : runGroup_(std::move(runGroup)), thread_([this] { loop(); }) {}

ProgressQueue::~ProgressQueue() { shutdown(); }

void ProgressQueue::refuse(const c10::intrusive_ptr<StrataWork>& work) {
  work->complete(std::make_exception_ptr(std::runtime_error("strata: the process group was shut down")));
}

void ProgressQueue::post(Step run, c10::intrusive_ptr<StrataWork> work) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (stop_) {
      lock.unlock();  // the Work's future callbacks may issue more operations
      return refuse(work);
    }
    flushLocked();
    jobs_.push_back(Job{std::move(run), {std::move(work)}});
  }
  cv_.notify_one();
}

void ProgressQueue::postP2P(Step issue, Step after, c10::intrusive_ptr<StrataWork> work) {
  std::unique_lock<std::mutex> lock(mu_);
  if (stop_) {
    lock.unlock();
    return refuse(work);
  }
  pending_.push_back(P2P{std::move(issue), std::move(after), std::move(work)});
}

void ProgressQueue::beginBlock() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    flushLocked();
    Job job;
    job.kind = Job::kBlockBegin;
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void ProgressQueue::endBlock(c10::intrusive_ptr<StrataWork> work) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (stop_) {
      lock.unlock();
      return refuse(work);
    }
    flushLocked();
    Job job;
    job.kind = Job::kBlockEnd;
    job.works.push_back(std::move(work));
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void ProgressQueue::runOnCaller(const StrataWork* work) {
  std::unique_lock<std::mutex> lock(mu_);
  // Only when nothing runs: then no job before `work`'s has started, and the caller runs them in
  // order, exactly as the progress thread would.
  if (running_) return;
  auto mine = jobs_.end();
  for (auto it = jobs_.begin(); it != jobs_.end() && mine == jobs_.end(); ++it)
    for (const auto& w : it->works)
      if (w.get() == work) mine = it;
  if (mine == jobs_.end()) return;  // done already, or held back
  std::deque<Job> batch;
  batch.insert(batch.end(), std::make_move_iterator(jobs_.begin()), std::make_move_iterator(std::next(mine)));
  jobs_.erase(jobs_.begin(), std::next(mine));
  running_ = true;
  runner_ = std::this_thread::get_id();
  const bool pin = pinCaller_;
  lock.unlock();
  cpu_set_t own;
  if (pin && pthread_getaffinity_np(pthread_self(), sizeof own, &own) == 0) {
    pthread_setaffinity_np(pthread_self(), sizeof runCpus_, &runCpus_);
  } else {
    CPU_ZERO(&own);
  }
  for (Job& job : batch) execute(job);
  if (CPU_COUNT(&own) > 0) pthread_setaffinity_np(pthread_self(), sizeof own, &own);
  lock.lock();
  running_ = false;
  lock.unlock();
  cv_.notify_all();  // the progress thread may go on with what was queued after
}

void ProgressQueue::flushP2P() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_.empty()) return;
    flushLocked();
  }
  cv_.notify_one();
}

void ProgressQueue::flushLocked() {
  if (pending_.empty()) return;
  Job job;
  std::vector<Step> issues, afters;
  for (P2P& p : pending_) {
    issues.push_back(std::move(p.issue));
    afters.push_back(std::move(p.after));
    job.works.push_back(std::move(p.work));
  }
  pending_.clear();
  job.run = [this, issues = std::move(issues), afters = std::move(afters)] {
    runGroup_(issues);
    for (const Step& a : afters)
      if (a) a();
  };
  jobs_.push_back(std::move(job));
}

void ProgressQueue::runNow(const Step& step) {
  std::promise<void> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    flushLocked();
    jobs_.push_back(Job{[&] {
                          try {
                            step();
                            done.set_value();
                          } catch (...) {
                            done.set_exception(std::current_exception());
                          }
                        },
                        {}});
  }
  cv_.notify_one();
  done.get_future().get();
}

void ProgressQueue::adoptBinding() {
  cpu_set_t mine, process;
  if (pthread_getaffinity_np(thread_.native_handle(), sizeof mine, &mine) != 0) return;
  if (sched_getaffinity(0, sizeof process, &process) != 0) return;  // the caller's (not yet pinned)
  std::lock_guard<std::mutex> lock(mu_);
  runCpus_ = mine;
  pinCaller_ = CPU_COUNT(&mine) > 0 && !CPU_EQUAL(&mine, &process);
}

void ProgressQueue::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ && !thread_.joinable()) return;
    flushLocked();
    stop_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return;
  // The last reference may be dropped by a future callback running on the progress thread itself.
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();
    return;
  }
  thread_.join();
  // A waiting thread may still be running jobs it took (the progress thread drained the rest),
  // unless that thread is this one (a future callback dropped the last reference).
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !running_ || runner_ == std::this_thread::get_id(); });
}

void ProgressQueue::execute(Job& job) {
  std::exception_ptr error;
  if (job.kind == Job::kBlockBegin) {
    blockError_ = nullptr;
  } else if (job.kind == Job::kBlockEnd) {
    error = blockError_;
    blockError_ = nullptr;
  } else {
    try {
      job.run();
    } catch (...) {
      error = std::current_exception();
      if (!blockError_) blockError_ = error;
    }
  }
  for (auto& w : job.works) w->complete(error);
}

void ProgressQueue::loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !running_ && (stop_ || !jobs_.empty()); });
      if (jobs_.empty()) return;  // stopped and drained
      job = std::move(jobs_.front());
      jobs_.pop_front();
      running_ = true;
      runner_ = std::this_thread::get_id();
    }
    execute(job);
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_ = false;
    }
    cv_.notify_all();  // a shutdown may wait for running_ to clear
  }
}

}  // namespace strata_torch
