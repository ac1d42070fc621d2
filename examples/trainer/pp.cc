// pp.cc: the pipeline executor: this rank's passes tick by tick, each tick's transfers in one group.
#include "pp.h"

#include <map>
#include <tuple>

#include <fmt/format.h>

namespace trainer {

Pipeline::Pipeline(Ctx& c, Model& m) : c_(c), model_(m), split_(splitBackward(c.cfg)) {
  mine_ = scheduleFor(c.cfg, c.mesh->coord[PP]);
  simulateSchedule(c.cfg, c.mesh->coord[PP], &tickAction_, &tickMsgs_);
}

void Pipeline::run(int rowsPerMicro) {
  Scope whole(c_.rec, Kind::Phase, 0, "pipeline");
  const int P = c_.cfg.pp, me = c_.mesh->coord[PP];
  const size_t msgLen = size_t(rowsPerMicro) * size_t(c_.C);
  std::map<std::tuple<int, int, int>, Buf> inbox;  // (grad, mb, chunk) -> data, on the lane
  Buf produced;
  Ops& o = *c_.ops;
  for (size_t t = 0; t < tickAction_.size(); ++t) {
    produced.clear();
    if (tickAction_[t] >= 0) {
      const Action& a = mine_[size_t(tickAction_[t])];
      const int chunk = a.v * P + me;
      std::string name = fmt::format("{} mb {}", char(a.op), a.mb);
      if (c_.cfg.chunks() > 1) name += fmt::format(" chunk {}", chunk);
      Scope span(c_.rec, Kind::Pass, char(a.op), std::move(name),
                 fmt::format("\"mb\": {}, \"chunk\": {}, \"tick\": {}", a.mb, chunk, t));
      if (a.op == Op::W) {
        model_.backwardWeight(a.v, a.mb);
      } else {
        auto it = inbox.find({a.op == Op::B, a.mb, chunk});
        const float* in = it == inbox.end() ? nullptr : it->second.data();
        if (a.op == Op::F) model_.forward(a.v, a.mb, in, produced);
        else if (split_) model_.backwardInput(a.v, a.mb, in, produced);
        else model_.backward(a.v, a.mb, in, produced);
        if (it != inbox.end()) inbox.erase(it);
      }
    }
    // This tick's transfers that involve this rank, all in one group.
    bool any = false;
    for (const Transfer& m : tickMsgs_[t])
      if ((m.src == me) != (m.dst == me)) any = true;
    for (const Transfer& m : tickMsgs_[t])
      if (m.src == me && m.dst == me) inbox[{m.grad, m.mb, m.chunk}] = produced;
    if (!any) continue;
    const double c0 = now();
    size_t bytes = 0;
    std::string what;
    {
      strata::Group grp;
      for (const Transfer& m : tickMsgs_[t]) {
        if (m.src == m.dst) continue;
        if (m.src == me) {
          if (o.device())
            strata::check(strataSendStream(produced.data(), msgLen, strataFloat32, m.dst, c_.mesh->pp.comm.get(),
                                           o.stream()),
                          c_.mesh->pp.comm.get());
          else
            c_.mesh->pp.comm.send(produced.data(), msgLen, m.dst);
          what += fmt::format("{}send {} mb {} to stage {}", what.empty() ? "" : ", ", m.grad ? "grad" : "act", m.mb, m.dst);
        }
        if (m.dst == me) {
          auto& buf = inbox[{m.grad, m.mb, m.chunk}];
          buf.resize(msgLen);
          if (o.device())
            strata::check(strataRecvStream(buf.data(), msgLen, strataFloat32, m.src, c_.mesh->pp.comm.get(), o.stream()),
                          c_.mesh->pp.comm.get());
          else
            c_.mesh->pp.comm.recv(buf.data(), msgLen, m.src);
          what += fmt::format("{}recv {} mb {} from stage {}", what.empty() ? "" : ", ", m.grad ? "grad" : "act", m.mb, m.src);
        }
        bytes += msgLen * sizeof(float);
      }
      grp.end();
    }
    c_.rec.add({c0, now(), Lane::Main, Kind::Pipe, 0, "send/recv",
                fmt::format("\"comm\": \"pp\", \"ranks\": {}, \"bytes\": {}, \"tick\": {}, \"what\": \"{}\"",
                            c_.mesh->pp.size, bytes, t, what)});
  }
}

}  // namespace trainer
