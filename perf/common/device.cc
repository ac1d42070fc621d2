// device.cc: CUDA runtime calls of the perf tools (static runtime), or stubs without PERF_HAVE_CUDA.
#include "perf/common/device.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#if PERF_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace strata::perf {

int launcherLocalRank() {
  for (const char* name : {"STRATA_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK", "SLURM_LOCALID"}) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    char* end = nullptr;
    const long r = std::strtol(v, &end, 10);
    if (*end == '\0' && r >= 0 && r < (1 << 20)) return static_cast<int>(r);
  }
  return -1;
}

int perfLocalRank(int rank, int thread, int nthreads) {
  const int local = launcherLocalRank();
  return local >= 0 ? local * nthreads + thread : rank;
}

#if PERF_HAVE_CUDA

namespace {

void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw std::runtime_error(fmt::format("{} failed: {}", what, cudaGetErrorString(rc)));
}

cudaStream_t asStream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace

bool deviceSupportBuilt() { return true; }

int cudaDevices(std::string* why) {
  int n = 0;
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    if (why) *why = cudaGetErrorString(rc);
    cudaGetLastError();  // clear it, so that later calls report their own errors
    return 0;
  }
  if (n == 0 && why) *why = "cudaGetDeviceCount found 0 devices";
  return n;
}

int selectDevice(int localRank) {
  std::string why;
  const int n = cudaDevices(&why);
  if (n == 0) throw std::runtime_error("no CUDA device (" + why + ")");
  const int dev = localRank % n;
  check(cudaSetDevice(dev), "cudaSetDevice");
  return dev;
}

DeviceRank::DeviceRank(int localRank, size_t bytes) {
  props_.index = selectDevice(localRank);
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, props_.index), "cudaGetDeviceProperties");
  props_.ccMajor = p.major;
  props_.ccMinor = p.minor;
  std::string(p.name).copy(props_.name, sizeof props_.name - 1);
  cudaDeviceGetPCIBusId(props_.busId, sizeof props_.busId, props_.index);
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  stream_ = s;
  const size_t size = bytes ? bytes : 1;
  try {
    check(cudaMalloc(&send_, size), "cudaMalloc (send buffer)");
    check(cudaMalloc(&recv_, size), "cudaMalloc (receive buffer)");
    check(cudaMemset(send_, 0, size), "cudaMemset");
    check(cudaMemset(recv_, 0, size), "cudaMemset");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  } catch (...) {
    cudaFree(send_);
    cudaFree(recv_);
    cudaStreamDestroy(s);
    throw;
  }
}

DeviceRank::~DeviceRank() {
  cudaStreamSynchronize(asStream(stream_));
  cudaFree(send_);
  cudaFree(recv_);
  cudaStreamDestroy(asStream(stream_));
}

void DeviceRank::upload(void* dev, const void* host, size_t bytes) const {
  if (!bytes) return;
  check(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, asStream(stream_)), "cudaMemcpyAsync (to device)");
  sync();
}

void DeviceRank::download(void* host, const void* dev, size_t bytes) const {
  if (!bytes) return;
  check(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, asStream(stream_)), "cudaMemcpyAsync (to host)");
  sync();
}

void DeviceRank::copyAsync(void* dst, const void* src, size_t bytes) const {
  if (!bytes || dst == src) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, asStream(stream_)), "cudaMemcpyAsync (device)");
}

void DeviceRank::sync() const { check(cudaStreamSynchronize(asStream(stream_)), "cudaStreamSynchronize"); }

double DeviceRank::copyBandwidth(size_t bytes, int iters) const {
  if (!bytes || iters <= 0) return 0;
  for (int i = 0; i < 2; ++i) copyAsync(recv_, send_, bytes);
  sync();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) copyAsync(recv_, send_, bytes);
  sync();
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sec > 0 ? static_cast<double>(bytes) * iters / sec / 1e9 : 0;
}

void* deviceAlloc(size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
  return p;
}

void deviceFree(void* p) {
  if (p) cudaFree(p);
}

#else  // no CUDA runtime in this build

namespace {
[[noreturn]] void noCuda() { throw std::runtime_error("device memory needs the CUDA build (STRATA_ENABLE_CUDA)"); }
}  // namespace

bool deviceSupportBuilt() { return false; }

int cudaDevices(std::string* why) {
  if (why) *why = "built without CUDA";
  return 0;
}

int selectDevice(int) { noCuda(); }
DeviceRank::DeviceRank(int, size_t) { noCuda(); }
DeviceRank::~DeviceRank() = default;
void DeviceRank::upload(void*, const void*, size_t) const { noCuda(); }
void DeviceRank::download(void*, const void*, size_t) const { noCuda(); }
void DeviceRank::copyAsync(void*, const void*, size_t) const { noCuda(); }
void DeviceRank::sync() const { noCuda(); }
double DeviceRank::copyBandwidth(size_t, int) const { noCuda(); }
void* deviceAlloc(size_t) { noCuda(); }
void deviceFree(void*) {}

#endif

}  // namespace strata::perf
