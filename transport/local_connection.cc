// local_connection.cc: FIFO progress for same-machine peers. Each chunk: the sender fills the
// descriptor of slot i % slots (payload inline, in the staging slot, an address, or the fd / offset /
// inode of a strataMemAlloc region that the receiver maps), publishes its
// sequence number i + 1 with release order and rings the receiver's doorbell; the receiver copies
// or reduces the chunk into place, publishes tail and rings back. Doorbells only cost a syscall
// when their owner sleeps.
#include "transport/local_connection.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "kernels/consume.h"
#include "kernels/host_reduce.h"
#include "transport/config.h"
#include "transport/process_alive.h"
#include "transport/shared_buffers.h"

namespace strata {

LocalConnection::LocalConnection(int myRank, int peer, int myChannel, int peerChannel, std::shared_ptr<Endpoint> mine,
                                 std::shared_ptr<Endpoint> theirs, bool pointerMode, int peerPid)
    : me_(myRank),
      peer_(peer),
      myChannel_(myChannel),
      peerChannel_(peerChannel),
      mine_(std::move(mine)),
      theirs_(std::move(theirs)),
      out_(theirs_->channel(myChannel)),
      in_(mine_->channel(peerChannel)),
      pointerMode_(pointerMode),
      peerPid_(peerPid),
      slots_(theirs_->header()->slots),
      slotBytes_(theirs_->header()->slotBytes),
      cmaMin_(config().cmaMinBytes),
      sharedMin_(config().sharedMinBytes),
      sharedRewriteMin_(std::max(config().sharedRewriteMinBytes, config().sharedMinBytes)),
      claimMax_(config().claimMaxBytes) {
  if (pointerMode_ || !config().localCma) cmaToPeer_ = 0;
  if (pointerMode_ || sharedMin_ == 0) sharedToPeer_ = 0;
  inTail_ = in_->tail.load(std::memory_order_relaxed);
}

Status LocalConnection::progressSends(bool* progressed) {
  bool published = false;
  // The peer sets cmaReadable during setup, before the barrier that precedes any transfer.
  if (cmaToPeer_ < 0) cmaToPeer_ = out_->cmaReadable.load(std::memory_order_acquire) ? 1 : 0;
  if (sharedToPeer_ < 0) sharedToPeer_ = out_->sharedReadable.load(std::memory_order_acquire) ? 1 : 0;
  while (!sends_.empty()) {
    Transfer* t = sends_.front();
    if (t != sendLooked_) {  // once per transfer: does a strataMemAlloc region hold all of it?
      sendLooked_ = t;
      sendShared_ = sharedToPeer_ == 1 && t->bytes >= (t->rewritten ? sharedRewriteMin_ : sharedMin_) &&
                    findShared(t->src, t->bytes, &sendFd_, &sendOffset_, &sendInode_);
    }
    const bool byAddress = pointerMode_ || sendShared_ || (cmaToPeer_ == 1 && t->bytes >= cmaMin_);
    uint64_t tail = out_->tail.load(std::memory_order_acquire);
    while (t->posted < t->bytes && outHead_ - tail < slots_) {
      const size_t chunk = std::min<uint64_t>(slotBytes_, t->bytes - t->posted);
      SlotDesc& d = out_->desc[outHead_ % slots_];
      d.msgBytes = t->bytes;
      d.call = t->call;
      d.chunkBytes = static_cast<uint32_t>(chunk);
      const char* src = static_cast<const char*>(t->src) + t->posted;
      if (sendShared_) {
        d.ptr = sendOffset_ + t->posted;
        d.fd = sendFd_;
        d.inode = sendInode_;
        d.mode = kSlotShared;
      } else if (byAddress) {
        d.ptr = reinterpret_cast<uint64_t>(src);
        d.mode = pointerMode_ ? kSlotPointer : kSlotCma;
      } else if (chunk <= kInlineBytes) {
        std::memcpy(d.inlineData, src, chunk);
        d.mode = kSlotInline;
      } else {
        kernels::copy(theirs_->slotData(myChannel_, outHead_), src, chunk);
        d.mode = kSlotData;
      }
      t->posted += chunk;
      t->lastSeq = outHead_;
      ++outHead_;
      d.seq.store(outHead_, std::memory_order_release);
      published = true;
    }
    // Data in slots: the user buffer is free once copied. By address: wait until the receiver
    // consumed our last chunk, since it reads our buffer.
    bool done = t->posted == t->bytes && (!byAddress || tail > t->lastSeq);
    if (!done) break;
    t->complete = true;
    sends_.pop_front();
    sendLooked_ = nullptr;
    *progressed = true;
  }
  if (published) {
    theirs_->header()->bell.ring();
    *progressed = true;
  }
  return OkStatus();
}

namespace {

// Pointer mode: raises the channel's `reading` flag while this progressRecvs may read the sender's
// buffers. The exchange is a full fence: a sender retracting its chunks (abandonTransfers) either
// sees the flag and waits, or retracted before we look at a chunk again, and then we never read it.
class ReadingGuard {
 public:
  explicit ReadingGuard(std::atomic<uint32_t>* flag) : flag_(flag) {}
  ~ReadingGuard() {
    if (raised_) flag_->store(0, std::memory_order_release);
  }
  /// Raises the flag (once); false if `seq` no longer holds `expect` afterwards (retracted).
  bool raise(const std::atomic<uint64_t>& seq, uint64_t expect) {
    if (raised_) return true;
    raised_ = true;
    flag_->exchange(1, std::memory_order_seq_cst);
    return seq.load(std::memory_order_seq_cst) == expect;
  }

