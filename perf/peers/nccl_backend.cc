// nccl_backend.cc: one NCCL call per collective on the rank's stream; all-to-all, gather, scatter and
// send/recv are grouped ncclSend / ncclRecv, as nccl-tests writes them. In-place all-to-all and
// send/recv first copy the input aside on the stream (NCCL's grouped send/recv has no in-place form).
#include "perf/peers/nccl_backend.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "perf/common/device.h"
#include "perf/common/typed.h"

namespace strata::perf {

NcclBackend::NcclBackend(const NcclLib& lib, Backend& host) : lib_(lib), host_(host) {}

NcclBackend::~NcclBackend() { close(false); }

void NcclBackend::close(bool failed) {
  if (comm_) {
    if (failed && lib_.commAbort) lib_.commAbort(comm_);
    else lib_.commDestroy(comm_);
    comm_ = nullptr;
  }
  scratchFree(scratch_);
  scratch_ = nullptr;
  scratchBytes_ = 0;
}

std::string NcclBackend::describe() const { return "NCCL " + lib_.versionText() + " (" + lib_.path + ")" + note_; }

std::string NcclBackend::error(NcclResult rc) const {
  std::string s = lib_.getErrorString(rc);
  const char* last = lib_.getLastError ? lib_.getLastError(comm_) : nullptr;
  if (last && *last) s += std::string(": ") + last;
  return s;
}

void NcclBackend::check(NcclResult rc, const char* what) const {
  if (rc != 0) throw std::runtime_error(fmt::format("{} failed: {}", what, error(rc)));
}

std::string NcclBackend::unsupported(Coll coll, DType t, Op op) const {
  const std::string v = "NCCL " + lib_.versionText();
  const bool fp8 = t == strataFloat8e4m3 || t == strataFloat8e5m2;
  if (fp8 && !lib_.atLeast(2, 24)) return fmt::format("{} has no {} (fp8 came in NCCL 2.24)", v, dtypeName(t));
  if (t == strataBfloat16 && !lib_.atLeast(2, 10)) return v + " has no bfloat16 (NCCL 2.10+)";
  if (!collReduces(coll)) return "";
  if (fp8 && ccMajor_ < 9)
    return fmt::format("NCCL reduces {} only on compute capability 9.0+ (this GPU: {}.x)", dtypeName(t), ccMajor_);
  if (op == Op::Avg && !lib_.atLeast(2, 10)) return v + " has no avg (NCCL 2.10+)";
  if (op == Op::MulSum && !lib_.redOpCreatePreMulSum) return v + " has no ncclRedOpCreatePreMulSum (NCCL 2.11+)";
  return "";
}

// Several ranks on one GPU (same host and PCI bus id)? Every rank computes the same answer.
bool NcclBackend::sharesGpu(const DeviceRank& dev) {
  struct Where {
    char host[64];
    char busId[20];
  } mine{};
  gethostname(mine.host, sizeof mine.host - 1);
  std::memcpy(mine.busId, dev.props().busId, sizeof mine.busId);
  std::vector<Where> all(static_cast<size_t>(nranks()));
  host_.allGather(&mine, all.data(), sizeof mine);
  for (size_t a = 0; a < all.size(); ++a)
    for (size_t b = a + 1; b < all.size(); ++b)
      if (!std::strcmp(all[a].host, all[b].host) && !std::strcmp(all[a].busId, all[b].busId)) return true;
  return false;
}

void NcclBackend::attachDevice(const DeviceRank& dev) {
  dev_ = &dev;
  ccMajor_ = dev.props().ccMajor;
  std::string hint;
  if (sharesGpu(dev)) {
    const char* set = std::getenv("NCCL_MULTI_RANK_GPU_ENABLE");
    if (!lib_.atLeast(2, 30)) {
      hint = " (ranks share a GPU here: NCCL before 2.30 takes one rank per GPU; give each rank its own GPU, or use "
             "NCCL 2.30+ with NCCL_MULTI_RANK_GPU_ENABLE=1)";
    } else if (!set) {  // NCCL 2.30+ accepts several ranks per GPU when asked to
      static std::once_flag once;  // rank threads of one process set it once, before any of them inits
      std::call_once(once, [] { setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 0); });
      note_ = "; NCCL_MULTI_RANK_GPU_ENABLE=1 set by the tool (ranks share a GPU)";
    } else {
      note_ = std::string("; ranks share a GPU, NCCL_MULTI_RANK_GPU_ENABLE=") + set;
    }
  }
  initComm(hint, dev.props().index);
}

void NcclBackend::initComm(const std::string& hint, int device) {
  struct IdMsg {
    NcclUniqueId id;
    int failed;
  } mine{}, root{};
  std::string idError;
  if (rank() == 0) {
    const NcclResult rc = lib_.getUniqueId(&mine.id);
    mine.failed = rc != 0;
    if (rc) idError = error(rc);
  }
  std::vector<IdMsg> all(static_cast<size_t>(nranks()));
  host_.allGather(&mine, all.data(), sizeof mine);
  root = all[0];
  if (root.failed)
    throw std::runtime_error("ncclGetUniqueId failed on rank 0" + (idError.empty() ? "" : ": " + idError));

  NcclComm comm = nullptr;
  const NcclResult rc = lib_.commInitRank(&comm, nranks(), root.id, rank());
  const double failedRanks = host_.allReduce(rc != 0 ? 1 : 0, Agg::Sum);
  if (rc != 0)
    throw std::runtime_error(fmt::format("ncclCommInitRank (rank {} of {}, {}) failed: {}{}", rank(), nranks(),
                                         device >= 0 ? fmt::format("CUDA device {}", device) : "host memory",
                                         error(rc), hint));
  comm_ = comm;
  if (failedRanks > 0)
    throw std::runtime_error(fmt::format("ncclCommInitRank failed on {} other rank(s)", failedRanks));
}

