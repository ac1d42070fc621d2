// fuzz_ib_handshake: the out-of-band handshake of the ibverbs transport (transport/ib/ib_handshake.cc)
// as the peer's bytes arrive on its socket: frames {magic, type, length} + payload (HELLO, INFO,
// READY, FAIL) in any order and any shape. The handshake must reach Connected or fail with a
// message; what it hands its hooks is exactly a HELLO or an INFO. No RDMA device is involved: the
// hooks are stand-ins, the socket a socketpair; the input's first byte tells whether they refuse.
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "transport/ib/ib_handshake.h"

namespace {

struct Hooks : strata::ib::Handshake::Hooks {
  bool refuseHello = false, refuseInfo = false;
  int hellos = 0, infos = 0;
  strata::Status onHello(const strata::ib::Hello& peer, strata::ib::Info* mine) override {
    ++hellos;
    if (refuseHello) return strata::remoteError("refused offer ({} rails)", peer.rails);
    mine->rails = 1;
    mine->qps = 1;
    return strata::OkStatus();
  }
  strata::Status onInfo(const strata::ib::Info& peer) override {
    ++infos;
    if (refuseInfo || peer.rails > strata::ib::kMaxRails || peer.qps > strata::ib::kMaxQps)
      return strata::remoteError("refused info ({} rails, {} queue pairs)", peer.rails, peer.qps);
    return strata::OkStatus();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Reader in(data, size);
  const uint8_t flags = in.take<uint8_t>();
  const std::string bytes = in.rest();
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) std::abort();
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t w = ::write(sv[1], bytes.data() + off, bytes.size() - off);
    if (w <= 0) std::abort();
    off += static_cast<size_t>(w);
  }
  if (flags & 4) ::shutdown(sv[1], SHUT_WR);
  Hooks hooks;
  hooks.refuseHello = flags & 1;
  hooks.refuseInfo = flags & 2;
  const strata::ib::Hello mine{strata::ib::Handshake::kVersion, 0, 1, 1, 16, 4096};
  {
    strata::ib::Handshake hs(0, 1, sv[0], mine, &hooks);
    strata::Status st;
    for (int idle = 0; idle < 2 && st.ok();) {
      bool progressed = false;
      st = hs.progress(&progressed);
      idle = progressed ? 0 : idle + 1;
    }
    if (std::getenv("FUZZ_VERBOSE"))
      std::fprintf(stderr, "ib_handshake: %s, state %d\n", st.ok() ? "ok" : st.message().c_str(),
                   static_cast<int>(hs.state()));
    if (!st.ok()) {
      FUZZ_CHECK(!st.message().empty(), "an error without a message");
      FUZZ_CHECK(hs.state() == strata::ib::Handshake::State::Failed, "failed but not in the Failed state");
    }
    FUZZ_CHECK(hooks.hellos <= 1 && hooks.infos <= 1, "hooks called %d and %d times", hooks.hellos, hooks.infos);
    if (hs.connected()) FUZZ_CHECK(hooks.hellos == 1 && hooks.infos == 1, "connected without a HELLO and an INFO");
    if (flags & 8) hs.sendFailure("fuzz");
  }
  ::close(sv[1]);
  return 0;
}
