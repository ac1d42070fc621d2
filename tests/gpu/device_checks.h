// device_checks.h: collectives on CUDA device buffers (stream forms) with exact checks, for the GPU suites.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/schedule.h"
#include "strata/strata.h"
#include "support/coll_checks.h"

namespace strata::testing {

/// Empty when this process can use a CUDA device, otherwise why not (for the visible skips).
std::string noCudaDeviceReason();

/// Counts of the sweeps: 0/1/odd/medium, past 1 Mi elements, and past 8 MiB of fp32 (bulk protocol).
constexpr size_t kMidCount = (size_t{1} << 20) + 3;
constexpr size_t kBigCount = (size_t{3} << 20) + 5;

/// One rank's device state: its communicator, stream, and a device arena the checks carve buffers from
/// (allocated once: cudaMalloc/cudaFree between collectives could synchronise the device while a peer
/// rank's kernel waits for this rank).
struct DeviceRank {
  strataComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int rank = 0, n = 1, device = 0;
  unsigned char* arena = nullptr;
  size_t arenaBytes = 0;
  int checks = 0;  ///< checks run; a clean rank has report.passed == checks
  std::mutex labelMutex;
  std::string label = "setup";  ///< what the rank is doing now (shown by the watchdog)
  std::function<void()> barrier;         ///< host-side barrier of all ranks (set by the runner)
  std::function<bool(bool)> allTrue;     ///< true on every rank when `ok` is true on every rank (thread runner)
  void setLabel(const std::string& s) {
    std::lock_guard<std::mutex> g(labelMutex);
    label = s;
  }
  std::string currentLabel() {
    std::lock_guard<std::mutex> g(labelMutex);
    return label;
  }
};

/// Arena big enough for every check of the sweeps with n ranks.
size_t sweepArenaBytes(int n);
/// Selects device rank % count, creates a non-blocking stream and the arena. False with `why` on failure.
bool openDeviceRank(DeviceRank* d, strataComm_t comm, size_t arenaBytes, std::string* why);
void closeDeviceRank(DeviceRank* d);

/// Bump allocator over the arena (256-byte aligned slices), so several checks can be in flight at once.
struct ArenaCursor {
  DeviceRank* d;
  size_t used = 0;
  unsigned char* take(size_t bytes);  ///< nullptr when the arena is exhausted
};

/// One collective on device buffers: prepare() fills host images (canaries included) and uploads them,
/// issue() makes the stream call, verify() (after the stream is synchronised) downloads and compares
/// exactly: every output element, canaries past each buffer, and out-of-place inputs left untouched.
class DeviceCheck {
 public:
  DeviceCheck(DeviceRank& d, ArenaCursor& cursor, CollType coll, strataDataType_t t, int op, size_t count,
              int root, bool inPlace);
  ~DeviceCheck();
  strataResult_t issue(strataStream_t stream);  ///< the *Stream call (creates a pre-mul op if needed)
  strataResult_t issuePlain();                  ///< the plain (legacy default stream) form
  void releaseOp();                             ///< destroys the pre-mul op (allowed once the call returned)
  void verify(CheckReport* rep);                ///< counts one check
  const std::string& label() const { return label_; }
  bool prepared() const { return prepError_.empty(); }

 private:
  DeviceRank& d_;
  CollType coll_;
  strataDataType_t t_;
  int op_;
  size_t count_;
  int root_;
  bool inPlace_;
  std::string label_, prepError_;
  strataRedOp_t rop_ = strataSum;
  bool opCreated_ = false;
  strataResult_t rc_ = strataSuccess;
  std::string lastError_;
  cudaStream_t stream_ = nullptr;          // the stream of the call (verify downloads on it)
  std::vector<unsigned char> a_, b_, a0_;  // host images (a0_: a as uploaded)
  int recvWhere_ = 0;                      // 1: recv points into a, 2: into b, 0: no recv buffer
  size_t recvOff_ = 0;
  size_t aElems_ = 0, bElems_ = 0;
  unsigned char *da_ = nullptr, *db_ = nullptr;
  const void* send_ = nullptr;
  void* recv_ = nullptr;
};

/// One collective, run alone on d.stream (plainForm: the plain call on the legacy default stream) and checked.
void checkDevice(DeviceRank& d, CollType coll, strataDataType_t t, int op, size_t count, int root, bool inPlace,
                 CheckReport* rep, bool plainForm = false);

/// Grouped sends and receives on device buffers. Ring: rank r sends `count` elements to r + shift and
/// receives from r - shift (in place: one buffer for both). All-to-all-v: r sends (r + p) % 3 + base
/// elements to every peer p, itself included.
void checkDeviceRing(DeviceRank& d, strataDataType_t t, size_t count, int shift, bool inPlace, CheckReport* rep);
void checkDeviceAllToAllV(DeviceRank& d, strataDataType_t t, size_t base, CheckReport* rep);

/// Parts of the sweep (one GoogleTest case each in the thread suite; all of them in the worker).
enum class SweepPart { AllReduceTypes, AllReduceOps, ReduceScatter, AllGather, Broadcast, Reduce, AllToAll,
                       Gather, Scatter, SendRecv };
constexpr SweepPart kAllSweepParts[] = {SweepPart::AllReduceTypes, SweepPart::AllReduceOps, SweepPart::ReduceScatter,
                                        SweepPart::AllGather,      SweepPart::Broadcast,    SweepPart::Reduce,
                                        SweepPart::AllToAll,       SweepPart::Gather,       SweepPart::Scatter,
                                        SweepPart::SendRecv};
const char* sweepPartName(SweepPart p);
/// Runs one part of the device sweep on every rank (collective). `quick` samples fewer cases.
void runDeviceSweep(DeviceRank& d, SweepPart part, bool quick, CheckReport* rep);

}  // namespace strata::testing
