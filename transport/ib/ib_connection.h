// ib_connection.h: a Connection to one peer over RC queue pairs (several per rail, on every shared
// rail), with the protocol of ib_protocol.h: slot FIFO writes with credits for small messages,
// single-copy RDMA reads from registered user buffers for large ones, completion polling inside
// progress() and completion-channel sleeps when idle. The oob handshake (ib_handshake.h) runs
// inside progress(); transfers posted before it ends wait in order.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>
#include <vector>

#include "transport/connection.h"
#include "transport/fifo.h"
#include "transport/ib/ib_device.h"
#include "transport/ib/ib_handshake.h"
#include "transport/ib/ib_protocol.h"

namespace strata::ib {

class IbConnection final : public Connection, private Handshake::Hooks {
 public:
  IbConnection(std::shared_ptr<Devices> devices, int me, int peer, int oobFd, int rails);
  ~IbConnection() override;
  int peer() const override { return peer_; }
  const char* kindName() const override { return "ib"; }
  void postSend(Transfer* t) override;
  void postRecv(Transfer* t) override;
  Status progress(bool* progressed) override;
  void addWaitSources(WaitSet* ws) override;
  Status checkPeer() override;
  bool idle() const override { return sends_.empty() && recvs_.empty(); }
  void sendFailure(const std::string& reason) override;

  /// Queue pairs in use (after the handshake), for tests and logs.
  int queuePairs() const { return static_cast<int>(qps_.size()); }
  int railsUsed() const { return nrails_; }
  /// Path MTU in bytes (the smaller of both ends' port MTUs), after the handshake.
  int pathMtu() const { return pathMtu_; }

 private:
  struct RailRes {
    Rail* rail = nullptr;
    ibv_comp_channel* channel = nullptr;
    ibv_cq* cq = nullptr;
    bool armed = false;
    ibv_mr* fifoMr = nullptr;
    ibv_mr* stageMr = nullptr;
    ibv_mr* scratchMr = nullptr;
    uint64_t remoteFifo = 0;
    uint32_t remoteRkey = 0;
  };
  struct QpRes {
    ibv_qp* qp = nullptr;
    int rail = 0;
    int outstanding = 0;  ///< send-queue work requests not yet completed
    uint32_t psn = 0;
  };
  struct SendOp {
    Transfer* t = nullptr;
    bool started = false, rndv = false, finished = false;
    uint64_t chunks = 0, chunksPosted = 0;
    uint64_t rndvId = 0;
    RegCache::Region* reg[kMaxRails] = {};
  };
  struct RecvOp {
    Transfer* t = nullptr;
    size_t filled = 0;  ///< bytes placed (slots) or read (single copy)
    bool rndv = false, finQueued = false;
    uint64_t rndvId = 0, opId = 0, raddr = 0;
    uint32_t rkey[kMaxRails] = {};
    ReadPlan plan;
    uint64_t nextChunk = 0, doneChunks = 0;
    RegCache::Region* reg[kMaxRails] = {};
  };

  // Handshake::Hooks
  Status onHello(const Hello& peer, Info* mine) override;
  Status onInfo(const Info& peer) override;

  Status fail(Status st, bool tellPeer);
  Status setupQueuePairs();
  Status postRecvWr(int q);
  Status pollCompletions(bool* moved);
  Status handleCompletion(const ibv_wc& wc, bool* moved);
  Status consumeSlots(bool* moved);
  Status issueReads(bool* moved);
  Status pushSends(bool* moved);
  Status sendControl(bool* moved);
  Status postCtrl(uint32_t imm);
  Status readDone(uint64_t value, bool* moved);
  Status ensureScratch();
  void completeFront(bool* moved);
  void drainChannelEvents();
  size_t payloadBytes() const { return slotBytes_ - kSlotHeaderBytes; }

  std::shared_ptr<Devices> dev_;
  const Verbs* v_;
  const Options& opt_;
  int me_, peer_, railsWanted_;
  Handshake hs_;
  Status broken_;
  bool setUp_ = false;

  int nrails_ = 0, qpsPerRail_ = 0, rqDepth_ = 0, pathMtu_ = 0;
  uint32_t slots_ = 0;
  size_t slotBytes_ = 0;
  std::vector<RailRes> rails_;
  std::vector<QpRes> qps_;
  char* fifo_ = nullptr;
  char* stage_ = nullptr;
  char* scratch_ = nullptr;
  std::vector<uint8_t> scratchBusy_;
  std::unique_ptr<SlotCredits> credits_;
  std::unique_ptr<SlotArrivals> arrivals_;

  Fifo<SendOp> sends_;
  Fifo<RecvOp> recvs_;
  size_t sendCursor_ = 0;  ///< first send not yet fully handed to the wire
  size_t recvCursor_ = 0;  ///< first receive not yet fully matched by slots
  uint64_t nextRndvId_ = 0, nextOpId_ = 0;
  int rndvInFlight_ = 0;
  std::vector<uint64_t> pendingFins_;
  std::vector<ibv_wc> stash_;  ///< completions polled by addWaitSources, handled by progress
  int kickFd_ = -1;            ///< eventfd: readable while the stash holds completions
};

}  // namespace strata::ib
