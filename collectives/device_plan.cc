// device_plan.cc: algorithm, protocol and channel choice for device collectives (deterministic
// mode's reductions: the rank-order tree), and the send/recv/copy entries of the point-to-point
// based ones (see device_plan.h).
#include "collectives/device_plan.h"

#include <algorithm>

#include "kernels/host_reduce.h"
#include "transport/config.h"

namespace strata {

DevPlanParams DevPlanParams::fromConfig(int rank, int nranks) {
  const Config& c = config();
  DevPlanParams p;
  p.rank = rank;
  p.nranks = nranks;
  p.channels = c.cudaChannels;
  p.slotBytes = c.cudaSlotBytes;
  p.llSlotBytes = c.cudaLLSlotBytes;
  p.llMaxBytes = c.cudaLLMaxBytes;
  p.treeMaxBytes = c.cudaTreeMaxBytes;
  p.algo = c.cudaAlgo;
  p.proto = c.cudaProto;
  return p;
}

namespace {

dev::Proto chooseProto(const DevPlanParams& p, uint64_t bytes) {
  if (p.simpleOnly) return dev::Proto::Simple;
  if (p.proto == "ll") return dev::Proto::LL;
  if (p.proto == "simple") return dev::Proto::Simple;
  return bytes <= p.llMaxBytes ? dev::Proto::LL : dev::Proto::Simple;
}

/// Channels for `bytes` in total: enough that each carries a useful share, at most the setting.
int chooseChannels(const DevPlanParams& p, dev::Proto proto, uint64_t bytes) {
  const uint64_t per = proto == dev::Proto::LL ? (8u << 10) : (128u << 10);
  const uint64_t want = std::max<uint64_t>(1, bytes / per);
  return static_cast<int>(std::min<uint64_t>(want, static_cast<uint64_t>(std::min(p.channels, dev::kMaxChannels))));
}

dev::DevWork baseWork(const DevPlanParams& p) {
  dev::DevWork w;
  w.rank = p.rank;
  w.nranks = p.nranks;
  w.slotBytes = p.slotBytes;
  w.llSlotBytes = p.llSlotBytes;
  return w;
}

}  // namespace

Status planDeviceP2P(const DevPlanParams& p, const std::vector<DevP2P>& ops, std::vector<DevLaunch>* out) {
  // Self sends pair with self receives, in order, into copies.
  std::vector<const DevP2P*> selfSends, selfRecvs;
  for (const DevP2P& o : ops)
    if (o.peer == p.rank && o.bytes) (o.isSend ? selfSends : selfRecvs).push_back(&o);
  if (selfSends.size() != selfRecvs.size())
    return invalidUsage("device send/recv to self: {} sends but {} receives in the group", selfSends.size(),
                        selfRecvs.size());
  // Round k holds the k-th entry of each (peer, direction): entries that share a connection
  // stay in order, and the k-th send to a peer meets that peer's k-th receive in its round k.
  std::vector<std::vector<dev::P2POp>> rounds;
  std::vector<int> seen(static_cast<size_t>(2 * p.nranks), 0);
  auto add = [&](size_t round, dev::P2POp op) {
    if (rounds.size() <= round) rounds.resize(round + 1);
    op.proto = chooseProto(p, op.bytes);  // both ends of the connection see the same size
    rounds[round].push_back(op);
  };
  for (size_t i = 0; i < selfSends.size(); ++i) {
    if (selfSends[i]->bytes != selfRecvs[i]->bytes)
      return invalidUsage("device send/recv to self: send of {} bytes meets a receive of {} bytes", selfSends[i]->bytes,
                          selfRecvs[i]->bytes);
    add(0, dev::P2POp{static_cast<const char*>(selfSends[i]->buf), static_cast<char*>(selfRecvs[i]->buf),
                      selfSends[i]->bytes, p.rank, dev::OpKind::Copy, dev::Proto::Simple});
  }
  for (const DevP2P& o : ops) {
    if (o.peer == p.rank || o.bytes == 0) continue;
    const size_t key = static_cast<size_t>(2 * o.peer + (o.isSend ? 0 : 1));
    const size_t round = static_cast<size_t>(seen[key]++);
    add(round, o.isSend ? dev::P2POp{static_cast<const char*>(o.buf), nullptr, o.bytes, o.peer, dev::OpKind::Send, {}}
                        : dev::P2POp{nullptr, static_cast<char*>(o.buf), o.bytes, o.peer, dev::OpKind::Recv, {}});
  }
  // One launch per round: its entries run concurrently, one block each. Splitting a round over
  // several launches could deadlock (each launch waits for entries of a peer's later launch).
  for (const auto& round : rounds) {
    if (round.size() > static_cast<size_t>(dev::kMaxP2POps))
      return invalidUsage("device send/recv: {} concurrent entries in one group (at most {}: one per peer and "
                          "direction, plus copies to self)", round.size(), dev::kMaxP2POps);
    DevLaunch l;
    l.work = baseWork(p);
    l.work.coll = dev::Coll::P2P;
    l.work.dtype = strataUint8;
    l.work.nch = 1;
    for (size_t i = 0; i < round.size(); ++i) l.work.ops[i] = round[i];
    l.work.nops = static_cast<int>(round.size());
    l.blocks = static_cast<int>(round.size());
    out->push_back(l);
  }
  return OkStatus();
}

Status planDeviceCollective(const DevPlanParams& p, const DevCall& call, std::vector<DevLaunch>* out) {
  const int n = p.nranks, r = p.rank;
  const size_t es = kernels::dtypeSize(call.dtype);
  const size_t blockBytes = call.count * es;
  if (call.count == 0) return OkStatus();
  const char* in = static_cast<const char*>(call.send);
  char* outp = static_cast<char*>(call.recv);
  // The point-to-point based collectives.
  if (call.coll == CollType::AllToAll || call.coll == CollType::Gather || call.coll == CollType::Scatter) {
    std::vector<DevP2P> ops;
    if (call.coll == CollType::AllToAll) {
      if (in == outp && n > 1)
        return invalidArgument("AllToAll: in place on device buffers is not supported (use separate send and "
                               "receive buffers)");
      for (int q = 0; q < n; ++q) {
        ops.push_back(DevP2P{true, const_cast<char*>(in) + q * blockBytes, blockBytes, q});
        ops.push_back(DevP2P{false, outp + q * blockBytes, blockBytes, q});
      }
    } else if (call.coll == CollType::Gather) {
      if (r == call.root) {
        for (int q = 0; q < n; ++q) ops.push_back(DevP2P{false, outp + q * blockBytes, blockBytes, q});
        if (in != outp + r * blockBytes) ops.push_back(DevP2P{true, const_cast<char*>(in), blockBytes, r});
        else ops.erase(ops.begin() + r);  // in place: the root's block is already there
      } else {
        ops.push_back(DevP2P{true, const_cast<char*>(in), blockBytes, call.root});
      }
    } else {  // Scatter
      if (r == call.root) {
        for (int q = 0; q < n; ++q) ops.push_back(DevP2P{true, const_cast<char*>(in) + q * blockBytes, blockBytes, q});
        if (outp != in + r * blockBytes) ops.push_back(DevP2P{false, outp, blockBytes, r});
        else ops.erase(ops.begin() + r);
      } else {
        ops.push_back(DevP2P{false, outp, blockBytes, call.root});
      }
    }
    return planDeviceP2P(p, ops, out);
  }

  DevLaunch l;
  dev::DevWork& w = l.work;
  w = baseWork(p);
  w.dtype = static_cast<uint8_t>(call.dtype);
  w.op = static_cast<uint8_t>(call.op);
  w.divide = call.avg;
  w.scale = call.premul;
  w.scalar = call.scalarBits;
  w.root = call.root;
  w.in = in;
  w.out = outp;
  w.count = call.count;
  uint64_t total = blockBytes;
  switch (call.coll) {
    case CollType::AllReduce: w.coll = dev::Coll::AllReduce; break;
    case CollType::ReduceScatter: w.coll = dev::Coll::ReduceScatter; total = blockBytes * n; break;
    case CollType::AllGather: w.coll = dev::Coll::AllGather; total = blockBytes * n; break;
    case CollType::Broadcast: w.coll = dev::Coll::Broadcast; break;
    case CollType::Reduce: w.coll = dev::Coll::Reduce; break;
    default: return internalError("planDeviceCollective: unexpected collective {}", collName(call.coll));
  }
  // Ranks that take no part in a rooted collective's buffers still relay (chains pass through).
  if (call.coll == CollType::Reduce && r != call.root) w.out = nullptr;
  w.proto = chooseProto(p, total);
  if (p.deterministic && isReduction(call.coll)) {
    w.algo = dev::Algo::RankTree;
  } else if (call.coll == CollType::AllReduce) {
    const bool tree = p.algo == "tree" || (p.algo == "auto" && n > 2 && total <= p.treeMaxBytes);
    w.algo = tree && n > 1 ? dev::Algo::Tree : dev::Algo::Ring;
  }
  w.nch = chooseChannels(p, w.proto, total);
  // The rank tree talks to every peer on every channel; the network proxy shadows every proxied
  // peer on channel 0 only (device_proxy_layout.h).
  if (w.algo == dev::Algo::RankTree && p.simpleOnly) w.nch = 1;
  l.blocks = w.nch;
  out->push_back(l);
  return OkStatus();
}

}  // namespace strata