 private:
  std::atomic<uint32_t>* flag_;
  bool raised_ = false;
};

}  // namespace

Status LocalConnection::progressRecvs(bool* progressed) {
  bool consumed = false;
  ReadingGuard reading(&in_->reading);
  while (!recvs_.empty()) {
    Transfer* t = recvs_.front();
    while (t->posted < t->bytes) {
      const SlotDesc& d = in_->desc[inTail_ % slots_];
      if (d.seq.load(std::memory_order_acquire) != inTail_ + 1) break;
      if (pointerMode_ && !reading.raise(d.seq, inTail_ + 1)) break;
      const size_t expect = std::min<uint64_t>(slotBytes_, t->bytes - t->posted);
      if (d.call != t->call) return callMismatch(peer_, d.call, me_, t->call);
      if (d.msgBytes != t->bytes || d.chunkBytes != expect)
        return invalidUsage("message size mismatch: rank {} sent {} bytes, rank {} expects {} bytes", peer_,
                            d.msgBytes, me_, t->bytes);
      const void* src = d.mode == kSlotPointer  ? reinterpret_cast<const void*>(d.ptr)
                        : d.mode == kSlotInline ? static_cast<const void*>(d.inlineData)
                                                : mine_->slotData(peerChannel_, inTail_);
      if (d.mode == kSlotShared) {
        const char* mapped = nullptr;
        STRATA_RETURN_IF_ERROR(peerRegion(d, &mapped));
        src = mapped;
      }
      char* dst = static_cast<char*>(t->dst) + t->posted;
      if (d.mode == kSlotCma) {
        // Single copy: straight from the sender's buffer into ours, or into a one-chunk bounce
        // buffer that the reduction then reads while it is still in cache.
        if (t->kind == Transfer::Recv) {
          STRATA_RETURN_IF_ERROR(cmaRead(dst, d.ptr, d.chunkBytes));
        } else {
          if (bounce_.size() < d.chunkBytes) bounce_.resize(slotBytes_);
          STRATA_RETURN_IF_ERROR(cmaRead(bounce_.data(), d.ptr, d.chunkBytes));
          kernels::reduce(dst, static_cast<const char*>(t->src) + t->posted, bounce_.data(),
                          d.chunkBytes / kernels::dtypeSize(t->dtype), t->dtype, t->op);
        }
      } else if (d.mode == kSlotData && d.chunkBytes <= claimMax_) {
        // A small chunk in our staging slot: consumed, so the sender's next copy into the slot finds
        // its lines modified here rather than shared (kernels/consume.h). Large chunks stream through
        // the slots: their lines leave our cache before the sender comes back, and dirty ones would
        // cost a write-back (no faster from 256 KiB, slower at 8 MiB: docs/PERFORMANCE.md).
        char* slot = mine_->slotData(peerChannel_, inTail_);
        if (t->kind == Transfer::Recv) {
          kernels::consumeCopy(dst, slot, d.chunkBytes);
        } else {
          kernels::consumeReduce(dst, static_cast<const char*>(t->src) + t->posted, slot,
                                 d.chunkBytes / kernels::dtypeSize(t->dtype), t->dtype, t->op);
        }
      } else if (t->kind == Transfer::Recv) {
        std::memcpy(dst, src, d.chunkBytes);
      } else {
        const size_t es = kernels::dtypeSize(t->dtype);
        kernels::reduce(dst, static_cast<const char*>(t->src) + t->posted, src, d.chunkBytes / es, t->dtype, t->op);
      }
      t->posted += d.chunkBytes;
      ++inTail_;
      in_->tail.store(inTail_, std::memory_order_release);
      consumed = true;
    }
    if (t->posted < t->bytes) break;
    t->complete = true;
    recvs_.pop_front();
    *progressed = true;
  }
  if (consumed) {
    theirs_->header()->bell.ring();
    *progressed = true;
  }
  return OkStatus();
}

// Single copy: the chunk in our read-only mapping of the sender's strataMemAlloc region.
Status LocalConnection::peerRegion(const SlotDesc& d, const char** src) {
  if (d.fd != peerFd_ || d.inode != peerInode_ || d.ptr + d.chunkBytes > peerSize_) {
    std::string why;
    size_t size = 0;
    const char* base = mapPeerRegion(peerPid_, d.fd, d.inode, d.ptr + d.chunkBytes, &size, &why);
    if (!base) return systemError("cannot map the send buffer of rank {}: {}", peer_, why);
    peerFd_ = d.fd;
    peerInode_ = d.inode;
    peerBase_ = base;
    peerSize_ = size;
  }
  *src = peerBase_ + d.ptr;
  return OkStatus();
}

Status LocalConnection::cmaRead(void* dst, uint64_t remote, size_t bytes) {
  size_t done = 0;
  while (done < bytes) {
    iovec local{static_cast<char*>(dst) + done, bytes - done};
    iovec far{reinterpret_cast<void*>(remote + done), bytes - done};
    ssize_t r = process_vm_readv(peerPid_, &local, 1, &far, 1, 0);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && errno == ESRCH) {  // gone: a failure it published before exiting is the cause
        const Status failed = peerFailed();
        return failed.ok() ? remoteError("rank {} (pid {}) died", peer_, peerPid_) : failed;
      }
      return systemError("cross-memory read of {} bytes from rank {} failed: {}", bytes - done, peer_,
                         r < 0 ? strerror(errno) : "no progress");
    }
    done += static_cast<size_t>(r);
  }
  return OkStatus();
}

