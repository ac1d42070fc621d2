// runner.cc: the timing loop. Nothing is allocated between the barrier and the end of the timed
// iterations; inputs are written before timing and results checked after it, as nccl-tests does.
// Device memory: inputs are made on the host and copied in, results copied out, outside the timed
// loop; the loop enqueues every iteration and the clock stops after the stream is synchronized.
#include "perf/common/runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <stdexcept>

#include "perf/common/check.h"
#include "perf/common/device.h"
#include "perf/common/values.h"

namespace strata::perf {

namespace {

const char* shift(const void* p, const void* from, const void* to) {
  return static_cast<const char*>(to) + (static_cast<const char*>(p) - static_cast<const char*>(from));
}

// Bytes of the receive allocation a call touches, from its start (in place: the input too).
size_t recvSpan(const CollCall& c) {
  const size_t es = dtypeSize(c.dtype);
  auto end = [&](const void* p, size_t n) {
    return static_cast<size_t>(static_cast<const char*>(p) - static_cast<const char*>(c.recvBase)) + n * es;
  };
  size_t span = end(c.recv, c.layout.recvCount);
  if (c.inPlace) span = std::max(span, end(c.send, c.layout.sendCount));
  return span;
}

}  // namespace

Runner::Runner(const Options& o, Coll coll, Backend& b, const DeviceRank* device)
    : o_(o), coll_(coll), b_(b), buffers_(o.maxBytes, o.hostAlloc, o.hostFree), dev_(device) {}

void Runner::checkRequest() const {
  if (collHasRoot(coll_) && !o_.allRoots && o_.root >= b_.nranks())
    throw UsageError(fmt::format("-r/--root {} is not a rank (the world has {} ranks)", o_.root, b_.nranks()));
  if (o_.allDtypes || o_.allOps) return;  // "all" skips what the library lacks
  for (DType dtype : o_.dtypes)
    for (Op op : collReduces(coll_) ? o_.ops : std::vector<Op>{Op::Sum}) {
      const std::string why = b_.unsupported(coll_, dtype, op);
      if (!why.empty()) throw UsageError(why);
    }
}

std::vector<int> Runner::roots() const {
  if (!collHasRoot(coll_)) return {-1};
  if (!o_.allRoots) return {o_.root};
  std::vector<int> v;
  for (int r = 0; r < b_.nranks(); ++r) v.push_back(r);
  return v;
}

CollCall Runner::makeCall(size_t bytes, DType dtype, Op op, int root, bool inPlace) const {
  CollCall c{coll_, dtype, op, root, inPlace, layoutFor(coll_, bytes, dtype, b_.nranks()),
             nullptr, nullptr, dev_ ? dev_->send() : buffers_.send(), dev_ ? dev_->recv() : buffers_.recv()};
  if (dev_) c.stream = dev_->stream();
  const size_t es = dtypeSize(dtype), r = static_cast<size_t>(b_.rank());
  auto* recvBase = static_cast<char*>(c.recvBase);
  c.send = inPlace ? recvBase + c.layout.sendInPlaceOffset * r * es : c.sendBase;
  c.recv = inPlace ? recvBase + c.layout.recvInPlaceOffset * r * es : recvBase;
  return c;
}

CollCall Runner::hostView(const CollCall& c) const {
  if (!dev_) return c;
  CollCall h = c;
  h.sendBase = buffers_.send();
  h.recvBase = buffers_.recv();
  h.send = shift(c.send, c.inPlace ? c.recvBase : c.sendBase, c.inPlace ? h.recvBase : h.sendBase);
  h.recv = const_cast<char*>(shift(c.recv, c.recvBase, h.recvBase));
  h.stream = nullptr;
  return h;
}

void Runner::sync() {
  if (dev_) dev_->sync();
}

void Runner::fill(const CollCall& c, const Values& values) {
  const CollCall h = hostView(c);
  fillInputs(h, values, b_.rank(), b_.nranks());
  if (!dev_) return;
  dev_->upload(c.recvBase, h.recvBase, recvSpan(h));
  if (!c.inPlace) dev_->upload(c.sendBase, h.sendBase, c.layout.sendCount * dtypeSize(c.dtype));
}

int64_t Runner::wrongElements(const CollCall& c, const Values& values) {
  sync();
  const CollCall h = hostView(c);
  const void* result = b_.result(c);
  if (dev_) {
    dev_->download(h.recvBase, c.recvBase, recvSpan(h));
    result = shift(result, c.recvBase, h.recvBase);
  }
  return static_cast<int64_t>(countWrongElements(h, values, result, b_.rank(), b_.nranks()));
}

void Runner::warmUp(DType dtype, Op op, int root) {
  for (uint64_t bytes : {o_.maxBytes, o_.minBytes}) {
    CollCall c = makeCall(bytes, dtype, op, root, false);
    b_.prepare(c);
    for (int i = 0; i < o_.warmupIters; ++i) b_.run(c);
    sync();
    b_.finish(c);
  }
}

double Runner::timeLoop(const CollCall& c) {
  b_.run(c);  // settles this size (connections, schedules) outside the timed loop
  sync();
  b_.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (int it = 0; it < o_.iters; ++it) {
    if (o_.aggIters > 1) b_.groupStart();
    for (int a = 0; a < o_.aggIters; ++a) b_.run(c);
    if (o_.aggIters > 1) b_.groupEnd();
    if (o_.blocking == 1) {
      sync();
      b_.barrier();
    }
  }
  sync();
  const auto t1 = std::chrono::steady_clock::now();
  const double sec = std::chrono::duration<double>(t1 - t0).count() / (o_.iters * o_.aggIters);
  switch (o_.average) {
    case 0: return b_.allReduce(b_.rank() == 0 ? sec : 0, Backend::Agg::Sum);
    case 2: return b_.allReduce(sec, Backend::Agg::Min);
    case 3: return b_.allReduce(sec, Backend::Agg::Max);
    default: return b_.allReduce(sec, Backend::Agg::Sum) / b_.nranks();
  }
}

Measure Runner::bench(const CollCall& c, const Values& values) {
  const int n = b_.nranks();
  b_.prepare(c);
  if (o_.check) fill(c, values);
  Measure m;
  const double sec = timeLoop(c);
  m.timeUs = sec * 1e6;
  m.algBw = sec > 0 ? static_cast<double>(reportedBytes(c.layout, c.dtype)) / 1e9 / sec : 0;
  m.busBw = m.algBw * busFactor(coll_, n);
  for (int k = 0; k < o_.check; ++k) {
    fill(c, values);
    b_.run(c);
    const double wrong = static_cast<double>(wrongElements(c, values));
    m.wrong = static_cast<int64_t>(b_.allReduce(wrong, Backend::Agg::Sum));
    if (m.wrong) break;
  }
  b_.finish(c);
  return m;
}

int64_t Runner::run(Report* report) {
  report_ = report;
  const std::vector<int> rootList = roots();
  const std::vector<Op> ops = collReduces(coll_) ? o_.ops : std::vector<Op>{Op::Sum};
  std::set<std::string> skipped;
  int64_t wrong = 0;
  for (DType dtype : o_.dtypes) {
    for (Op op : ops) {
      std::string why = b_.unsupported(coll_, dtype, op);
      if (!why.empty()) {
        if (report_ && skipped.insert(why).second) report_->note("skipped: " + why);
        continue;
      }
      const Values values(dtype, op, b_.nranks());
      for (int root : rootList) {
        warmUp(dtype, op, root);
        for (uint64_t bytes : o_.sizes()) {
          Row row;
          const CollCall out = makeCall(bytes, dtype, op, root, false);
          row.bytes = reportedBytes(out.layout, dtype);
          row.count = out.layout.count;
          row.dtype = dtype;
          row.op = collReduces(coll_) ? opName(op) : "none";
          row.root = root;
          row.out = bench(out, values);
          row.in = bench(makeCall(bytes, dtype, op, root, true), values);
          wrong += row.out.wrong + row.in.wrong;
          if (report_) report_->row(row);
        }
      }
    }
  }
  return wrong;
}

}  // namespace strata::perf
