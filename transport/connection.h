// connection.h: the interface between executors and transports. A transport sets up one
// Connection per peer; a Connection moves posted transfers in order, without blocking, whenever it
// is progressed. Sends and receives to one peer match in posting order (FIFO per direction) and
// must have equal byte counts and equal call tags (a mismatch is an error naming both sides).
#pragma once

#include <poll.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/host_reduce.h"
#include "transport/call_tag.h"
#include "transport/status.h"
#include "transport/waiter.h"

namespace strata {

/// One posted transfer, owned by the caller until `complete`.
struct Transfer {
  enum Kind : uint8_t { Send, Recv, RecvReduce };
  Kind kind = Send;
  const void* src = nullptr;  ///< Send: the data. RecvReduce: the local operand.
  void* dst = nullptr;        ///< Recv / RecvReduce: where the result goes.
  size_t bytes = 0;           ///< > 0
  strataDataType_t dtype = strataUint8;  ///< RecvReduce only
  kernels::RedKind op = kernels::RedKind::Sum;
  /// Send: this memory is written again soon (a collective's output or in-place buffer, staged
  /// scratch). Transports that let the receiver read the sender's memory do so only for large
  /// transfers then: the reader's cached copies of small ones would make those writes slow.
  bool rewritten = false;
  /// The call this message belongs to (transport/call_tag.h): a send carries it in its frame
  /// header, a receive fails naming both calls when the arriving message carries another.
  CallTag call;
  bool complete = false;
  // Transport bookkeeping.
  size_t posted = 0;      ///< bytes handed to the transport (sends) / consumed (receives)
  uint64_t lastSeq = 0;   ///< transport sequence number of the last chunk

  /// A plain send of `n` bytes from `p`.
  static Transfer sendOf(const void* p, size_t n) {
    Transfer t;
    t.kind = Send;
    t.src = p;
    t.bytes = n;
    return t;
  }
  /// A plain receive of `n` bytes into `p`.
  static Transfer recvOf(void* p, size_t n) {
    Transfer t;
    t.kind = Recv;
    t.dst = p;
    t.bytes = n;
    return t;
  }
};

class Connection {
 public:
  virtual ~Connection() = default;
  virtual int peer() const = 0;
  virtual const char* kindName() const = 0;
  /// Appends to the send / receive queue. Never blocks.
  virtual void postSend(Transfer* t) = 0;
  virtual void postRecv(Transfer* t) = 0;
  /// Moves data for queued transfers; sets *progressed if anything moved. Fails (naming the peer)
  /// when the peer died, broke the connection, or sent something that does not match.
  virtual Status progress(bool* progressed) = 0;
  /// What to sleep on when nothing moves: a doorbell, or socket events to poll.
  virtual void addWaitSources(WaitSet* ws) = 0;
  /// Liveness check run by waits every ~100 ms: fails if the peer is known dead.
  virtual Status checkPeer() = 0;
  /// Whether the peer told us that its communicator failed, whatever is posted here (a wait asks
  /// about peers of later steps of its operation): its failure, or OK when none is known.
  virtual Status peerFailed() { return OkStatus(); }
  /// True when no transfer is queued.
  virtual bool idle() const = 0;
  /// This rank failed: tell the peer why (best effort) and break the connection so that it stops
  /// waiting on us. Local connections report through the endpoint header instead.
  virtual void sendFailure(const std::string& reason) {}
  /// This rank's operation failed and returns to the caller, who may free its buffers: after
  /// this neither the peer nor the transport touches the posted transfers' memory (run by the
  /// thread that progresses the connection, before the communicator fails). Needed where the
  /// peer reads our memory in place (local pointer mode) or a transport writes received data
  /// into it outside progress() (UCX's rendezvous); the connection may be broken afterwards.
  virtual void abandonTransfers() {}
  /// Slow path of a wait: when no receive is posted, the call tag of the next message from the
  /// peer if it has arrived (a message of the same collective number but another call is a
  /// mismatch that no receive would ever see). False when unknown or not supported.
  virtual bool peekCallTag(CallTag* tag) { return false; }
};

}  // namespace strata