void* NcclBackend::scratchAlloc(size_t bytes) const { return dev_ ? deviceAlloc(bytes) : std::malloc(bytes); }

void NcclBackend::scratchFree(void* p) const {
  if (dev_) deviceFree(p);
  else std::free(p);
}

void NcclBackend::prepare(const CollCall& c) {
  if (!comm_ && !dev_) initComm("", -1);
  if (c.inPlace && (c.coll == Coll::AllToAll || c.coll == Coll::SendRecv)) {
    const size_t bytes = c.layout.sendCount * dtypeSize(c.dtype);
    if (bytes > scratchBytes_) {
      scratchFree(scratch_);
      scratch_ = nullptr;
      scratch_ = scratchAlloc(bytes);
      scratchBytes_ = bytes;
    }
  }
  customOp_ = c.op == Op::MulSum && collReduces(c.coll);
  if (!customOp_) {
    op_ = c.op == Op::MulSum ? 0 : static_cast<int>(c.op);  // Op and ncclRedOp_t share sum..avg = 0..4
    return;
  }
  alignas(8) unsigned char scalar[8] = {};
  storeScalar(c.dtype, 2.0, scalar);
  check(lib_.redOpCreatePreMulSum(&op_, scalar, c.dtype, kNcclScalarHostImmediate, comm_), "ncclRedOpCreatePreMulSum");
}

void NcclBackend::finish(const CollCall&) {
  if (customOp_ && lib_.redOpDestroy) check(lib_.redOpDestroy(op_, comm_), "ncclRedOpDestroy");
  customOp_ = false;
}

void NcclBackend::sendRecvGroup(const CollCall& c, const void* send) {
  const size_t n = c.layout.count, block = n * dtypeSize(c.dtype);
  const int t = c.dtype, me = rank(), p = nranks();
  NcclStream s = c.stream;
  auto in = [&](int q) { return static_cast<const char*>(send) + q * block; };
  auto out = [&](int q) { return static_cast<char*>(c.recv) + q * block; };
  NcclResult rc = 0;
  const char* what = "ncclGroupStart";
  auto keep = [&](NcclResult r, const char* call) {  // the first error; the group is still ended
    if (r != 0 && rc == 0) {
      rc = r;
      what = call;
    }
  };
  keep(lib_.groupStart(), "ncclGroupStart");
  if (n > 0) {
    switch (c.coll) {
      case Coll::AllToAll:
        for (int q = 0; q < p; ++q) {
          keep(lib_.send(in(q), n, t, q, comm_, s), "ncclSend");
          keep(lib_.recv(out(q), n, t, q, comm_, s), "ncclRecv");
        }
        break;
      case Coll::Gather:  // in place the root's own block is already where it belongs
        if (me != c.root || send != out(me)) keep(lib_.send(send, n, t, c.root, comm_, s), "ncclSend");
        if (me == c.root)
          for (int q = 0; q < p; ++q)
            if (q != me || send != out(me)) keep(lib_.recv(out(q), n, t, q, comm_, s), "ncclRecv");
        break;
      case Coll::Scatter:
        if (me == c.root)
          for (int q = 0; q < p; ++q)
            if (q != me || in(me) != c.recv) keep(lib_.send(in(q), n, t, q, comm_, s), "ncclSend");
        if (me != c.root || in(me) != c.recv) keep(lib_.recv(c.recv, n, t, c.root, comm_, s), "ncclRecv");
        break;
      default:  // send/recv: a ring shift
        keep(lib_.send(send, n, t, (me + 1) % p, comm_, s), "ncclSend");
        keep(lib_.recv(c.recv, n, t, (me + p - 1) % p, comm_, s), "ncclRecv");
        break;
    }
  }
  keep(lib_.groupEnd(), "ncclGroupEnd");
  check(rc, what);
}

void NcclBackend::run(const CollCall& c) {
  const size_t n = c.layout.count;
  const int t = c.dtype;
  NcclStream s = c.stream;
  switch (c.coll) {
    case Coll::AllReduce: return check(lib_.allReduce(c.send, c.recv, n, t, op_, comm_, s), "ncclAllReduce");
    case Coll::ReduceScatter:
      return check(lib_.reduceScatter(c.send, c.recv, n, t, op_, comm_, s), "ncclReduceScatter");
    case Coll::AllGather: return check(lib_.allGather(c.send, c.recv, n, t, comm_, s), "ncclAllGather");
    case Coll::Broadcast: return check(lib_.broadcast(c.send, c.recv, n, t, c.root, comm_, s), "ncclBroadcast");
    case Coll::Reduce: return check(lib_.reduce(c.send, c.recv, n, t, op_, c.root, comm_, s), "ncclReduce");
    case Coll::AllToAll:
    case Coll::SendRecv:
      if (c.inPlace) {
        if (dev_) dev_->copyAsync(scratch_, c.send, c.layout.sendCount * dtypeSize(c.dtype));
        else std::memcpy(scratch_, c.send, c.layout.sendCount * dtypeSize(c.dtype));
        return sendRecvGroup(c, scratch_);
      }
      return sendRecvGroup(c, c.send);
    case Coll::Gather:
    case Coll::Scatter: return sendRecvGroup(c, c.send);
  }
}

void NcclBackend::groupStart() { check(lib_.groupStart(), "ncclGroupStart"); }
void NcclBackend::groupEnd() { check(lib_.groupEnd(), "ncclGroupEnd"); }

}  // namespace strata::perf
