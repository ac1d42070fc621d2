// gpu_stream_test.cc: stream semantics of device collectives: asynchrony, groups (one comm; one thread for all), two streams.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "gpu/device_ranks.h"
#include "gpu/spin_kernel.h"

namespace strata::testing {
namespace {

std::string cudaWhat(cudaError_t e) { return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")"; }

template <typename T>
T* take(ArenaCursor& cur, size_t count) {
  return reinterpret_cast<T*>(cur.take(count * sizeof(T)));
}

// Copies `count` elements of device memory to the host on `stream` and waits.
template <typename T>
std::vector<T> download(const T* dev, size_t count, cudaStream_t stream, cudaError_t* err) {
  std::vector<T> host(count);
  *err = cudaMemcpyAsync(host.data(), dev, count * sizeof(T), cudaMemcpyDeviceToHost, stream);
  if (*err == cudaSuccess) *err = cudaStreamSynchronize(stream);
  return host;
}

// Index of the first element where got != want(i), or -1.
template <typename T, typename F>
long firstMismatch(const std::vector<T>& got, F want) {
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want(i)) return static_cast<long>(i);
  return -1;
}

// (a) A device call only enqueues: it returns while a long kernel ahead of it still holds the stream, and the
// all-reduce reads the inputs that kernel writes (stream order), not the stale ones present at call time.
TEST(GpuStream, CallReturnsBeforeTheWorkIsDone) {
  STRATA_REQUIRE_CUDA_DEVICE();
  constexpr unsigned long long kSpinNs = 300'000'000;  // the kernel ahead of the all-reduce: 300 ms
  constexpr double kMaxCallMs = 100;
  runDeviceThreadRanks(2, [&](DeviceRank& d, CheckReport& rep) {
    const size_t count = kMidCount;
    ArenaCursor cur{&d};
    float* in = take<float>(cur, count);
    float* out = take<float>(cur, count);
    // Warm-up: first-use setup may legitimately wait for the peer, so it is not timed.
    strataResult_t rc = strataAllReduceStream(in, out, count, strataFloat32, strataSum, d.comm, d.stream);
    expectCheck(d, rep, rc == strataSuccess && cudaStreamSynchronize(d.stream) == cudaSuccess, "warm-up all-reduce");
    std::vector<float> stale(count, 1000.0f);
    cudaMemcpyAsync(in, stale.data(), count * sizeof(float), cudaMemcpyHostToDevice, d.stream);
    cudaStreamSynchronize(d.stream);
    d.barrier();
    cudaError_t e = launchSpinThenFill(in, count, static_cast<float>(d.rank + 1), kSpinNs, d.stream);
    expectCheck(d, rep, e == cudaSuccess, "spin kernel launch: " + cudaWhat(e));
    auto t0 = std::chrono::steady_clock::now();
    rc = strataAllReduceStream(in, out, count, strataFloat32, strataSum, d.comm, d.stream);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const cudaError_t query = cudaStreamQuery(d.stream);
    expectCheck(d, rep, rc == strataSuccess, fmt::format("all-reduce returned {} ({})", static_cast<int>(rc),
                                                         strataGetLastError(d.comm)));
    expectCheck(d, rep, ms < kMaxCallMs,
                fmt::format("strataAllReduceStream took {:.1f} ms behind a {} ms kernel: it waited for the stream", ms,
                            kSpinNs / 1000000));
    expectCheck(d, rep, query == cudaErrorNotReady,
                "cudaStreamQuery right after the call: " + cudaWhat(query) + ", expected cudaErrorNotReady");
    auto got = download(out, count, d.stream, &e);
    const float want = static_cast<float>(d.n * (d.n + 1) / 2);  // sum of rank + 1, written by the kernels
    long bad = firstMismatch(got, [&](size_t) { return want; });
    expectCheck(d, rep, e == cudaSuccess && bad < 0,
                fmt::format("result after sync: {} element {} is {}, expected {} (1000 per rank means the stale "
                            "inputs were read)", cudaWhat(e), bad, bad >= 0 ? got[static_cast<size_t>(bad)] : 0, want));
  });
}

// Issues `checks` inside one group: nothing may reach the stream before strataGroupEnd, everything is exact after.
void runGroup(DeviceRank& d, CheckReport& rep, std::vector<std::unique_ptr<DeviceCheck>>& checks) {
  cudaStreamSynchronize(d.stream);  // the uploads are done: the stream is idle
  d.setLabel(fmt::format("group of {} collectives", checks.size()));
  strataGroupStart();
  for (auto& c : checks) {
    strataResult_t rc = c->issue(d.stream);
    expectCheck(d, rep, rc == strataSuccess, fmt::format("{} inside a group returned {}", c->label(), static_cast<int>(rc)));
  }
  const cudaError_t query = cudaStreamQuery(d.stream);
  expectCheck(d, rep, query == cudaSuccess,
              "work reached the stream before strataGroupEnd (cudaStreamQuery: " + cudaWhat(query) + ")");
  strataResult_t end = strataGroupEnd();
  expectCheck(d, rep, end == strataSuccess,
              fmt::format("strataGroupEnd returned {} ({})", static_cast<int>(end), strataGetLastError(d.comm)));
  for (auto& c : checks) c->releaseOp();
  expectCheck(d, rep, cudaStreamSynchronize(d.stream) == cudaSuccess, "stream synchronize after the group");
  for (auto& c : checks) c->verify(&rep);
}

// (b) Several collectives of one communicator in one group, launched by strataGroupEnd.
TEST(GpuStream, GroupLaunchesAtGroupEnd) {
  STRATA_REQUIRE_CUDA_DEVICE();
  runDeviceThreadRanks(4, [](DeviceRank& d, CheckReport& rep) {
    ArenaCursor cur{&d};
    std::vector<std::unique_ptr<DeviceCheck>> checks;
    auto add = [&](CollType c, strataDataType_t t, int op, size_t count, int root, bool inPlace) {
      checks.push_back(std::make_unique<DeviceCheck>(d, cur, c, t, op, count, root, inPlace));
    };
    add(CollType::AllReduce, strataFloat32, strataSum, 1000, 0, false);
    add(CollType::AllReduce, strataBfloat16, strataSum, kMidCount, 0, true);
    add(CollType::AllReduce, strataInt32, strataMax, 7, 0, false);
    add(CollType::AllReduce, strataFloat64, kPreMulSum, 33, 0, false);
    add(CollType::AllReduce, strataFloat16, strataAvg, 1000, 0, true);
    add(CollType::AllReduce, strataUint8, strataMin, 0, 0, false);
    add(CollType::AllReduce, strataFloat32, strataSum, kBigCount, 0, false);
    runGroup(d, rep, checks);
    checks.clear();
    cur.used = 0;
    add(CollType::AllGather, strataInt32, strataSum, 1000, 0, false);
    add(CollType::ReduceScatter, strataFloat32, strataSum, kMidCount, 0, false);
    add(CollType::Broadcast, strataFloat16, strataSum, 1000, 1, true);
    add(CollType::AllToAll, strataInt64, strataSum, 100, 0, false);
    add(CollType::Reduce, strataBfloat16, strataProd, 77, 2, false);
    add(CollType::Gather, strataUint8, strataSum, 999, 3, false);
    add(CollType::Scatter, strataFloat8e4m3, strataSum, 5, 0, true);
    runGroup(d, rep, checks);
  });
}

// (b') One thread drives every rank: a group over all communicators, one stream each (ncclCommInitAll style).
TEST(GpuStream, OneThreadDrivesEveryRankInOneGroup) {
  STRATA_REQUIRE_CUDA_DEVICE();
  constexpr int n = 4;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  std::vector<strataComm_t> comms(n);
  ASSERT_EQ(strataCommInitAll(comms.data(), n), strataSuccess) << strataGetLastError(nullptr);
  std::vector<std::unique_ptr<DeviceRank>> ranks;
  std::vector<ArenaCursor> cursors;
  std::vector<std::unique_ptr<DeviceCheck>> checks;
  for (int r = 0; r < n; ++r) {
    ranks.push_back(std::make_unique<DeviceRank>());
    std::string why;
    ASSERT_TRUE(openDeviceRank(ranks.back().get(), comms[r], sweepArenaBytes(n), &why)) << why;
  }
  Watchdog watchdog(300, [] { return std::string("  one thread driving 4 ranks\n"); });
  for (int round = 0; round < 2; ++round) {
    checks.clear();
    cursors.assign(n, ArenaCursor{nullptr});
    for (int r = 0; r < n; ++r) {
      cursors[r].d = ranks[r].get();
      checks.push_back(std::make_unique<DeviceCheck>(*ranks[r], cursors[r], CollType::AllReduce, strataFloat32,
                                                     round ? strataMax : strataSum, kMidCount, 0, round == 1));
      checks.push_back(std::make_unique<DeviceCheck>(*ranks[r], cursors[r], CollType::AllGather, strataInt32,
                                                     strataSum, 1000, 0, round == 0));
      cudaStreamSynchronize(ranks[r]->stream);
    }
    ASSERT_EQ(strataGroupStart(), strataSuccess);
    for (int r = 0; r < n; ++r)
      for (int k = 0; k < 2; ++k) EXPECT_EQ(checks[2 * r + k]->issue(ranks[r]->stream), strataSuccess);
    EXPECT_EQ(strataGroupEnd(), strataSuccess) << strataGetLastError(nullptr);
    for (int r = 0; r < n; ++r) EXPECT_EQ(cudaStreamSynchronize(ranks[r]->stream), cudaSuccess);
    CheckReport rep;
    for (auto& c : checks) c->verify(&rep);
    EXPECT_EQ(rep.passed, 2 * n);
    for (const auto& f : rep.failures) ADD_FAILURE() << f;
  }
  checks.clear();
  for (auto& d : ranks) closeDeviceRank(d.get());
  for (strataComm_t c : comms) strataCommDestroy(c);
}

// (c) One communicator's operations issued on two streams in turn, with no ordering between the streams, and a
// chain ordered across the streams by events.
TEST(GpuStream, TwoStreamsInSequence) {
  STRATA_REQUIRE_CUDA_DEVICE();
  runDeviceThreadRanks(4, [](DeviceRank& d, CheckReport& rep) {
    cudaStream_t s2 = nullptr;
    cudaEvent_t ev1 = nullptr, ev2 = nullptr;
    cudaError_t e = cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&ev1, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&ev2, cudaEventDisableTiming);
    expectCheck(d, rep, e == cudaSuccess, "second stream / events: " + cudaWhat(e));
    ArenaCursor cur{&d};
    DeviceCheck a(d, cur, CollType::AllReduce, strataFloat32, strataSum, kBigCount, 0, false);
    DeviceCheck b(d, cur, CollType::AllReduce, strataBfloat16, strataSum, kMidCount, 0, false);
    DeviceCheck c(d, cur, CollType::AllGather, strataInt32, strataSum, 1000, 0, false);
    DeviceCheck f(d, cur, CollType::ReduceScatter, strataFloat32, strataMax, kMidCount, 0, false);
    cudaStreamSynchronize(d.stream);  // the uploads ran on d.stream
    d.setLabel("two streams, unordered");
    a.issue(d.stream), b.issue(s2), c.issue(d.stream), f.issue(s2);
    for (DeviceCheck* x : {&a, &b, &c, &f}) x->verify(&rep);

    // x <- allreduce(x) on stream 1, then on stream 2 (after event 1), then on stream 1 (after event 2).
    const size_t count = kMidCount;
    int32_t* x = take<int32_t>(cur, count);
    std::vector<int32_t> in(count);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>((static_cast<size_t>(d.rank) + i) % 3);
    cudaMemcpyAsync(x, in.data(), count * sizeof(int32_t), cudaMemcpyHostToDevice, d.stream);
    d.setLabel("two streams, chained by events");
    strataResult_t r1 = strataAllReduceStream(x, x, count, strataInt32, strataSum, d.comm, d.stream);
    cudaEventRecord(ev1, d.stream);
    cudaStreamWaitEvent(s2, ev1, 0);
    strataResult_t r2 = strataAllReduceStream(x, x, count, strataInt32, strataSum, d.comm, s2);
    cudaEventRecord(ev2, s2);
    cudaStreamWaitEvent(d.stream, ev2, 0);
    strataResult_t r3 = strataAllReduceStream(x, x, count, strataInt32, strataSum, d.comm, d.stream);
    expectCheck(d, rep, r1 == strataSuccess && r2 == strataSuccess && r3 == strataSuccess, "chained all-reduces");
    auto got = download(x, count, d.stream, &e);
    auto want = [&](size_t i) {
      int32_t s = 0;
      for (int r = 0; r < d.n; ++r) s += static_cast<int32_t>((static_cast<size_t>(r) + i) % 3);
      return s * d.n * d.n;
    };
    long bad = firstMismatch(got, want);
    expectCheck(d, rep, e == cudaSuccess && bad < 0,
                fmt::format("chain across streams: {} element {} is {}, expected {}", cudaWhat(e), bad,
                            bad >= 0 ? got[static_cast<size_t>(bad)] : 0, bad >= 0 ? want(static_cast<size_t>(bad)) : 0));
    cudaStreamSynchronize(s2);
    if (ev1) cudaEventDestroy(ev1);
    if (ev2) cudaEventDestroy(ev2);
    if (s2) cudaStreamDestroy(s2);
  });
}

}  // namespace
}  // namespace strata::testing
