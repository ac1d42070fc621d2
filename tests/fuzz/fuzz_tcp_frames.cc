// fuzz_tcp_frames: what a tcp peer sends (transport/tcp_connection.cc): framed chunks (header:
// magic, sequence, message and chunk size, call tag), FAIL frames with a reason, anything else.
// The input first sets the receiving side up (sockets per pair, chunk size, the receives posted:
// plain or reducing, their sizes and call tags; flags: peek at the next call tag and look for a
// FAIL notice before posting (peekCallTag, peerFailed), post a send to a peer that is gone, so
// that the broken send looks for the notice behind the data (failWithNotice)), then holds the
// bytes written to each socket; the writing ends are shut down after them. The receiving
// TcpConnection must finish its receives or fail with a message, never write outside the
// destination or crash.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "fuzz_util.h"
#include "transport/tcp_connection.h"

using strata::Transfer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Reader in(data, size);
  const size_t nsock = 1 + in.take<uint8_t>() % 3;
  const size_t chunk = 8 * (1 + in.take<uint8_t>() % 64);
  const size_t nrecv = 1 + in.take<uint8_t>() % 2;
  const uint8_t flags = in.take<uint8_t>();
  struct Posted {
    Transfer t;
    std::vector<char> dst, src;
  };
  std::vector<std::unique_ptr<Posted>> recvs;
  for (size_t i = 0; i < nrecv; ++i) {
    auto p = std::make_unique<Posted>();
    const uint8_t kind = in.take<uint8_t>();
    const auto dtype = static_cast<strataDataType_t>(in.take<uint8_t>() % strataNumTypes);
    const size_t es = strata::kernels::dtypeSize(dtype);
    const size_t bytes = es * (1 + in.take<uint16_t>() % 256);
    p->t.kind = (kind & 1) ? Transfer::RecvReduce : Transfer::Recv;
    p->t.dtype = dtype;
    p->t.op = static_cast<strata::kernels::RedKind>((kind >> 1) % 4);
    p->t.bytes = bytes;
    p->t.call = strata::CallTag{in.take<uint64_t>(), in.take<uint64_t>()};
    p->dst.assign(bytes, 0);
    p->src.assign(bytes, 1);
    p->t.dst = p->dst.data();
    p->t.src = p->src.data();
    recvs.push_back(std::move(p));
  }
  std::vector<int> mine, theirs;
  for (size_t i = 0; i < nsock; ++i) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) std::abort();
    mine.push_back(sv[0]);
    theirs.push_back(sv[1]);
  }
  // The peer's bytes, per socket: a 16-bit length, then that many bytes (the last socket: the rest).
  for (size_t i = 0; i < nsock; ++i) {
    const std::string b = i + 1 < nsock ? in.bytes(in.take<uint16_t>()) : in.rest();
    size_t off = 0;
    while (off < b.size()) {
      const ssize_t w = ::write(theirs[i], b.data() + off, b.size() - off);
      if (w <= 0) std::abort();  // the 4 MiB buffers hold any input libFuzzer makes
      off += static_cast<size_t>(w);
    }
    ::shutdown(theirs[i], SHUT_WR);
    if (flags & 4) {  // the peer is gone: what it wrote stays readable, sends to it break
      ::close(theirs[i]);
      theirs[i] = -1;
    }
  }
  std::vector<char> payload(64, 's');
  Transfer send = Transfer::sendOf(payload.data(), payload.size());
  {
    strata::TcpConnection conn(0, 1, mine, chunk);
    if (flags & 1) {
      strata::CallTag tag;
      (void)conn.peekCallTag(&tag);
    }
    if (flags & 2) {
      const strata::Status st = conn.peerFailed();
      if (!st.ok()) FUZZ_CHECK(!st.message().empty(), "an error without a message");
    }
    if (flags & 4) conn.postSend(&send);
    for (auto& p : recvs) conn.postRecv(&p->t);
    strata::Status st;
    for (int idle = 0; idle < 3 && st.ok();) {
      bool progressed = false;
      st = conn.progress(&progressed);
      idle = progressed ? 0 : idle + 1;
      if (conn.idle()) break;
    }
    if (std::getenv("FUZZ_VERBOSE"))
      std::fprintf(stderr, "tcp_frames: %s, receives done %zu of %zu\n", st.ok() ? "ok" : st.message().c_str(),
                   static_cast<size_t>(std::count_if(recvs.begin(), recvs.end(), [](auto& p) { return p->t.complete; })),
                   recvs.size());
    if (!st.ok()) FUZZ_CHECK(!st.message().empty(), "an error without a message");
    for (auto& p : recvs) FUZZ_CHECK(p->t.posted <= p->t.bytes, "received %zu of %zu bytes", p->t.posted, p->t.bytes);
  }
  for (int fd : theirs)
    if (fd >= 0) ::close(fd);
  return 0;
}
