// dp.cc: the communication thread, gradient buckets and ZeRO parameter gathers.
#include "dp.h"

namespace trainer {

GradSync::GradSync(Ctx& c) : c_(c), zero_(c.cfg.zero), lane_(c.ops->sibling()) {
  for (int k = 0; k < NCLS; ++k) pending_[k].assign(c.ps->cls[k].units.size(), 0);
  thread_ = std::thread([this] { loop(); });
}

GradSync::~GradSync() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void GradSync::loop() {
  UseOps use(lane_.get());
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    fn();
  }
}

void GradSync::post(int cls, int unit, std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    pending_[cls][size_t(unit)]++;
    // The bucket's data is what the training lane has enqueued so far; done means finished.
    queue_.push_back([this, cls, unit, fn = std::move(fn), ready = c_.ops->record()] {
      std::exception_ptr err;
      if (!failed_.load()) {  // after a failure the rest are skipped: the step is lost anyway
        try {
          lane_->waitFor(ready);
          fn();
          lane_->sync();
        } catch (...) {  // a collective failed (a peer died): the training thread rethrows it
          err = std::current_exception();
        }
      }
      std::lock_guard<std::mutex> lk2(mu_);
      if (err && !error_) error_ = err, failed_ = true;
      pending_[cls][size_t(unit)]--;
      done_.notify_all();
    });
  }
  cv_.notify_all();
}

void GradSync::waitUnit(int cls, int unit) {
  std::unique_lock<std::mutex> lk(mu_);
  if (error_) std::rethrow_exception(error_);
  if (pending_[cls][size_t(unit)] == 0) return;
  double t0 = now();
  done_.wait(lk, [&] { return pending_[cls][size_t(unit)] == 0; });
  if (error_) std::rethrow_exception(error_);
  c_.rec.add({t0, now(), Lane::Main, Kind::GradWait, 0, "wait for gradients",
              fmt::format("\"class\": \"{}\", \"unit\": {}", clsName(cls), unit)});
}

void GradSync::waitAll() {
  std::unique_lock<std::mutex> lk(mu_);
  auto idle = [&] {
    for (auto& v : pending_)
      for (int p : v)
        if (p) return false;
    return true;
  };
  if (error_) std::rethrow_exception(error_);
  if (idle()) return;
  double t0 = now();
  done_.wait(lk, idle);
  if (error_) std::rethrow_exception(error_);
  c_.rec.add({t0, now(), Lane::Main, Kind::GradWait, 0, "wait for gradients", "\"unit\": \"all\""});
}

void GradSync::beginStep(int microbatches) {
  for (auto& cb : c_.ps->cls) c_.ops->zero(cb.grad.data(), cb.grad.size() * sizeof(float));
  emb_.assign(size_t(microbatches), {});
  embUsed_.assign(size_t(microbatches), 0);
}

void GradSync::beforeBackward(int key) {
  for (auto [k, u] : c_.ps->unitsOf(key)) {
    if (k == CE) continue;
    if (zero_ >= 2) waitUnit(k, u);
    ClassBuf& cb = c_.ps->cls[k];
    const Unit& un = cb.units[size_t(u)];
    c_.ops->zero(cb.scratch.data() + un.begin, (un.end - un.begin) * sizeof(float));
  }
}

void GradSync::reduceUnit(int k, int u) {
  ClassBuf& cb = c_.ps->cls[k];
  Group& g = c_.mesh->red[k];
  const Unit& un = cb.units[size_t(u)];
  if (!g.active()) return;
  const double t0 = now();
  if (zero_ == 0) Ctx::laneAllReduce(*lane_, g, cb.grad.data() + un.begin, un.end - un.begin);
  else Ctx::laneReduceScatter(*lane_, g, cb.grad.data() + un.begin, cb.grad.data() + cb.shardBegin(un), cb.shardLen(un));
  c_.collective(g, zero_ == 0 ? "all_reduce" : "reduce_scatter", (un.end - un.begin) * sizeof(float), t0, Lane::Comm);
}

