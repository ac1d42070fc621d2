// dp.h: data-parallel gradient reduction, overlapped with backward, and ZeRO 1/2/3 sharding.
//
// Buckets are units (one layer's tensors of one gradient class, see params.h). Each microbatch's
// backward writes fresh gradients into `scratch`; when a layer's backward ends, its buckets are
// handed to a communication thread (strata calls block, so overlap means another thread):
//   zero 0: accumulate into `grad`; after the last microbatch all-reduce the bucket
//   zero 1: accumulate; after the last microbatch reduce-scatter it (each rank keeps its shard)
//   zero 2: reduce-scatter every microbatch's bucket into the shard accumulator at once, so full
//           gradients never outlive a layer's backward
//   zero 3: as zero 2, and parameters stay sharded: gather() before a layer runs, release() after
// The tied embedding (class E) is reduced last, after the pipeline, over the group that also
// joins the first and last pipeline stage, so its two copies receive the same summed gradient.
// Every call is recorded (context.h, trace.h): the training thread's waits for buckets are exposed
// communication, the communication thread's calls are the gradient reduction.
// On a CUDA lane the communication thread has a lane of its own (a second stream): a bucket's
// collective waits for the training stream's work up to the hand-over (an event), and the bucket
// counts as done once the communication stream has finished it. A failed collective (a peer died)
// is rethrown by the training thread's next wait; the buckets after it are skipped.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "context.h"

namespace trainer {

class GradSync {
 public:
  explicit GradSync(Ctx& c);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  void beginStep(int microbatches);
  /// Before a unit key's backward: zero its scratch (waiting for a pending reduce-scatter first).
  void beforeBackward(int key);
  /// After a unit key's backward of one microbatch.
  void afterBackward(int key, bool lastMicro);
  /// The tied embedding's gradient scratch for microbatch mb (zeroed on first use).
  float* embScratch(int mb);
  /// The embedding's last use in microbatch mb's backward on this rank is done.
  void embDone(int mb);
  /// Reduces the embedding class and waits for every bucket.
  void finish();

  /// ZeRO-3: all-gather the units of `key` into the full parameter buffer / drop non-owned parts.
  void gather(int key);
  void release(int key);
  void gatherClass(int cls);
  void releaseClass(int cls);
  /// ZeRO-3 checkpoint load: a full-size working buffer for the class / its owned part into the shard.
  void openClass(int cls);
  void commitClass(int cls);
  /// Largest parameter bytes this rank held at once (shards + working buffers) since the start.
  size_t peakResident() const { return peak_; }

 private:
  void post(int cls, int unit, std::function<void()> fn);
  void waitUnit(int cls, int unit);
  void waitAll();
  void loop();
  void reduceUnit(int cls, int unit);  // runs on the communication thread

  Ctx& c_;
  int zero_;
  std::vector<Buf> emb_;
  std::vector<uint8_t> embUsed_;
  std::vector<int> pending_[NCLS];
  std::deque<std::function<void()>> queue_;
  std::vector<std::function<void()>> deferred_;
  std::mutex mu_;
  std::condition_variable cv_, done_;
  bool stop_ = false;
  std::exception_ptr error_;          // the communication thread's first failure (under mu_)
  std::atomic<bool> failed_{false};  // error_ is set
  size_t peak_ = 0;
  void notePeak();
  std::unique_ptr<Ops> lane_;  // the communication thread's
  std::thread thread_;
};

}  // namespace trainer
