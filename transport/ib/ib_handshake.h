// ib_handshake.h: the out-of-band part of an ibverbs connection, as a non-blocking state machine
// over the bootstrap's socket to the peer. Frames ({magic, type, length} + payload):
//   HELLO  what each side offers (rails, queue pairs per rail, slots); both take the minimum
//   INFO   per rail LID, GID, MTU and the slot FIFO's address and rkey; per queue pair QPN, PSN
//   READY  the sender's queue pairs are ready to receive (RTR and RTS): writes may start
//   FAIL   the sender failed; the payload is its reason (then it shuts the socket down)
// States: AwaitHello -> AwaitInfo -> AwaitReady -> Connected. Each side sends HELLO at once, INFO
// once it has the peer's HELLO (the hook creates its queue pairs), READY once it has the peer's
// INFO (the hook moves its queue pairs to RTS). After that the socket is only watched: EOF or an
// error means the peer is gone, FAIL carries its reason.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "transport/ib/ib_protocol.h"
#include "transport/status.h"
#include "transport/waiter.h"

namespace strata::ib {

struct Hello {
  uint32_t version;
  int32_t rank;
  uint32_t rails;
  uint32_t qpsPerRail;
  uint32_t slots;
  uint32_t slotBytes;
};

struct Info {
  struct Rail {
    uint8_t gid[16];
    uint64_t fifoAddr;
    uint32_t fifoRkey;
    uint16_t lid;
    uint8_t ethernet;
    uint8_t mtu;  ///< enum ibv_mtu
  };
  struct Qp {
    uint32_t qpn;
    uint32_t psn;
  };
  uint32_t rails = 0;
  uint32_t qps = 0;
  Rail rail[kMaxRails] = {};
  Qp qp[kMaxQps] = {};
};

class Handshake {
 public:
  enum class State { AwaitHello, AwaitInfo, AwaitReady, Connected, Failed };
  enum FrameType : uint32_t { kHello = 1, kInfo = 2, kReady = 3, kFail = 4 };
  static constexpr uint32_t kVersion = 1;

  class Hooks {
   public:
    virtual ~Hooks() = default;
    /// The peer's offer arrived: agree, create the queue pairs and describe them in *mine.
    virtual Status onHello(const Hello& peer, Info* mine) = 0;
    /// The peer's queue pairs are known: connect ours to them (RTR, RTS).
    virtual Status onInfo(const Info& peer) = 0;
  };

  /// Owns `fd` (non-blocking after this) and queues HELLO.
  Handshake(int me, int peer, int fd, const Hello& mine, Hooks* hooks);
  ~Handshake();
  Handshake(const Handshake&) = delete;
  Handshake& operator=(const Handshake&) = delete;

  /// Moves the handshake on without blocking; once connected, checks the socket for EOF / FAIL.
  Status progress(bool* progressed);
  bool connected() const { return state_ == State::Connected; }
  State state() const { return state_; }
  int fd() const { return fd_; }
  /// POLLIN always (EOF, FAIL and handshake frames), POLLOUT while frames wait to be written.
  void addWaitSources(WaitSet* ws) const;
  /// Writes FAIL with `reason` (best effort, never blocking) and shuts the socket down.
  void sendFailure(const std::string& reason);

 private:
  void queue(uint32_t type, const void* p, size_t n);
  Status fail(Status st);
  Status closedError() const;
  Status handle(uint32_t type, const std::string& payload, bool* progressed);

  int me_, peer_, fd_;
  Hooks* hooks_;
  State state_ = State::AwaitHello;
  Status status_;
  std::string out_, in_;
  bool shut_ = false;
};

}  // namespace strata::ib
