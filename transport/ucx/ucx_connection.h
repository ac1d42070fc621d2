// ucx_connection.h: a Connection to one peer over one UCP endpoint per rail. The handshake (hello
// frames with every rail's worker address, ucx_wire.h) runs non-blockingly inside progress() over
// the oob socket the connection owns; transfers posted before it ends wait in order. The connection
// uses min(my rails, the peer's, the `rails` both were given) rails, paired by subnet (pairRails),
// one endpoint each. Every transfer is a head message on rail 0 (its size, so a mismatch names
// both sides' sizes; small payloads ride inline, so small messages keep one rail's latency) and,
// when large, chunks sent zero-copy from registered memory (rendezvous is UCX's choice by size),
// striped: the direction's chunk c travels on rail c % rails, so one large transfer, and a stream
// of single-chunk ones, keeps every rail busy. Receives post their chunks on the matching rail's
// worker once the head checked out: into the destination for Recv, into bounce buffers for
// RecvReduce, reduced as each lands. Registrations are per rail (a memory handle belongs to one
// UCX context). At most STRATA_UCX_WINDOW messages per direction are in flight, over all rails.
// The oob socket stays open for the connection's life: EOF there, a failure notice, or a UCX error
// on any rail's endpoint make the connection fail naming the peer (reported once a transfer is
// pending).
#pragma once

#include <ucp/api/ucp.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "transport/connection.h"
#include "transport/ucx/ucx_context.h"
#include "transport/ucx/ucx_wire.h"

namespace strata::ucx {

struct UcxTuning {
  size_t chunkBytes = 1 << 20;
  size_t inlineBytes = 8 << 10;
  int window = 16;
};

class UcxConnection final : public Connection {
 public:
  /// Takes ownership of `oobFd` (connected, non-blocking, to the same peer). `ctxs`: this rank's
  /// rails (one context each, rail order); `rails`: how many rails the two ranks share.
  UcxConnection(std::vector<std::shared_ptr<UcxContext>> ctxs, int me, int peer, int oobFd, int rails,
                UcxTuning tuning);
  ~UcxConnection() override;
  int peer() const override { return peer_; }
  const char* kindName() const override { return "ucx"; }
  void postSend(Transfer* t) override;
  void postRecv(Transfer* t) override;
  Status progress(bool* progressed) override;
  void addWaitSources(WaitSet* ws) override;
  Status checkPeer() override;
  void abandonTransfers() override;
  bool idle() const override { return sends_.empty() && recvs_.empty(); }
  void sendFailure(const std::string& reason) override;

  /// Rails in use (0 until the handshake ends). For tests and logs.
  int rails() const { return static_cast<int>(rails_.size()); }
  /// Chunks sent / received (completed) on rail `r`. For tests.
  uint64_t chunksSentOn(int r) const { return chunksSent_[r]; }
  uint64_t chunksReceivedOn(int r) const { return chunksReceived_[r]; }

 private:
  struct Msg {
    Transfer* t = nullptr;
    uint64_t headSeq = 0;
    uint64_t firstChunk = 0;  ///< the direction's chunk count before this message (its rails)
    uint64_t nchunks = 0;
    bool headPosted = false, headDone = false;
    uint64_t chunksPosted = 0, chunksDone = 0;
    RegCache::Entry* reg[kMaxRails] = {};  ///< per rail (context); null: unregistered
    unsigned regTried = 0;                 ///< bit r: rail r's registration was attempted
  };
  struct Op {
    void* req = nullptr;
    Msg* msg = nullptr;
    int64_t chunk = -1;   ///< -1: the head
    char* bounce = nullptr;
    int rail = 0;
  };
  struct Rail {
    UcxContext* ctx = nullptr;  ///< one of ctxs_
    ucp_ep_h ep = nullptr;
  };
  using Buffers = std::vector<char*>;  // free lists; ownedBuffers_ owns the memory

  Status fail(Status st);
  /// The next message of one direction: its head tag sequence and first chunk index, advancing both.
  Msg nextMsg(Transfer* t, uint64_t* seq, uint64_t* chunks) const;
  Status progressTransfers(bool* progressed);
  /// progressTransfers; when the peer is gone, waits a moment for its failure notice (the cause).
  Status progressWithNotice(bool* progressed);
  Status readOob(bool* progressed);
  Status writeHello(bool* progressed);
  Status startEndpoints(const Hello& h, const char* records);
  bool progressWorkers();
  void releaseRegs(Msg& m);
  Status postSends(bool* progressed);
  Status postRecvs(bool* progressed);
  Status reapSends(bool* progressed);
  Status reapRecvs(bool* progressed);
  Status finishRecv(Op& op, ucs_status_t st, size_t length);
  void retire(bool* progressed);
  size_t chunkLen(const Msg& m, uint64_t i) const;
  char* takeBuffer(Buffers& pool, size_t bytes);
  void giveBuffer(Buffers& pool, char* b);
  RegCache::Entry* registration(int rail, const void* p, size_t bytes);
  void teardownEndpoint();

  std::vector<std::shared_ptr<UcxContext>> ctxs_;
  int me_, peer_;
  int oob_;
  int railsWanted_;
  UcxTuning tune_;
  std::vector<Rail> rails_;  ///< after the handshake: the rails in use, rail 0 first
  // oob socket
  std::vector<char> helloOut_;
  size_t helloSent_ = 0;
  std::vector<char> oobIn_;
  bool gotHello_ = false, oobClosed_ = false;
  double oobClosedAt_ = 0;
  // queues
  std::deque<Msg> sends_, recvs_;
  std::vector<Op> sendOps_, recvOps_;
  uint64_t sendSeq_ = 0, recvSeq_ = 0;
  uint64_t sendChunks_ = 0, recvChunks_ = 0;  ///< chunks posted per direction: their rails
  uint64_t chunksSent_[kMaxRails] = {}, chunksReceived_[kMaxRails] = {};
  Buffers headPool_, chunkPool_;
  std::vector<std::unique_ptr<char[]>> ownedBuffers_;
  Status peerError_;  ///< the peer is gone or failed; reported once a transfer is pending
  Status broken_;
  ucs_status_t epStatus_ = UCS_OK;
  double epDownAt_ = 0;  ///< when the endpoint error was first seen
  bool peerNotice_ = false;  ///< peerError_ is the peer's own failure notice
  static void onEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);
};

}  // namespace strata::ucx
