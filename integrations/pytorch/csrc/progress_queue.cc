// progress_queue.cc: the progress thread, held-back send/recv batches, and Work completion.
#include "progress_queue.h"

#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>

#include <future>

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

void ProgressQueue::post(Step run, c10::intrusive_ptr<StrataWork> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    flushLocked();
    jobs_.push_back(Job{std::move(run), {std::move(work)}});
  }
  cv_.notify_one();
}

void ProgressQueue::postP2P(Step issue, Step after, c10::intrusive_ptr<StrataWork> work) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.push_back(P2P{std::move(issue), std::move(after), std::move(work)});
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

void ProgressQueue::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ && !thread_.joinable()) return;
    flushLocked();
    stop_ = true;
  }
  cv_.notify_one();
  if (!thread_.joinable()) return;
  // The last reference may be dropped by a future callback running on the progress thread itself.
  if (thread_.get_id() == std::this_thread::get_id()) thread_.detach();
  else thread_.join();
}

void ProgressQueue::loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopped and drained
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    std::exception_ptr error;
    try {
      job.run();
    } catch (...) {
      error = std::current_exception();
    }
    for (auto& w : job.works) w->complete(error);
  }
}

}  // namespace strata_torch
