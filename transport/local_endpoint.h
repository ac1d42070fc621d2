// local_endpoint.h: the memory a rank exposes to peers on its machine. One Endpoint per rank per
// communicator holds the rank's doorbell, a failure flag, and one incoming channel per local peer
// (a FIFO of slots). Ranks that are threads of one process pass pointers through the slots (the
// receiver copies straight from the sender's buffer: single copy); ranks in other processes copy
// data through the slots' shared staging area, which lives in a POSIX shared-memory segment.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "transport/call_tag.h"
#include "transport/status.h"
#include "transport/waiter.h"

namespace strata {

constexpr int kMaxLocalSlots = 64;
constexpr uint32_t kEndpointFailed = 1, kEndpointLeft = 2;  ///< EndpointHeader::failed

/// How a chunk travels: its bytes in the slot, or the sender's address (read directly by a
/// same-process receiver, or through cross-memory attach, process_vm_readv, by another process).
/// Small chunks travel inside their descriptor (kSlotInline), so a small message costs the
/// receiver one cache line: flag, header and payload together. kSlotShared: the chunk lies in a
/// strataMemAlloc region of the sender (transport/shared_buffers.h); the descriptor names its fd,
/// offset and inode and the receiver reads it through its own mapping of that region.
enum SlotMode : uint32_t { kSlotData = 0, kSlotPointer = 1, kSlotCma = 2, kSlotInline = 3, kSlotShared = 4 };
constexpr size_t kInlineBytes = 24;

/// One chunk's descriptor, one cache line. The sender fills it and then publishes `seq` = chunk
/// index + 1 (release); the receiver polls `seq` of the slot it expects next.
struct alignas(64) SlotDesc {
  std::atomic<uint64_t> seq{0};
  uint64_t msgBytes;   ///< total bytes of the message this chunk belongs to (framing check)
  CallTag call;        ///< the sender's call (transport/call_tag.h), checked against the receive's
  uint32_t chunkBytes; ///< at most the slot size (STRATA_LOCAL_SLOT_BYTES, below 4 GiB)
  uint32_t mode;       ///< SlotMode
  union {
    unsigned char inlineData[kInlineBytes];
    struct {
      uint64_t ptr;    ///< pointer / CMA modes: the sender's address; shared mode: offset in the region
      uint64_t inode;  ///< shared mode: the region's inode (detects a reused fd number)
      int32_t fd;      ///< shared mode: the sender's fd of the region
    };
  };
};
static_assert(sizeof(SlotDesc) == 64);

/// One directed channel (sender -> this endpoint's rank). `tail` counts consumed chunks.
struct alignas(64) ChannelCtrl {
  alignas(64) std::atomic<uint64_t> tail{0};  ///< chunks consumed by the receiver
  std::atomic<uint32_t> cmaReadable{0};       ///< receiver can process_vm_readv the sender's memory
  std::atomic<uint32_t> sharedReadable{0};    ///< receiver can map the sender's shared regions
  /// Pointer mode: 1 while the receiver may be reading chunks of the sender's buffers; a failing
  /// sender retracts its unread chunks, then waits for 0 (LocalConnection::abandonTransfers). Its own
  /// line: only the receiver writes it, and the sender polls `tail`, not this.
  alignas(64) std::atomic<uint32_t> reading{0};
  SlotDesc desc[kMaxLocalSlots];
};

struct alignas(64) EndpointHeader {
  uint32_t magic;
  int32_t rank;
  int32_t nranks;
  int32_t pid;
  uint32_t slots;
  uint64_t slotBytes;
  uint64_t probeAddr;  ///< address of `magic` in the owner's address space (CMA probe)
  /// kEndpointFailed when this rank failed or aborted, kEndpointLeft when it destroyed its
  /// communicator (a peer still waiting on it fails instead of timing out); 0 while it is in it.
  std::atomic<uint32_t> failed;
  char failReason[1024];         ///< written before `failed` is set (as long as tcp's FAIL notice)
  Doorbell bell;
};

/// A mapped endpoint (own or a peer's). Layout: header, ChannelCtrl[nranks] (indexed by the
/// sender's local rank: `nranks` is the node's rank count, not the communicator's), then, if
/// `withData`, nranks * slots * slotBytes of staging (sparse: pages are touched only by channels
/// in use).
class Endpoint {
 public:
  ~Endpoint();
  /// Creates this rank's endpoint. `shmName` empty: process memory only (all local peers are
  /// threads); otherwise a shared-memory segment of that name.
  static Status create(const std::string& shmName, int rank, int nranks, int slots, size_t slotBytes,
                       bool withData, std::shared_ptr<Endpoint>* out);
  /// Maps a peer's segment (another process on this machine).
  static Status open(const std::string& shmName, int expectRank, std::shared_ptr<Endpoint>* out);
  /// Removes the segment's name (after every peer mapped it); the memory stays until unmapped.
  void unlink();

  EndpointHeader* header() const { return header_; }
  ChannelCtrl* channel(int sender) const { return channels_ + sender; }
  char* slotData(int sender, uint64_t slot) const;
  bool hasData() const { return data_ != nullptr; }

 private:
  Endpoint() = default;
  void layout(void* base, bool withData);
  void* base_ = nullptr;
  size_t size_ = 0;
  bool shm_ = false;
  std::string name_;
  EndpointHeader* header_ = nullptr;
  ChannelCtrl* channels_ = nullptr;
  char* data_ = nullptr;
};

/// Process-wide registry so that thread ranks of one process find each other's endpoints; holds
/// shared ownership so an endpoint outlives every peer still touching it.
void registerLocalEndpoint(uint64_t commTag, int rank, std::shared_ptr<Endpoint> ep);
std::shared_ptr<Endpoint> findLocalEndpoint(uint64_t commTag, int rank);
void unregisterLocalEndpoint(uint64_t commTag, int rank);

/// "/strata-<tag>-<rank>-<pid>": the owner's pid lets a later job on this machine recognise and
/// remove segments left behind by a process that was killed before it could unlink them.
std::string endpointShmName(uint64_t commTag, int rank, int pid);
/// Unlinks strata segments in /dev/shm whose owner process no longer exists; returns how many.
int removeStaleSegments();

}  // namespace strata
