// gloo_movement.cc: all-gather, broadcast, all-to-all, gather, scatter and the send/recv ring shift
// with Gloo; the variants Gloo cannot run in place stage their input in scratch.
#include <gloo/allgather.h>
#include <gloo/alltoall.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/scatter.h>
#include <gloo/types.h>

#include <cstring>

#include "perf/peers/gloo_backend.h"
#include "perf/peers/gloo_ops.h"

namespace strata::perf {

using namespace gloo_ops;

std::function<void()> GlooBackend::prepareMovement(const CollCall& c) {
  const size_t bytes = c.layout.count * dtypeSize(c.dtype), n = static_cast<size_t>(nranks());
  const bool root = rank() == c.root;
  switch (c.coll) {
    case Coll::AllGather: {
      auto opts = std::make_shared<gloo::AllgatherOptions>(context_);
      if (!c.inPlace) opts->setInput(typed<char>(c.send), bytes);
      opts->setOutput(typed<char>(c.recv), n * bytes);
      return [opts] { gloo::allgather(*opts); };
    }
    case Coll::Broadcast: {
      auto opts = std::make_shared<gloo::BroadcastOptions>(context_);
      opts->setRoot(c.root);
      if (root && !c.inPlace) opts->setInput(typed<char>(c.send), bytes);
      opts->setOutput(typed<char>(c.recv), bytes);
      return [opts] { gloo::broadcast(*opts); };
    }
    case Coll::AllToAll: {  // Gloo cannot exchange in place: in place stages the input first
      auto opts = std::make_shared<gloo::AlltoallOptions>(context_);
      const char* in = static_cast<const char*>(c.send);
      char* stage = nullptr;
      if (c.inPlace) {
        scratch_.resize(n * bytes);
        stage = scratch_.data();
        in = stage;
      }
      opts->setInput(typed<char>(in), n * bytes);
      opts->setOutput(typed<char>(c.recv), n * bytes);
      void* recv = c.recv;
      return [opts, stage, recv, n, bytes] {
        if (stage) std::memcpy(stage, recv, n * bytes);
        gloo::alltoall(*opts);
      };
    }
    case Coll::Gather: {
      auto opts = std::make_shared<gloo::GatherOptions>(context_);
      opts->setRoot(c.root);
      opts->setInput(typed<char>(c.send), bytes);
      if (root) opts->setOutput(typed<char>(c.recv), n * bytes);
      return [opts] { gloo::gather(*opts); };
    }
    case Coll::Scatter: {
      auto opts = std::make_shared<gloo::ScatterOptions>(context_);
      opts->setRoot(c.root);
      if (root) {
        std::vector<char*> parts;
        for (size_t p = 0; p < n; ++p) parts.push_back(typed<char>(c.send) + p * bytes);
        opts->setInputs(parts, bytes);
      }
      opts->setOutput(typed<char>(c.recv), bytes);
      return [opts] { gloo::scatter(*opts); };
    }
    default: {  // send/recv: a ring shift over unbound buffers; in place stages the outgoing data
      const int next = (rank() + 1) % nranks(), prev = (rank() + nranks() - 1) % nranks();
      const void* src = c.send;
      char* stage = nullptr;
      if (c.inPlace) {
        scratch_.resize(bytes);
        stage = scratch_.data();
        src = stage;
      }
      std::shared_ptr<gloo::transport::UnboundBuffer> out(
          context_->createUnboundBuffer(const_cast<void*>(src), bytes).release());
      std::shared_ptr<gloo::transport::UnboundBuffer> in(context_->createUnboundBuffer(c.recv, bytes).release());
      const uint64_t slot = gloo::Slot::build(0x5e, 0);
      void* recv = c.recv;
      return [out, in, stage, recv, bytes, next, prev, slot] {
        if (stage) std::memcpy(stage, recv, bytes);
        out->send(next, slot);
        in->recv(prev, slot);
        in->waitRecv();
        out->waitSend();
      };
    }
  }
}

}  // namespace strata::perf