void GradSync::afterBackward(int key, bool lastMicro) {
  for (auto [k, u] : c_.ps->unitsOf(key)) {
    if (k == CE) continue;
    ClassBuf& cb = c_.ps->cls[k];
    const Unit& un = cb.units[size_t(u)];
    if (zero_ < 2) {
      c_.ops->add(cb.grad.data() + un.begin, cb.scratch.data() + un.begin, un.end - un.begin);
      if (!lastMicro) continue;
      auto fn = [this, k = k, u = u] { reduceUnit(k, u); };
      if (c_.cfg.noOverlap) deferred_.push_back([this, k = k, u = u, fn] { post(k, u, fn); });
      else post(k, u, fn);
    } else {
      // ZeRO-2/3: reduce-scatter this microbatch's gradient now and add it to the shard.
      post(k, u, [this, k = k, u = u] {
        ClassBuf& b = c_.ps->cls[k];
        const Unit& n = b.units[size_t(u)];
        Group& g = c_.mesh->red[k];
        const size_t len = b.shardLen(n), at = b.shardBegin(n);
        if (!g.active()) {
          lane_->add(b.grad.data() + at, b.scratch.data() + at, len);
          return;
        }
        Buf tmp(len);
        const double t0 = now();
        Ctx::laneReduceScatter(*lane_, g, b.scratch.data() + n.begin, tmp.data(), len);
        c_.collective(g, "reduce_scatter", (n.end - n.begin) * sizeof(float), t0, Lane::Comm);
        lane_->add(b.grad.data() + at, tmp.data(), len);
      });
      if (c_.cfg.noOverlap) waitUnit(k, u);
    }
  }
}

float* GradSync::embScratch(int mb) {
  auto& s = emb_[size_t(mb)];
  if (!embUsed_[size_t(mb)]) {
    s.assign(c_.ps->cls[CE].size, 0.f);
    embUsed_[size_t(mb)] = 1;
  }
  return s.data();
}

void GradSync::embDone(int mb) {
  ClassBuf& cb = c_.ps->cls[CE];
  auto& s = emb_[size_t(mb)];
  c_.ops->add(cb.grad.data(), s.data(), cb.size);
  s.releaseMemory();
  embUsed_[size_t(mb)] = 0;
}

void GradSync::finish() {
  for (auto& fn : deferred_) fn();
  deferred_.clear();
  if (c_.mesh->inClass[CE])
    for (int u = 0; u < int(c_.ps->cls[CE].units.size()); ++u) post(CE, u, [this, u] { reduceUnit(CE, u); });
  waitAll();
}

// ZeRO-3: each class keeps only its shard in `param`; gather() all-gathers a unit into the class'
// reusable working buffer (its capacity grows to the largest unit and stays), release() drops it.
void GradSync::notePeak() {
  size_t r = 0;
  for (const ClassBuf& cb : c_.ps->cls) r += cb.residentBytes();
  peak_ = std::max(peak_, r);
}

void GradSync::gather(int key) {
  for (auto [k, u] : c_.ps->unitsOf(key)) {
    if (k == CE) continue;
    ClassBuf& cb = c_.ps->cls[k];
    const Unit& un = cb.units[size_t(u)];
    if (cb.workEnd != cb.workBegin) throw std::logic_error("ZeRO-3: two units of a class gathered at once");
    cb.work.resize(un.end - un.begin);
    cb.workBegin = un.begin, cb.workEnd = un.end;
    c_.allGather(c_.mesh->gat[k], cb.param.data() + cb.shardIndex(un), cb.work.data(), cb.shardLen(un));
  }
  notePeak();
}

void GradSync::release(int key) {
  for (auto [k, u] : c_.ps->unitsOf(key)) {
    if (k == CE) continue;
    ClassBuf& cb = c_.ps->cls[k];
    cb.workBegin = cb.workEnd = 0;  // the buffer's memory is reused by the next unit
  }
}

void GradSync::gatherClass(int k) {
  ClassBuf& cb = c_.ps->cls[k];
  if (k == CE && !c_.mesh->inClass[CE]) return;
  cb.work.resize(cb.size);
  cb.workBegin = 0, cb.workEnd = cb.size;
  for (const Unit& un : cb.units)
    c_.allGather(c_.mesh->gat[k], cb.param.data() + cb.shardIndex(un), cb.work.data() + un.begin, cb.shardLen(un));
  notePeak();
}

void GradSync::releaseClass(int k) {
  ClassBuf& cb = c_.ps->cls[k];
  if (!cb.sharded) return;
  cb.workBegin = cb.workEnd = 0;
  cb.work.releaseMemory();  // a whole class was materialised: give the memory back
}

void GradSync::openClass(int k) {
  ClassBuf& cb = c_.ps->cls[k];
  cb.work.assign(cb.size, 0.f);
  cb.workBegin = 0, cb.workEnd = cb.size;
}

void GradSync::commitClass(int k) {
  ClassBuf& cb = c_.ps->cls[k];
  for (const Unit& un : cb.units)
    c_.ops->copy(cb.param.data() + cb.shardIndex(un), cb.work.data() + cb.shardBegin(un),
                 cb.shardLen(un) * sizeof(float));
}

}  // namespace trainer
