// gpu_capture_test.cc: CUDA graph capture of device collectives, and host and device buffers on one communicator.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gpu/device_ranks.h"

namespace strata::testing {
namespace {

std::string cudaWhat(cudaError_t e) { return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")"; }

// (d) Two all-reduces captured into a graph, then the graph launched three times with new inputs each time: every
// launch must produce that launch's result. Cold (n = 2): the communicator's first device work happens during
// capture. Warm (n = 4): the same calls ran once, eagerly, on other buffers before the capture.
TEST(GpuStream, GraphCaptureReplaysWithNewInputs) {
  STRATA_REQUIRE_CUDA_DEVICE();
  for (int n : {2, 4}) {
    const bool warm = n == 4;
    SCOPED_TRACE(std::string(warm ? "warm" : "cold") + " capture, n = " + std::to_string(n));
    runDeviceThreadRanks(n, [warm](DeviceRank& d, CheckReport& rep) {
      const size_t small = 1000, big = kMidCount;
      ArenaCursor cur{&d};
      if (warm) {
        d.setLabel("graph capture: eager warm-up");
        ArenaCursor scratch{&d, size_t{64} << 20};
        void* a = scratch.take(big * sizeof(int32_t));
        void* b = scratch.take(big * sizeof(int32_t));
        strataResult_t w1 = strataAllReduceStream(a, b, small, strataFloat32, strataSum, d.comm, d.stream);
        strataResult_t w2 = strataAllReduceStream(a, a, big, strataInt32, strataMax, d.comm, d.stream);
        expectCheck(d, rep, w1 == strataSuccess && w2 == strataSuccess && cudaStreamSynchronize(d.stream) == cudaSuccess,
                    "eager warm-up before capture");
      }
      auto* fin = reinterpret_cast<float*>(cur.take(small * sizeof(float)));
      auto* fout = reinterpret_cast<float*>(cur.take(small * sizeof(float)));
      auto* ibuf = reinterpret_cast<int32_t*>(cur.take(big * sizeof(int32_t)));
      d.setLabel(warm ? "graph capture (warm)" : "graph capture (cold)");
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      cudaError_t begin = cudaStreamBeginCapture(d.stream, cudaStreamCaptureModeThreadLocal);
      strataResult_t r1 = strataAllReduceStream(fin, fout, small, strataFloat32, strataSum, d.comm, d.stream);
      strataResult_t r2 = strataAllReduceStream(ibuf, ibuf, big, strataInt32, strataMax, d.comm, d.stream);
      cudaError_t end = cudaStreamEndCapture(d.stream, &graph);
      cudaError_t inst = graph ? cudaGraphInstantiate(&exec, graph, 0) : cudaErrorInvalidValue;
      const bool captured = begin == cudaSuccess && r1 == strataSuccess && r2 == strataSuccess && end == cudaSuccess &&
                            inst == cudaSuccess;
      expectCheck(d, rep, captured,
                  fmt::format("capture: begin {}, all-reduces {} {} ({}), end {}, instantiate {}", cudaWhat(begin),
                              static_cast<int>(r1), static_cast<int>(r2), strataGetLastError(d.comm), cudaWhat(end),
                              cudaWhat(inst)));
      // Capturing must not run anything: the output still holds the arena's fill bytes.
      std::vector<float> out(small);
      std::vector<uint32_t> fillBits(small);
      cudaError_t e = cudaMemcpyAsync(out.data(), fout, small * sizeof(float), cudaMemcpyDeviceToHost, d.stream);
      if (e == cudaSuccess) e = cudaStreamSynchronize(d.stream);
      std::memcpy(fillBits.data(), out.data(), small * sizeof(float));
      const bool untouched = std::all_of(fillBits.begin(), fillBits.end(), [](uint32_t b) { return b == 0xA5A5A5A5u; });
      expectCheck(d, rep, e == cudaSuccess && untouched,
                  e != cudaSuccess ? "download after capture: " + cudaWhat(e)
                                   : std::string("the captured all-reduce ran during capture (its output was written)"));
      if (!d.allTrue(captured)) {  // a rank without a graph would leave its peers waiting
        if (exec) cudaGraphExecDestroy(exec);
        if (graph) cudaGraphDestroy(graph);
        return;
      }
      std::vector<float> fhost(small);
      std::vector<int32_t> ihost(big);
      auto iv = [](int k, int r, size_t i) { return static_cast<int32_t>((k * 7 + r * 3 + i) % 11 + 100 * k); };
      for (int k = 0; k < 3; ++k) {
        d.setLabel(fmt::format("graph launch {}", k));
        for (size_t i = 0; i < small; ++i) fhost[i] = static_cast<float>((k + 1) * (d.rank + 1) + static_cast<int>(i % 5));
        for (size_t i = 0; i < big; ++i) ihost[i] = iv(k, d.rank, i);
        e = cudaMemcpyAsync(fin, fhost.data(), small * sizeof(float), cudaMemcpyHostToDevice, d.stream);
        if (e == cudaSuccess) e = cudaMemcpyAsync(ibuf, ihost.data(), big * sizeof(int32_t), cudaMemcpyHostToDevice, d.stream);
        if (e == cudaSuccess) e = cudaGraphLaunch(exec, d.stream);
        if (e == cudaSuccess) e = cudaMemcpyAsync(fhost.data(), fout, small * sizeof(float), cudaMemcpyDeviceToHost, d.stream);
        if (e == cudaSuccess) e = cudaMemcpyAsync(ihost.data(), ibuf, big * sizeof(int32_t), cudaMemcpyDeviceToHost, d.stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(d.stream);
        long badF = -1, badI = -1;
        for (size_t i = 0; i < small && badF < 0; ++i)
          if (fhost[i] != static_cast<float>((k + 1) * d.n * (d.n + 1) / 2 + d.n * static_cast<int>(i % 5))) badF = static_cast<long>(i);
        for (size_t i = 0; i < big && badI < 0; ++i) {
          int32_t want = iv(k, 0, i);
          for (int r = 1; r < d.n; ++r) want = std::max(want, iv(k, r, i));
          if (ihost[i] != want) badI = static_cast<long>(i);
        }
        expectCheck(d, rep, e == cudaSuccess && badF < 0 && badI < 0,
                    fmt::format("graph launch {}: {}; first wrong fp32 sum element {}, int32 max element {}", k,
                                cudaWhat(e), badF, badI));
      }
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    });
  }
}

// (e) Host buffers and device buffers in consecutive calls on one communicator.
TEST(GpuStream, HostAndDeviceBuffersOnOneComm) {
  STRATA_REQUIRE_CUDA_DEVICE();
  runDeviceThreadRanks(2, [](DeviceRank& d, CheckReport& rep) {
    auto hostAllReduce = [&](bool streamForm) {
      d.setLabel(streamForm ? "host all-reduce, stream form" : "host all-reduce");
      std::vector<int32_t> send(1000), recv(1000, -1);
      for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<int32_t>(d.rank * 10 + static_cast<int>(i % 7));
      strataResult_t rc = streamForm ? strataAllReduceStream(send.data(), recv.data(), 1000, strataInt32, strataSum,
                                                             d.comm, d.stream)
                                     : strataAllReduce(send.data(), recv.data(), 1000, strataInt32, strataSum, d.comm);
      // Host buffers: complete when the call returns, whatever the stream.
      long bad = -1;
      for (size_t i = 0; i < recv.size() && bad < 0; ++i)
        if (recv[i] != 10 * d.n * (d.n - 1) / 2 + d.n * static_cast<int>(i % 7)) bad = static_cast<long>(i);
      expectCheck(d, rep, rc == strataSuccess && bad < 0,
                  fmt::format("host all-reduce ({} form): returned {} ({}), first wrong element {}",
                              streamForm ? "stream" : "plain", static_cast<int>(rc), strataGetLastError(d.comm), bad));
    };
    hostAllReduce(false);
    checkDevice(d, CollType::AllReduce, strataFloat32, strataSum, 1000, 0, false, &rep);
    hostAllReduce(true);
    checkDevice(d, CollType::AllGather, strataInt32, strataSum, kMidCount, 0, false, &rep);
    hostAllReduce(false);
    checkDevice(d, CollType::Broadcast, strataBfloat16, strataSum, 1000, 1, true, &rep);
  });
}

// (e) One call mixing a host buffer with a device buffer is an invalid argument; the communicator stays usable.
TEST(GpuStream, MixingHostAndDeviceBuffersIsInvalidArgument) {
  STRATA_REQUIRE_CUDA_DEVICE();
  runDeviceThreadRanks(2, [](DeviceRank& d, CheckReport& rep) {
    ArenaCursor cur{&d};
    void* dev = cur.take(4000);
    std::vector<float> host(1000, 1.0f);
    auto expectInvalid = [&](strataResult_t rc, const char* what) {
      const std::string msg = strataGetLastError(d.comm);
      expectCheck(d, rep, rc == strataInvalidArgument && !msg.empty(),
                  fmt::format("{}: returned {} (message '{}'), expected strataInvalidArgument", what, static_cast<int>(rc), msg));
    };
    d.setLabel("mixed host/device arguments");
    expectInvalid(strataAllReduceStream(host.data(), dev, 1000, strataFloat32, strataSum, d.comm, d.stream),
                  "all-reduce host send, device recv");
    expectInvalid(strataAllReduceStream(dev, host.data(), 1000, strataFloat32, strataSum, d.comm, d.stream),
                  "all-reduce device send, host recv");
    expectInvalid(strataAllGatherStream(host.data(), dev, 10, strataFloat32, d.comm, d.stream),
                  "all-gather host send, device recv");
    expectInvalid(strataReduceScatterStream(dev, host.data(), 10, strataFloat32, strataSum, d.comm, d.stream),
                  "reduce-scatter device send, host recv");
    expectInvalid(strataAllToAllStream(host.data(), dev, 10, strataFloat32, d.comm, d.stream),
                  "all-to-all host send, device recv");
    strataResult_t async = strataInternalError;
    expectCheck(d, rep, strataCommGetAsyncError(d.comm, &async) == strataSuccess && async == strataSuccess,
                "the communicator is marked failed after argument errors");
    checkDevice(d, CollType::AllReduce, strataFloat32, strataSum, 1000, 0, false, &rep);
  });
}

}  // namespace
}  // namespace strata::testing
