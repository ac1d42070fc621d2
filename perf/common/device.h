// device.h: the CUDA runtime side of --memory device: which GPU a rank uses (several ranks may share
// one), its buffers and stream, host<->device copies, and the device-to-device copy reference.
// Built against the static CUDA runtime (PERF_HAVE_CUDA) so the tools start without a driver; in a
// build without CUDA every entry point reports that instead.
#pragma once

#include <cstddef>
#include <string>

namespace strata::perf {

/// True when the perf tools were built with the CUDA runtime (STRATA_ENABLE_CUDA).
bool deviceSupportBuilt();

/// Number of CUDA devices this process sees; 0 with *why = the CUDA error text (no driver, no
/// device) or "built without CUDA".
int cudaDevices(std::string* why);

/// The launcher's local rank of this process (STRATA_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK,
/// LOCAL_RANK, SLURM_LOCALID), or -1 when none is set.
int launcherLocalRank();

/// This rank's index among the ranks of its machine: local rank x threads + thread, or `rank` when
/// no launcher says. Device = that % device count.
int perfLocalRank(int rank, int thread, int nthreads);

/// Makes device localRank % count current in the calling thread and returns it. Throws.
int selectDevice(int localRank);

/// What the header prints about a rank's GPU.
struct DeviceProps {
  int index = -1;
  int ccMajor = 0, ccMinor = 0;
  char name[48] = {};
  char busId[20] = {};
};

/// One rank's device: current device (set in the constructing thread), a non-blocking stream, and
/// the send and receive buffers of `bytes` each. Copies to and from the host are synchronous.
class DeviceRank {
 public:
  DeviceRank(int localRank, size_t bytes);
  ~DeviceRank();
  DeviceRank(const DeviceRank&) = delete;
  DeviceRank& operator=(const DeviceRank&) = delete;

  const DeviceProps& props() const { return props_; }
  void* stream() const { return stream_; }  ///< a cudaStream_t
  void* send() const { return send_; }
  void* recv() const { return recv_; }

  void upload(void* dev, const void* host, size_t bytes) const;
  void download(void* host, const void* dev, size_t bytes) const;
  /// Device-to-device copy enqueued on the stream (not waited for).
  void copyAsync(void* dst, const void* src, size_t bytes) const;
  /// Waits for everything enqueued on the stream; throws on an asynchronous CUDA error.
  void sync() const;
  /// GB/s (1e9 bytes copied per second) of cudaMemcpyAsync device to device of `bytes`, send to
  /// receive buffer: `iters` copies after two warm-up copies, host clock around them and the sync.
  double copyBandwidth(size_t bytes, int iters) const;

 private:
  DeviceProps props_;
  void* stream_ = nullptr;
  void* send_ = nullptr;
  void* recv_ = nullptr;
};

/// cudaMalloc / cudaFree on the current device (scratch of a backend). Throws.
void* deviceAlloc(size_t bytes);
void deviceFree(void* p);

}  // namespace strata::perf