bool probeCma(int pid, uint64_t remoteAddr, uint32_t expect) {
  uint32_t got = 0;
  iovec local{&got, sizeof(got)};
  iovec far{reinterpret_cast<void*>(remoteAddr), sizeof(got)};
  return process_vm_readv(pid, &local, 1, &far, 1, 0) == static_cast<ssize_t>(sizeof(got)) && got == expect;
}

void LocalConnection::abandonTransfers() {
  // Pointer mode only: there the peer reads our buffers in place. Chunks in slots are copies; CMA
  // and shared-region reads of a freed buffer fail or read stale bytes, never our process's memory.
  if (!pointerMode_) return;
  // Unpublish every chunk the peer has not consumed (seq 0 never matches a chunk), then wait out
  // a read that began before (ReadingGuard): it ends within one progressRecvs.
  for (uint64_t s = out_->tail.load(std::memory_order_acquire); s < outHead_; ++s)
    out_->desc[s % slots_].seq.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  while (out_->reading.load(std::memory_order_acquire) != 0) sched_yield();
  while (!sends_.empty()) sends_.pop_front();  // never published again
  sendLooked_ = nullptr;
}

bool LocalConnection::peekCallTag(CallTag* tag) {
  if (!recvs_.empty()) return false;
  const SlotDesc& d = in_->desc[inTail_ % slots_];
  if (d.seq.load(std::memory_order_acquire) != inTail_ + 1) return false;
  *tag = d.call;
  return true;
}

Status LocalConnection::progress(bool* progressed) {
  STRATA_RETURN_IF_ERROR(progressSends(progressed));
  return progressRecvs(progressed);
}

void LocalConnection::addWaitSources(WaitSet* ws) {
  Doorbell* b = &mine_->header()->bell;
  for (Doorbell* x : ws->bells)
    if (x == b) return;
  ws->bells.push_back(b);
}

Status LocalConnection::peerFailed() {
  EndpointHeader* h = theirs_->header();
  if (h->failed.load(std::memory_order_acquire) != kEndpointFailed) return OkStatus();
  std::string why(h->failReason, strnlen(h->failReason, sizeof(h->failReason)));
  return remoteError("rank {} failed: {}", peer_, why.empty() ? "aborted" : why);
}

Status LocalConnection::checkPeer() {
  EndpointHeader* h = theirs_->header();
  uint32_t state = h->failed.load(std::memory_order_acquire);
  const bool dead = state == 0 && !pointerMode_ && peerPid_ > 0 && !processAlive(peerPid_);
  // A peer that failed publishes why, then exits: it may have done both since the first look.
  if (dead) state = h->failed.load(std::memory_order_acquire);
  if (state == 0 && !dead) return OkStatus();
  // What the peer published before it went is still ours to take (its last chunks in our slots,
  // the tail that completes our send): only transfers it can no longer serve are its failure.
  const bool posted = !idle();
  bool progressed = false;
  STRATA_RETURN_IF_ERROR(progress(&progressed));
  if (posted && idle()) return OkStatus();
  if (state == kEndpointLeft)
    return remoteError("rank {} left: it destroyed its communicator while this rank waits on it", peer_);
  if (state != 0) {
    std::string why(h->failReason, strnlen(h->failReason, sizeof(h->failReason)));
    return remoteError("rank {} failed: {}", peer_, why.empty() ? "aborted" : why);
  }
  return remoteError("rank {} (pid {}) died", peer_, peerPid_);
}

}  // namespace strata
