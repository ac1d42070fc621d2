// ucx_connection.h: a Connection to one peer over a UCP endpoint. The handshake (hello frames with
// the worker addresses, ucx_wire.h) runs non-blockingly inside progress() over the oob socket the
// connection owns; transfers posted before it ends wait in order. Every transfer is a head message
// (its size, so a mismatch names both sides' sizes; small payloads ride inline) and, when large,
// chunks sent zero-copy from registered memory (rendezvous is UCX's choice by size). Receives post
// their chunks once the head checked out: into the destination for Recv, into bounce buffers for
// RecvReduce, reduced as each lands. At most STRATA_UCX_WINDOW messages per direction are in flight.
// The oob socket stays open for the connection's life: EOF there, a failure notice, or a UCX
// endpoint error make the connection fail naming the peer (reported once a transfer is pending).
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
  /// Takes ownership of `oobFd` (connected, non-blocking, to the same peer).
  UcxConnection(std::shared_ptr<UcxContext> ctx, int me, int peer, int oobFd, UcxTuning tuning);
  ~UcxConnection() override;
  int peer() const override { return peer_; }
  const char* kindName() const override { return "ucx"; }
  void postSend(Transfer* t) override;
  void postRecv(Transfer* t) override;
  Status progress(bool* progressed) override;
  void addWaitSources(WaitSet* ws) override;
  Status checkPeer() override;
  bool idle() const override { return sends_.empty() && recvs_.empty(); }
  void sendFailure(const std::string& reason) override;

 private:
  struct Msg {
    Transfer* t = nullptr;
    uint64_t headSeq = 0;
    uint64_t nchunks = 0;
    bool headPosted = false, headDone = false;
    uint64_t chunksPosted = 0, chunksDone = 0;
    RegCache::Entry* reg = nullptr;
  };
  struct Op {
    void* req = nullptr;
    Msg* msg = nullptr;
    int64_t chunk = -1;   ///< -1: the head
    char* bounce = nullptr;
  };
  using Buffers = std::vector<char*>;  // free lists; ownedBuffers_ owns the memory

  Status fail(Status st);
  Status progressTransfers(bool* progressed);
  Status readOob(bool* progressed);
  Status writeHello(bool* progressed);
  Status startEndpoint();
  Status postSends(bool* progressed);
  Status postRecvs(bool* progressed);
  Status reapSends(bool* progressed);
  Status reapRecvs(bool* progressed);
  Status finishRecv(Op& op, ucs_status_t st, size_t length);
  void retire(bool* progressed);
  size_t chunkLen(const Msg& m, uint64_t i) const;
  char* takeBuffer(Buffers& pool, size_t bytes);
  void giveBuffer(Buffers& pool, char* b);
  RegCache::Entry* registration(const void* p, size_t bytes);
  void teardownEndpoint();

  std::shared_ptr<UcxContext> ctx_;
  int me_, peer_;
  int oob_;
  UcxTuning tune_;
  ucp_ep_h ep_ = nullptr;
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
