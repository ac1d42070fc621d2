// local_connection.h: a Connection to a peer on the same machine, over endpoint channels (see
// local_endpoint.h). Outgoing chunks go into the peer's channel for us; incoming chunks come from
// our channel for the peer. Pointer mode (same process) publishes addresses; copy mode (other
// process) copies through the shared staging slots, or, for chunks of strataMemAlloc buffers,
// names the sender's shared region so the receiver reads it single-copy (transport/shared_buffers.h).
#pragma once

#include <memory>
#include <vector>

#include "transport/connection.h"
#include "transport/fifo.h"
#include "transport/local_endpoint.h"

namespace strata {

class LocalConnection final : public Connection {
 public:
  /// `myChannel` / `peerChannel`: the two ranks' channel indices in the endpoints (their local
  /// ranks on the node).
  LocalConnection(int myRank, int peer, int myChannel, int peerChannel, std::shared_ptr<Endpoint> mine,
                  std::shared_ptr<Endpoint> theirs, bool pointerMode, int peerPid);
  int peer() const override { return peer_; }
  const char* kindName() const override { return pointerMode_ ? "local(threads)" : "local(shm)"; }
  void postSend(Transfer* t) override { sends_.push_back(t); }
  void postRecv(Transfer* t) override { recvs_.push_back(t); }
  Status progress(bool* progressed) override;
  void addWaitSources(WaitSet* ws) override;
  Status checkPeer() override;
  Status peerFailed() override;
  bool idle() const override { return sends_.empty() && recvs_.empty(); }
  bool peekCallTag(CallTag* tag) override;
  void abandonTransfers() override;

 private:
  Status progressSends(bool* progressed);
  Status progressRecvs(bool* progressed);
  Status cmaRead(void* dst, uint64_t remote, size_t bytes);
  Status peerRegion(const SlotDesc& d, const char** src);

  int me_, peer_;
  int myChannel_, peerChannel_;  ///< channel indices (local ranks) in the endpoints
  std::shared_ptr<Endpoint> mine_, theirs_;
  ChannelCtrl* out_;  ///< in the peer's endpoint: chunks we send
  ChannelCtrl* in_;   ///< in our endpoint: chunks the peer sends
  bool pointerMode_;
  int peerPid_;
  uint32_t slots_;
  uint64_t slotBytes_;
  int cmaToPeer_ = -1;  ///< -1 unknown yet; 1 if the peer can read our memory (set up at init)
  size_t cmaMin_;
  // Shared mode. Sender: the front send's region (looked up once per transfer). Receiver: the
  // peer region mapped last (a one-entry cache in front of mapPeerRegion's).
  int sharedToPeer_ = -1;  ///< -1 unknown yet; 1 if the peer can map our shared regions
  size_t sharedMin_;
  size_t sharedRewriteMin_;  ///< sharedMin_ for sends the operation overwrites later (Transfer::rewritten)
  size_t claimMax_;  ///< slot chunks up to this size are consumed with line ownership
  const Transfer* sendLooked_ = nullptr;
  bool sendShared_ = false;
  int sendFd_ = -1;
  uint64_t sendOffset_ = 0, sendInode_ = 0;
  int peerFd_ = -1;
  uint64_t peerInode_ = 0;
  const char* peerBase_ = nullptr;
  size_t peerSize_ = 0;
  std::vector<char> bounce_;  ///< CMA reductions land here first (one chunk, cache-resident)
  uint64_t outHead_ = 0, inTail_ = 0;
  Fifo<Transfer*> sends_, recvs_;
};

/// True if this process can read `remoteAddr` of process `pid` through process_vm_readv and finds
/// `expect` there (the endpoint magic): cross-memory attach works between the two.
bool probeCma(int pid, uint64_t remoteAddr, uint32_t expect);

}  // namespace strata
