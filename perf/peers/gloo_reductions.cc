// gloo_reductions.cc: all-reduce (ring, bcube, or the halving-doubling algorithm object), reduce,
// and reduce-scatter (halving-doubling, in place over the whole input) with Gloo.
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>

#include <cstring>

#include "perf/peers/gloo_backend.h"
#include "perf/peers/gloo_ops.h"

namespace strata::perf {

using namespace gloo_ops;

std::function<void()> GlooBackend::prepareReduction(const CollCall& c) {
  const size_t count = c.layout.count, n = static_cast<size_t>(nranks());
  const size_t bytes = count * dtypeSize(c.dtype);
  return withGlooType(c.dtype, [&](auto tag) -> std::function<void()> {
    using T = decltype(tag);
    switch (c.coll) {
      case Coll::AllReduce: {
        if (algo_ == "halving_doubling") {  // the classic algorithm object: in place only
          auto alg = std::make_shared<gloo::AllreduceHalvingDoubling<T>>(
              context_, std::vector<T*>{typed<T>(c.recv)}, static_cast<int>(count), reductionFunction<T>(c.op));
          const void* send = c.inPlace ? nullptr : c.send;
          void* recv = c.recv;
          return [alg, send, recv, bytes] {
            if (send) std::memcpy(recv, send, bytes);
            alg->run();
          };
        }
        auto opts = std::make_shared<gloo::AllreduceOptions>(context_);
        opts->setAlgorithm(algo_ == "bcube" ? gloo::AllreduceOptions::Algorithm::BCUBE
                                            : gloo::AllreduceOptions::Algorithm::RING);
        if (!c.inPlace) opts->setInput(typed<T>(c.send), count);
        opts->setOutput(typed<T>(c.recv), count);
        opts->setReduceFunction(reduceFn<T>(c.op));
        return [opts] { gloo::allreduce(*opts); };
      }
      case Coll::Reduce: {
        auto opts = std::make_shared<gloo::ReduceOptions>(context_);
        opts->setRoot(c.root);
        if (!c.inPlace) opts->setInput(typed<T>(c.send), count);
        opts->setOutput(typed<T>(c.recv), count);
        opts->setReduceFunction(reduceFn<T>(c.op));
        return [opts] { gloo::reduce(*opts); };
      }
      default: {  // reduce-scatter: halving-doubling in place over the whole input
        T* work = typed<T>(c.recvBase);
        const void* send = nullptr;
        void* recv = nullptr;
        if (!c.inPlace) {  // stage the input, then copy the result out
          scratch_.resize(n * bytes);
          work = reinterpret_cast<T*>(scratch_.data());
          send = c.send;
          recv = c.recv;
        }
        auto alg = std::make_shared<gloo::ReduceScatterHalvingDoubling<T>>(
            context_, std::vector<T*>{work}, static_cast<int>(n * count),
            std::vector<int>(n, static_cast<int>(count)), reductionFunction<T>(c.op));
        return [alg, work, send, recv, bytes, n] {
          if (send) std::memcpy(static_cast<void*>(work), send, n * bytes);
          alg->run();
          if (recv) std::memcpy(recv, static_cast<const void*>(work), bytes);
        };
      }
    }
  });
}

}  // namespace strata::perf
