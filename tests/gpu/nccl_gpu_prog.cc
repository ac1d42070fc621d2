// nccl_gpu_prog.cc: one rank (strata-run -n 2 -- strata_nccl_gpu_prog) of ncclAllReduce/ncclAllGather on device buffers via strata's libnccl.so.2.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace {

int gRank = 0, gRanks = 1, gPassed = 0, gFailed = 0;
cudaStream_t gStream = nullptr;

void check(bool ok, const std::string& what) {
  if (ok) gPassed++;
  else gFailed++, std::fprintf(stderr, "FAIL rank %d: %s\n", gRank, what.c_str());
}

template <typename T>
void upload(T* dev, size_t count, const std::function<T(size_t)>& value) {
  std::vector<T> host(count);
  for (size_t i = 0; i < count; ++i) host[i] = value(i);
  cudaMemcpyAsync(dev, host.data(), count * sizeof(T), cudaMemcpyHostToDevice, gStream);
  cudaStreamSynchronize(gStream);
}

// Waits for the stream, then compares count device elements with want(i).
template <typename T>
void expectDevice(const char* what, ncclResult_t rc, const T* dev, size_t count, const std::function<T(size_t)>& want) {
  if (rc != ncclSuccess) return check(false, std::string(what) + ": " + ncclGetErrorString(rc) + " " + ncclGetLastError(nullptr));
  std::vector<T> host(count);
  cudaError_t e = cudaStreamSynchronize(gStream);
  if (e == cudaSuccess) e = cudaMemcpy(host.data(), dev, count * sizeof(T), cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return check(false, std::string(what) + ": " + cudaGetErrorString(e));
  for (size_t i = 0; i < count; ++i)
    if (host[i] != want(i))
      return check(false, std::string(what) + ": element " + std::to_string(i) + " is " + std::to_string(host[i]) +
                              ", expected " + std::to_string(want(i)));
  check(true, what);
}

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

}  // namespace

int main() {
  gRank = envInt("STRATA_RANK", 0), gRanks = envInt("STRATA_WORLD_SIZE", 1);
  const int n = gRanks, r = gRank;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) return std::fprintf(stderr, "no CUDA device\n"), 2;
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  ncclResult_t rc = cudaSetDevice(r % devices) == cudaSuccess ? ncclGetUniqueId(&id) : ncclUnhandledCudaError;
  if (rc == ncclSuccess) rc = ncclCommInitRank(&comm, n, id, r);
  if (rc != ncclSuccess) return std::fprintf(stderr, "init: %s %s\n", ncclGetErrorString(rc), ncclGetLastError(nullptr)), 2;
  const size_t mid = (size_t{1} << 20) + 3;
  float *fa = nullptr, *fb = nullptr;
  int32_t* ia = nullptr;
  if (cudaStreamCreateWithFlags(&gStream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaMalloc(&fa, mid * n * sizeof(float)) != cudaSuccess || cudaMalloc(&fb, mid * n * sizeof(float)) != cudaSuccess ||
      cudaMalloc(&ia, mid * sizeof(int32_t)) != cudaSuccess)
    return std::fprintf(stderr, "device allocation failed\n"), 2;

  auto sumIn = [&](int rank, size_t i) { return static_cast<float>((static_cast<size_t>(rank) + i) % 3); };
  auto sumOut = [&](size_t i) { float s = 0; for (int k = 0; k < n; ++k) s += sumIn(k, i); return s; };
  for (size_t count : {size_t{1000}, mid})
    for (bool inPlace : {false, true}) {
      upload<float>(fa, count, [&](size_t i) { return sumIn(r, i); });
      float* out = inPlace ? fa : fb;
      rc = ncclAllReduce(fa, out, count, ncclFloat32, ncclSum, comm, gStream);
      expectDevice<float>(inPlace ? "all-reduce fp32 sum in place" : "all-reduce fp32 sum", rc, out, count, sumOut);
    }
  auto maxIn = [&](int rank, size_t i) { return static_cast<int32_t>((i * 7 + static_cast<size_t>(rank) * 3) % 5); };
  upload<int32_t>(ia, 7, [&](size_t i) { return maxIn(r, i); });
  rc = ncclAllReduce(ia, ia, 7, ncclInt32, ncclMax, comm, gStream);
  expectDevice<int32_t>("all-reduce int32 max", rc, ia, 7, [&](size_t i) {
    int32_t m = 0;
    for (int k = 0; k < n; ++k) m = std::max(m, maxIn(k, i));
    return m;
  });
  auto moveIn = [&](int rank, size_t i) { return static_cast<float>((static_cast<size_t>(rank) * 100003 + i) % (1u << 24)); };
  for (size_t count : {size_t{1000}, mid}) {
    upload<float>(fa, count, [&](size_t i) { return moveIn(r, i); });
    rc = ncclAllGather(fa, fb, count, ncclFloat32, comm, gStream);
    expectDevice<float>("all-gather fp32", rc, fb, count * n, [&](size_t i) { return moveIn(static_cast<int>(i / count), i % count); });
    upload<float>(fb + r * count, count, [&](size_t i) { return moveIn(r, i); });
    rc = ncclAllGather(fb + r * count, fb, count, ncclFloat32, comm, gStream);
    expectDevice<float>("all-gather fp32 in place", rc, fb, count * n, [&](size_t i) { return moveIn(static_cast<int>(i / count), i % count); });
  }
  // A group of both, launched by ncclGroupEnd.
  upload<int32_t>(ia, 1000, [&](size_t i) { return maxIn(r, i); });
  upload<float>(fa, 1000, [&](size_t i) { return moveIn(r, i); });
  ncclGroupStart();
  ncclResult_t g1 = ncclAllReduce(ia, ia, 1000, ncclInt32, ncclMax, comm, gStream);
  ncclResult_t g2 = ncclAllGather(fa, fb, 1000, ncclFloat32, comm, gStream);
  rc = ncclGroupEnd();
  check(g1 == ncclSuccess && g2 == ncclSuccess, "calls inside the group");
  expectDevice<int32_t>("grouped all-reduce int32 max", rc, ia, 1000, [&](size_t i) {
    int32_t m = 0;
    for (int k = 0; k < n; ++k) m = std::max(m, maxIn(k, i));
    return m;
  });
  expectDevice<float>("grouped all-gather fp32", rc, fb, 1000 * n, [&](size_t i) { return moveIn(static_cast<int>(i / 1000), i % 1000); });
  ncclResult_t async = ncclInternalError;
  check(ncclCommGetAsyncError(comm, &async) == ncclSuccess && async == ncclSuccess, "no asynchronous error");

  // A last all-reduce: once it completes here, every peer has finished reading this rank's buffers.
  rc = ncclAllReduce(ia, ia, 1, ncclInt32, ncclSum, comm, gStream);
  check(rc == ncclSuccess && cudaStreamSynchronize(gStream) == cudaSuccess, "final all-reduce");
  ncclCommDestroy(comm);
  cudaFree(fa), cudaFree(fb), cudaFree(ia);
  cudaStreamDestroy(gStream);
  std::printf("rank %d: %d checks passed, %d failed\n", r, gPassed, gFailed);
  return gFailed == 0 && gPassed > 0 ? 0 : 1;
}
