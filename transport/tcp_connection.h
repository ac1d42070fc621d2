// tcp_connection.h: a Connection to a peer over several TCP sockets. Messages are cut into framed
// chunks (header: magic, sequence number, message size, chunk size, call tag); chunk g travels on socket
// g % nsockets, so both sides agree on the placement and check every header. Receives land
// directly in the destination; reductions go through a per-socket chunk buffer.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/connection.h"
#include "transport/fifo.h"

namespace strata {

class TcpConnection final : public Connection {
 public:
  /// Takes ownership of `fds` (connected sockets, same order on both sides).
  TcpConnection(int myRank, int peer, std::vector<int> fds, size_t chunkBytes);
  ~TcpConnection() override;
  int peer() const override { return peer_; }
  const char* kindName() const override { return "tcp"; }
  void postSend(Transfer* t) override;
  void postRecv(Transfer* t) override;
  Status progress(bool* progressed) override;
  void addWaitSources(WaitSet* ws) override;
  Status checkPeer() override { return broken_; }
  Status peerFailed() override;
  bool idle() const override { return sends_.empty() && recvs_.empty(); }
  void sendFailure(const std::string& reason) override;
  bool peekCallTag(CallTag* tag) override;

  struct Header {
    uint32_t magic;
    uint32_t pad;
    uint64_t seq;
    uint64_t msgBytes;
    uint64_t chunkBytes;
    CallTag call;  ///< the sender's call (transport/call_tag.h)
  };

 private:
  struct Posted {
    Transfer* t;
    uint64_t firstSeq;
    uint64_t nchunks;
  };
  struct SockState {
    int fd = -1;
    // send side
    bool sending = false;
    Header sendHdr{};
    const char* sendData = nullptr;
    size_t sendDone = 0;  ///< bytes of header + payload written
    Transfer* sendT = nullptr;
    // receive side
    uint64_t nextRecvSeq = 0;
    bool haveHdr = false;
    Header recvHdr{};
    size_t recvDone = 0;  ///< bytes of header + payload read
    Transfer* recvT = nullptr;
    size_t recvOff = 0;
    std::vector<char> bounce;
  };
  Status fail(Status st);
  /// `st` for a connection that broke, unless the peer's FAIL notice waits in one of our sockets
  /// behind data no receive was posted for: then the peer's reason (skipping that data).
  Status failWithNotice(Status st);
  bool findFailNotice(SockState& s, std::string* why);
  /// The FAIL frame with `reason` on every socket not in the middle of a chunk (best effort).
  void sendNotice(const std::string& reason);
  Status progressSend(SockState& s, bool* progressed);
  Status progressRecv(SockState& s, bool* progressed);
  bool locate(Fifo<Posted>& q, uint64_t seq, Transfer** t, size_t* off);
  uint64_t chunksOf(size_t bytes) const { return (bytes + chunk_ - 1) / chunk_; }

  int me_, peer_;
  size_t chunk_;
  std::vector<SockState> socks_;
  Fifo<Posted> sends_, recvs_;
  uint64_t sendSeq_ = 0, recvSeq_ = 0;  ///< next sequence number to post
  uint64_t nextAssign_ = 0;             ///< next send chunk to hand to a socket
  Status broken_;
  bool noticeSent_ = false;  ///< a FAIL frame went out (failure or leaving)
};

}  // namespace strata
