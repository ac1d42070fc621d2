// soak_exec.h: one rank of strata-soak. Keeps the rank's communicators (the world and one per
// split family it belongs to), runs the planner's steps on them with guarded buffers, and checks
// every result exactly (outputs, unchanged inputs, untouched unused buffers, guard bytes).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "strata/strata.h"
#include "tools/soak_plan.h"

namespace strata::soak {

/// Counters of one rank; summed over ranks for the job's summary (ops: counted by the first rank
/// of each communicator, so the sum is the number of operations the job ran).
struct Stats {
  uint64_t ops[kKinds] = {};
  uint64_t calls = 0;      ///< strata calls this rank made (collectives, sends, receives, splits)
  uint64_t steps = 0, groups = 0, multiComm = 0, splits = 0;
  uint64_t checkedBytes = 0;
  uint64_t wrong = 0, errors = 0, hangs = 0;
  static constexpr int kWords = kKinds + 10;
  void toWords(uint64_t* w) const;
  void fromWords(const uint64_t* w);
  uint64_t totalOps() const;
};

/// What a rank's watchdog reads: the step it runs and since when.
struct Progress {
  std::atomic<uint64_t> step{0};
  std::atomic<int64_t> sinceNs{0};  ///< steady-clock ns when the current step began; 0 between steps
  std::mutex m;
  std::string what;                 ///< what runs outside a step's calls (a split), described
  const Step* current = nullptr;    ///< the step whose calls run (under m)
  const std::vector<CommSpec>* specs = nullptr;
};

class RankRunner {
 public:
  /// `world` is this rank's world communicator (owned from now on); splits get `timeoutSec`
  /// (0: STRATA_TIMEOUT decides).
  RankRunner(strataComm_t world, int worldSize, const PlanOptions& opt, double timeoutSec, Progress* progress);
  ~RankRunner();
  RankRunner(const RankRunner&) = delete;
  RankRunner& operator=(const RankRunner&) = delete;

  /// Creates the initial split communicators. False on an error (see error()).
  bool start(const std::vector<CommSpec>& specs);
  /// Runs one step (after the planner updated `specs`). False on an error: the step's call failed
  /// or a split gave the wrong communicator; the rank cannot go on. Wrong values are counted, not errors.
  bool run(const Step& step, const std::vector<CommSpec>& specs);

  strataComm_t world() const { return comms_[0]; }
  int rank() const { return rank_; }
  Stats& stats() { return stats_; }
  const std::string& error() const { return error_; }
  strataResult_t errorCode() const { return errorCode_; }
  /// Aborts (on failure) or destroys every communicator.
  void closeAll(bool abort);
  /// Test of the checks themselves: changes this rank's next checked result, once.
  void corruptNextResult() { corrupt_ = true; }
  /// What the rank runs now (for the watchdog; any thread).
  std::string describeCurrent();
  /// A step as this rank sees it ("step #12 group {all_reduce fp16 sum count 7 ...}").
  std::string describe(const Step& step, const std::vector<CommSpec>& specs) const;

 private:
  struct Buffer;
  struct Prepared;
  bool resplit(int slot, const std::vector<CommSpec>& specs);
  bool prepare(const Item& it, const std::vector<CommSpec>& specs, Prepared* p);
  strataResult_t issue(Prepared& p, bool inGroup);
  void verify(Prepared& p, const Step& step);
  void wrong(const Prepared& p, const Step& step, const std::string& what);
  bool fail(const std::string& what, strataResult_t rc);

  std::vector<strataComm_t> comms_;  ///< per slot: this rank's communicator, or NULL
  int rank_ = 0, world_ = 0;
  PlanOptions opt_;
  double timeoutSec_ = 0;
  Progress* progress_;
  Stats stats_;
  std::string error_;
  strataResult_t errorCode_ = strataSuccess;
  struct Arena {
    unsigned char* base = nullptr;
    size_t size = 0, used = 0;
    bool host = false;
  } arenas_[2];
  int wrongReports_ = 0;
  bool corrupt_ = false;
  std::vector<Prepared> prepared_;
};

}  // namespace strata::soak
