// runner.cc: the timing loop. Nothing is allocated between the barrier and the end of the timed
// iterations; inputs are written before timing and results checked after it, as nccl-tests does.
#include "perf/common/runner.h"

#include <fmt/format.h>

#include <chrono>
#include <set>
#include <stdexcept>

#include "perf/common/check.h"
#include "perf/common/values.h"

namespace strata::perf {

Runner::Runner(const Options& o, Coll coll, Backend& b) : o_(o), coll_(coll), b_(b), buffers_(o.maxBytes) {}

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
             nullptr, nullptr, buffers_.send(), buffers_.recv()};
  const size_t es = dtypeSize(dtype), r = static_cast<size_t>(b_.rank());
  auto* recvBase = static_cast<char*>(c.recvBase);
  c.send = inPlace ? recvBase + c.layout.sendInPlaceOffset * r * es : c.sendBase;
  c.recv = inPlace ? recvBase + c.layout.recvInPlaceOffset * r * es : recvBase;
  return c;
}

void Runner::warmUp(DType dtype, Op op, int root) {
  for (uint64_t bytes : {o_.maxBytes, o_.minBytes}) {
    CollCall c = makeCall(bytes, dtype, op, root, false);
    b_.prepare(c);
    for (int i = 0; i < o_.warmupIters; ++i) b_.run(c);
    b_.finish(c);
  }
}

double Runner::timeLoop(const CollCall& c) {
  b_.run(c);  // settles this size (connections, schedules) outside the timed loop
  b_.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (int it = 0; it < o_.iters; ++it) {
    if (o_.aggIters > 1) b_.groupStart();
    for (int a = 0; a < o_.aggIters; ++a) b_.run(c);
    if (o_.aggIters > 1) b_.groupEnd();
    if (o_.blocking == 1) b_.barrier();
  }
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
  const int rank = b_.rank(), n = b_.nranks();
  b_.prepare(c);
  if (o_.check) fillInputs(c, values, rank, n);
  Measure m;
  const double sec = timeLoop(c);
  m.timeUs = sec * 1e6;
  m.algBw = sec > 0 ? static_cast<double>(reportedBytes(c.layout, c.dtype)) / 1e9 / sec : 0;
  m.busBw = m.algBw * busFactor(coll_, n);
  for (int k = 0; k < o_.check; ++k) {
    fillInputs(c, values, rank, n);
    b_.run(c);
    const double wrong = static_cast<double>(countWrongElements(c, values, b_.result(c), rank, n));
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
