// gloo_backend.cc: the Gloo backend's setup, support matrix and helper collectives; the measured
// collectives are built once per size in prepare() (gloo_reductions.cc, gloo_movement.cc).
#include "perf/peers/gloo_backend.h"

#include <fmt/format.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/config.h>

#include "perf/peers/gloo_ops.h"

namespace strata::perf {

using namespace gloo_ops;

GlooBackend::GlooBackend(std::shared_ptr<gloo::Context> context, std::string algo)
    : context_(std::move(context)), algo_(std::move(algo)) {}

std::string GlooBackend::describe() const {
  return fmt::format("Gloo {}.{}.{} (tcp, all-reduce {})", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH,
                     algo_);
}

std::string GlooBackend::unsupported(Coll coll, DType t, Op op) const {
  if (!collReduces(coll)) return "";
  if (t == strataBfloat16 || t == strataFloat8e4m3 || t == strataFloat8e5m2)
    return fmt::format("Gloo has no {} reductions", dtypeName(t));
  if (op == Op::Avg || op == Op::MulSum)
    return fmt::format("Gloo has no {} reduction (use sum, prod, max, min)", opName(op));
  return "";
}

const void* GlooBackend::result(const CollCall& c) const {
  return (c.coll == Coll::ReduceScatter && c.inPlace) ? c.recvBase : c.recv;
}

void GlooBackend::finish(const CollCall&) {
  call_ = nullptr;
  scratch_.clear();
  scratch_.shrink_to_fit();
}

void GlooBackend::prepare(const CollCall& c) {
  if (c.layout.count == 0) call_ = [] {};  // Gloo's algorithms expect elements
  else call_ = collReduces(c.coll) ? prepareReduction(c) : prepareMovement(c);
}

void GlooBackend::barrier() {
  gloo::BarrierOptions opts(context_);
  gloo::barrier(opts);
}

double GlooBackend::allReduce(double v, Agg how) {
  gloo::AllreduceOptions opts(context_);
  opts.setOutput(&v, 1);
  opts.setReduceFunction(how == Agg::Min ? reduceFn<double>(Op::Min) : how == Agg::Max ? reduceFn<double>(Op::Max)
                                                                                       : reduceFn<double>(Op::Sum));
  gloo::allreduce(opts);
  return v;
}

void GlooBackend::allGather(const void* mine, void* all, size_t bytes) {
  gloo::AllgatherOptions opts(context_);
  opts.setInput(typed<char>(mine), bytes);
  opts.setOutput(static_cast<char*>(all), bytes * static_cast<size_t>(nranks()));
  gloo::allgather(opts);
}

}  // namespace strata::perf
