// task.h: the host executor's unit of work. A Task is one collective (its schedule resolved to
// pointers, plus pre/post local work for avg, pre-multiplied sums and in-place all-to-all) or one
// batch of grouped sends/receives. Tasks are non-blocking state machines: progress() advances the
// current step's transfers and moves on when they complete, so one thread can drive the tasks of
// several communicators (the single-thread multi-rank group pattern).
#pragma once

#include <string>
#include <vector>

#include "collectives/schedule.h"
#include "kernels/host_reduce.h"
#include "transport/connection.h"

namespace strata {

class Comm;

/// A collective as the API received it.
struct CollCall {
  CollType coll = CollType::AllReduce;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count = 0;
  strataDataType_t dtype = strataFloat32;
  strataRedOp_t op = strataSum;
  int root = 0;
};

/// One grouped send or receive.
struct P2PCall {
  bool isSend = true;
  void* buf = nullptr;
  size_t count = 0;
  strataDataType_t dtype = strataFloat32;
  int peer = 0;
};

class Task {
 public:
  /// Records the work; it is resolved by start() when the task's turn comes (tasks of one comm
  /// share its scratch memory, so they resolve one after the other).
  void setCollective(Comm& comm, const CollCall& call);
  void setP2P(Comm& comm, const std::vector<P2PCall>& calls);
  bool started() const { return started_; }
  Status start();

  /// Advances; sets *progressed if anything moved. done() once every step finished.
  Status progress(bool* progressed);
  bool done() const { return started_ && step_ >= steps_.size() && postDone_; }
  void addWaitSources(WaitSet* ws);
  /// Liveness of the peers the current step waits on, failure notices of the peers of its later
  /// steps (they will not serve them), and messages of this collective's number that another call
  /// sent (a mismatch no receive of this call would see: e.g. other roots).
  Status checkPeers();
  /// A message of this collective's number from another call, waiting unreceived on an open
  /// connection: the mismatch named at its source (error path and slow path only).
  Status strayCallMismatch();
  /// "AllReduce(ring) step 3/14, waiting on ranks 1, 2" for timeout messages.
  std::string describe() const;
  /// The op ring (collectives/op_ring.h): the current step and the peers it waits on (slow path),
  /// and the failure.
  void noteWaiting();
  void noteFailed(const Status& st);
  /// On failure, before the call returns: no peer or transport touches this task's buffers any
  /// more (Connection::abandonTransfers), so the caller may free them.
  void abandonTransfers();
  Comm* comm() const { return comm_; }

 private:
  struct ROp {
    OpCode code;
    int peer;
    const char* src;
    const char* src2;
    char* dst;
    size_t count;
    bool rewritten;  ///< Send: src's memory is written again soon (Transfer::rewritten)
  };
  /// Resolves a collective (algorithm from the tuner or STRATA_ALGO) and runs its pre-work.
  Status initCollective(Comm& comm, const CollCall& call);
  /// Resolves a batch of sends/receives: one step, all transfers concurrent, FIFO per peer.
  Status initP2P(Comm& comm, const std::vector<P2PCall>& calls);
  void reset(Comm& comm);
  char* resolve(const Slice& s) const;
  void beginStep();
  void runLocal(const ROp& op);

  Comm* comm_ = nullptr;
  bool isP2P_ = false;
  bool started_ = false;
  CollCall call_;
  std::vector<P2PCall> p2p_;
  std::vector<const P2PCall*> selfSends_, selfRecvs_;
  Algo algo_ = Algo::Auto;  ///< for messages; the label is built only on the error path
  strataDataType_t dtype_ = strataUint8;
  size_t esize_ = 1;
  kernels::RedKind red_ = kernels::RedKind::Sum;
  // Pre and post work: scale (pre-multiplied sum) and divide (avg).
  const void* scaleScalar_ = nullptr;
  const char* scaleSrc_ = nullptr;
  char* scaleDst_ = nullptr;
  size_t scaleCount_ = 0;
  char* divideBuf_ = nullptr;
  size_t divideCount_ = 0;
  bool postDone_ = true;
  // Buffers the schedule names.
  const char* input_ = nullptr;
  char* output_ = nullptr;
  char* scratch_ = nullptr;
  // Resolved steps.
  /// Resolved ops; storage only grows, so refilling it per call neither allocates nor clears.
  struct OpList {
    std::vector<ROp> storage;
    size_t n = 0;
    void clear() { n = 0; }
    ROp* grow(size_t k) {
      if (storage.size() < n + k) storage.resize(n + k);
      ROp* p = storage.data() + n;
      n += k;
      return p;
    }
    void push_back(const ROp& r) { *grow(1) = r; }
    ROp& operator[](size_t i) { return storage[i]; }
    const ROp& operator[](size_t i) const { return storage[i]; }
    ROp* begin() { return storage.data(); }
    ROp* end() { return storage.data() + n; }
    size_t size() const { return n; }
  };
  OpList ops_;
  std::vector<Schedule::Step> steps_;
  std::vector<Transfer> transfers_;
  size_t step_ = 0;
  bool stepPosted_ = false;
  CallTag tag_;                ///< carried by every message (transport/call_tag.h)
  uint32_t ringIndex_ = 0;     ///< this operation's record in the communicator's op ring
  bool ringOpen_ = false;
};

/// Runs task lists to completion: each list's tasks in order (one list per communicator), all
/// lists concurrently. Waits spin briefly, then sleep; fails on peer death, abort or timeout.
/// On failure the communicator of the failing task is marked failed.
/// Working state of runTasks, kept by the caller across calls so that running allocates nothing.
struct RunScratch {
  std::vector<size_t> cur;
  WaitSet ws;
};
Status runTasks(std::vector<std::vector<Task*>>& lists, RunScratch& scratch);

}  // namespace strata
