// op_ring.h: every communicator's ring of its recent operations, for hang reports. The executor
// records each collective (its sequence number on the communicator, call, algorithm, start and end
// time) and each send/recv batch when it starts and ends; while an operation waits, the slow path
// of the wait (every ~100 ms) records its current step and the peers it waits on. Dumps
// (collectives/hang_report.h) are written when an operation fails (with STRATA_DUMP_DIR set), and
// on SIGUSR1.
//
// Cost on the hot path (~4 ns per operation, measured): no allocation, no lock. Starting a record
// is seven relaxed atomic stores inside a version counter (a seqlock: readers retry a record that
// changed while they read it); ending it is two stores. Times are samples, not read per operation:
// the coarse monotonic clock is read at every 16th start, and the wait loop hands over the time it
// reads anyway when it starts idling (noteClock), so a record's start and end are the latest sample
// before them (exact for operations that wait, within 16 operations otherwise).
//
// SIGUSR1 (STRATA_DUMP_SIGNAL, installed when the first communicator is made and SIGUSR1 still has
// its default action): the handler only write(2)s one byte to a pipe, which is async-signal-safe;
// a watcher thread reads the pipe and writes the dump, with locks and allocation as it likes.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "collectives/hang_report.h"
#include "transport/call_tag.h"

namespace strata {

class OpRing {
 public:
  static constexpr uint32_t kEntries = 64;
  static constexpr uint32_t kMaxWaits = 8;

  OpRing() = default;
  ~OpRing();
  OpRing(const OpRing&) = delete;
  OpRing& operator=(const OpRing&) = delete;

  /// Names the ring's communicator and makes it part of this process's dumps.
  void attach(uint64_t commId, int rank, int nranks, const std::string& name);

  /// Starts the record of the communicator's next collective; returns its record index and sets
  /// *seq to its sequence number (1, 2, ...: identical on every rank).
  uint32_t beginColl(const CallTag& callWithoutSeq, uint32_t algo, uint32_t nsteps, uint64_t* seq) {
    const uint64_t s = collSeq_.load(std::memory_order_relaxed) + 1;
    collSeq_.store(s, std::memory_order_relaxed);
    *seq = s;
    return begin(s, callWithoutSeq.word, callWithoutSeq.count, kRunning | (algo << 8), nsteps);
  }
  /// The sequence number the next collective will get.
  uint64_t nextSeq() const { return collSeq_.load(std::memory_order_relaxed) + 1; }
  /// Starts the record of a send/recv batch of `transfers` transfers.
  uint32_t beginP2P(uint64_t transfers, uint32_t nsteps);
  /// Slow path: the operation waits in `step` (1-based) on these peers (peer, isSend).
  void noteWaiting(uint32_t index, uint32_t step, const hang::Wait* waits, uint32_t n);
  void end(uint32_t index, bool failed) {
    // Two stores, outside the version counter: a reader that sees the new state with the old end
    // (or the reverse) reads an operation that just ended, which it is.
    Record& r = recs_[index % kEntries];
    const uint32_t attrs = r.attrs.load(std::memory_order_relaxed);
    if ((attrs & 3) != kRunning) return;
    r.endNs.store(failed ? clockNs() : lastNs_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    r.attrs.store((attrs & ~3u) | (failed ? kFailed : kDone), std::memory_order_release);
  }
  /// A time the executor read anyway (monotonic clock, ns): the next records use it.
  void noteClock(int64_t ns) { lastNs_.store(ns, std::memory_order_relaxed); }
  /// The communicator's failure, for dumps.
  void setError(const std::string& message);

  /// A consistent copy, oldest operation first.
  hang::CommDump snapshot() const;

 private:
  enum State : uint32_t { kRunning = 0, kDone = 1, kFailed = 2 };
  /// One cache line: starting a record touches one line.
  struct alignas(64) Record {
    std::atomic<uint32_t> version{0};  ///< odd while being written (not bumped by end())
    std::atomic<uint32_t> attrs{0};    ///< state | p2p << 2 | algo << 8
    std::atomic<uint64_t> seq{0};
    std::atomic<uint64_t> tagWord{0};  ///< collective, dtype, op, root (transport/call_tag.h)
    std::atomic<uint64_t> count{0};
    std::atomic<int64_t> startNs{0}, endNs{0};
    std::atomic<uint64_t> progress{0};  ///< nsteps | step << 24 | nwaits << 48
  };
  static uint64_t packProgress(uint32_t nsteps, uint32_t step, uint32_t nwaits) {
    return (nsteps & 0xffffffu) | (uint64_t{step & 0xffffffu} << 24) | (uint64_t{nwaits & 0xffu} << 48);
  }
  /// Inline: the executor's hot path. The version counter is bumped to odd, the fields written,
  /// then bumped to even with release order.
  uint32_t begin(uint64_t seq, uint64_t tagWord, uint64_t count, uint32_t attrs, uint32_t nsteps) {
    const uint64_t n = begun_.load(std::memory_order_relaxed);
    const uint32_t index = static_cast<uint32_t>(n % kEntries);
    if ((starts_++ & 15) == 0) lastNs_.store(clockNs(), std::memory_order_relaxed);
    const int64_t now = lastNs_.load(std::memory_order_relaxed);
    Record& r = recs_[index];
    const uint32_t v = r.version.load(std::memory_order_relaxed);
    r.version.store(v + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    r.attrs.store(attrs, std::memory_order_relaxed);
    r.seq.store(seq, std::memory_order_relaxed);
    r.tagWord.store(tagWord, std::memory_order_relaxed);
    r.count.store(count, std::memory_order_relaxed);
    r.startNs.store(now, std::memory_order_relaxed);
    r.endNs.store(0, std::memory_order_relaxed);
    r.progress.store(packProgress(nsteps, 0, 0), std::memory_order_relaxed);
    r.version.store(v + 2, std::memory_order_release);
    begun_.store(n + 1, std::memory_order_release);
    return index;
  }
  Record& open(uint32_t index);
  static void close(Record& r);
  /// The coarse monotonic clock (a few ms resolution, no system call), ns.
  static int64_t clockNs();

  Record recs_[kEntries];
  // The peers the latest waiting operation waits on (only the newest operation waits): written by
  // noteWaiting inside that record's version counter, read with it.
  std::atomic<uint64_t> waitOwner_{~uint64_t{0}};  ///< which record (its number in start order)
  std::atomic<int32_t> waits_[kMaxWaits] = {};      ///< peer * 2 + isSend
  std::atomic<uint64_t> begun_{0};    ///< records started so far
  std::atomic<uint64_t> collSeq_{0};  ///< collectives started so far
  uint64_t p2pSeq_ = 0;
  uint32_t starts_ = 0;               ///< records started, for the clock sampling
  std::atomic<int64_t> lastNs_{0};    ///< the latest time sample
  bool attached_ = false;
  uint64_t commId_ = 0;
  int rank_ = 0, nranks_ = 0;
  std::string name_;
  mutable std::mutex errMu_;
  std::string error_;
};

/// Writes this process's dump (every attached ring) to STRATA_DUMP_DIR/strata-<host>-<pid>.dump
/// (written under a temporary name, then renamed). Without STRATA_DUMP_DIR it goes to stderr when
/// `stderrWithoutDir`, else nowhere. Never called from a signal handler.
void dumpOpRings(const char* reason, bool stderrWithoutDir);
/// This process's dump as text (tests).
std::string opRingDumpText(const char* reason);

}  // namespace strata
