// device_emulation_test.cc: the CUDA kernels' algorithms, protocols and planner, run on the host.
// Every rank's blocks run the same code the kernels run (kernels/device/dev_algos.h) on host
// threads over host-memory FIFO arenas wired exactly as CUDA IPC wires device arenas; results are
// checked exactly against the host kernels' reductions. Small slots force long pipelines,
// credit waits and slot reuse; consecutive operations on one cluster exercise the persistent step
// counters and the switch between the LL and Simple protocols on the same connections.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/element_value.h"
#include "kernels/host_reduce.h"
#include "support/device_cluster.h"

namespace strata {
namespace {

using kernels::RedKind;
using testing::Cluster;

bool isFp8(strataDataType_t t) { return t == strataFloat8e4m3 || t == strataFloat8e5m2; }
bool isUnsigned(strataDataType_t t) { return t == strataUint8 || t == strataUint32 || t == strataUint64; }

/// Inputs whose reduction over up to 8 ranks is exact in every order, for every type.
double inputValue(strataDataType_t t, RedKind op, int rank, size_t i) {
  if (op == RedKind::Prod) return 1 + double((rank + i) % 2);
  if (op == RedKind::Max || op == RedKind::Min) return double((rank * 31 + i * 17) % 7) - (isUnsigned(t) ? 0 : 3);
  if (isFp8(t)) return double((rank * 7 + i * 13) % 2);
  return double((rank * 7 + i * 13) % 5) - (isUnsigned(t) ? 0 : 2);
}

using Buf = std::vector<unsigned char>;

Buf makeInput(strataDataType_t t, RedKind op, int rank, size_t count, size_t salt = 0) {
  Buf b(count * kernels::dtypeSize(t) + 16);
  for (size_t i = 0; i < count; ++i) kernels::storeElement(t, b.data(), i, inputValue(t, op, rank, i + salt));
  return b;
}

/// The reduction over ranks of `inputs` (exact for makeInput values), scaled / divided as asked.
Buf reference(strataDataType_t t, RedKind op, const std::vector<Buf>& inputs, size_t count, bool avg,
              const unsigned char* scalar) {
  const size_t es = kernels::dtypeSize(t);
  Buf acc(count * es + 16), tmp(count * es + 16);
  for (size_t r = 0; r < inputs.size(); ++r) {
    const unsigned char* src = inputs[r].data();
    if (scalar) {
      kernels::scale(tmp.data(), src, count, t, scalar);
      src = tmp.data();
    }
    if (r == 0) std::memcpy(acc.data(), src, count * es);
    else kernels::reduce(acc.data(), acc.data(), src, count, t, op);
  }
  if (avg) kernels::divide(acc.data(), count, t, static_cast<int>(inputs.size()));
  return acc;
}

std::string describe(strataDataType_t t, RedKind op, size_t count, int n, const Cluster& c) {
  return std::string(kernels::dtypeName(t)) + " op " + std::to_string(int(op)) + " count " + std::to_string(count) +
         " n " + std::to_string(n) + " algo " + c.algo + " proto " + c.proto;
}

/// All-reduce through the planner and the emulated kernels; checks every rank's output.
void checkAllReduce(Cluster& c, strataDataType_t t, RedKind op, size_t count, bool inPlace, bool avg = false,
                    double scalar = 0) {
  const int n = c.n();
  const size_t es = kernels::dtypeSize(t);
  std::vector<Buf> in(n), out(n);
  alignas(8) unsigned char sbits[8] = {};
  if (scalar != 0) kernels::storeElement(t, sbits, 0, scalar);
  std::vector<std::vector<DevLaunch>> launches(n);
  for (int r = 0; r < n; ++r) {
    in[r] = makeInput(t, op, r, count);
    out[r] = inPlace ? in[r] : Buf(count * es + 16, 0xab);
    DevCall call;
    call.coll = CollType::AllReduce;
    call.recv = out[r].data();
    call.send = inPlace ? out[r].data() : in[r].data();
    call.count = count;
    call.dtype = t;
    call.op = op;
    call.avg = avg;
    call.premul = scalar != 0;
    std::memcpy(&call.scalarBits, sbits, 8);
    ASSERT_TRUE(planDeviceCollective(c.params(r), call, &launches[r]).ok());
  }
  ASSERT_TRUE(c.run(launches));
  const Buf want = reference(t, op, in, count, avg, scalar != 0 ? sbits : nullptr);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(0, std::memcmp(want.data(), out[r].data(), count * es))
        << "rank " << r << " " << describe(t, op, count, n, c) << (inPlace ? " in place" : "");
}

const strataDataType_t kAllTypes[] = {strataInt8,    strataUint8,   strataInt32,     strataUint32,
                                      strataInt64,   strataUint64,  strataFloat16,   strataFloat32,
                                      strataFloat64, strataBfloat16, strataFloat8e4m3, strataFloat8e5m2};

class DeviceEmulation : public ::testing::TestWithParam<int> {};

TEST_P(DeviceEmulation, AllReduceEveryTypeAlgoAndProtocol) {
  const int n = GetParam();
  Cluster c(n, 3, 1024, 256);
  for (const char* algo : {"ring", "tree"})
    for (const char* proto : {"ll", "simple"}) {
      c.algo = algo;
      c.proto = proto;
      for (strataDataType_t t : kAllTypes)
        for (size_t count : {size_t(1), size_t(7), size_t(1000)}) checkAllReduce(c, t, RedKind::Sum, count, count == 7);
    }
}

TEST_P(DeviceEmulation, AllReduceEveryOpAvgAndPreMulSum) {
  const int n = GetParam();
  Cluster c(n, 2, 512, 256);
  for (const char* algo : {"ring", "tree"})
    for (const char* proto : {"ll", "simple"}) {
      c.algo = algo;
      c.proto = proto;
      for (strataDataType_t t : {strataFloat32, strataBfloat16, strataInt32, strataFloat8e4m3, strataUint8}) {
        for (RedKind op : {RedKind::Prod, RedKind::Max, RedKind::Min}) checkAllReduce(c, t, op, 301, false);
        checkAllReduce(c, t, RedKind::Sum, 301, true, /*avg=*/true);
        checkAllReduce(c, t, RedKind::Sum, 301, false, false, /*scalar=*/2);
      }
    }
}

TEST_P(DeviceEmulation, AllReduceAutoTuningAcrossSizesReusesConnections) {
  // Auto choices switch between tree/ring and LL/Simple on the same connections, op after op.
  const int n = GetParam();
  Cluster c(n, 4, 2048, 512);
  for (size_t count : {size_t(3), size_t(200), size_t(700), size_t(4000), size_t(20000), size_t(5), size_t(9000)})
    checkAllReduce(c, strataFloat32, RedKind::Sum, count, count % 2 == 1);
}

/// Runs `coll` with per-rank inputs of `inCount` and outputs of `outCount` elements and returns outputs.
std::vector<Buf> runColl(Cluster& c, CollType coll, strataDataType_t t, RedKind op, size_t count, int root,
                         const std::vector<Buf>& in, size_t outElems, bool avg = false) {
  const int n = c.n();
  const size_t es = kernels::dtypeSize(t);
  std::vector<Buf> out(n, Buf(outElems * es + 16, 0xcd));
  std::vector<std::vector<DevLaunch>> launches(n);
  for (int r = 0; r < n; ++r) {
    DevCall call;
    call.coll = coll;
    call.send = in[r].data();
    call.recv = out[r].data();
    call.count = count;
    call.dtype = t;
    call.op = op;
    call.root = root;
    call.avg = avg;
    EXPECT_TRUE(planDeviceCollective(c.params(r), call, &launches[r]).ok());
  }
  EXPECT_TRUE(c.run(launches));
  return out;
}

TEST_P(DeviceEmulation, ReduceScatterAllGatherBroadcastReduce) {
  const int n = GetParam();
  Cluster c(n, 3, 1024, 256);
  for (const char* proto : {"ll", "simple"}) {
    c.proto = proto;
    for (strataDataType_t t : {strataFloat32, strataFloat16, strataInt64, strataFloat8e5m2})
      for (size_t count : {size_t(1), size_t(13), size_t(777)}) {
        const size_t es = kernels::dtypeSize(t);
        // reduce-scatter: block r of the reduction
        std::vector<Buf> in(n);
        for (int r = 0; r < n; ++r) in[r] = makeInput(t, RedKind::Sum, r, count * n);
        auto out = runColl(c, CollType::ReduceScatter, t, RedKind::Sum, count, 0, in, count, /*avg=*/false);
        const Buf all = reference(t, RedKind::Sum, in, count * n, false, nullptr);
        for (int r = 0; r < n; ++r)
          ASSERT_EQ(0, std::memcmp(all.data() + r * count * es, out[r].data(), count * es))
              << "reduce-scatter rank " << r << " " << describe(t, RedKind::Sum, count, n, c);
        // all-gather
        for (int r = 0; r < n; ++r) in[r] = makeInput(t, RedKind::Sum, r, count, 1000 * r);
        out = runColl(c, CollType::AllGather, t, RedKind::Sum, count, 0, in, count * n);
        for (int r = 0; r < n; ++r)
          for (int q = 0; q < n; ++q)
            ASSERT_EQ(0, std::memcmp(in[q].data(), out[r].data() + q * count * es, count * es))
                << "all-gather rank " << r << " block " << q << " " << describe(t, RedKind::Sum, count, n, c);
        // broadcast and reduce from every root
        for (int root = 0; root < n; ++root) {
          out = runColl(c, CollType::Broadcast, t, RedKind::Sum, count, root, in, count);
          for (int r = 0; r < n; ++r)
            ASSERT_EQ(0, std::memcmp(in[root].data(), out[r].data(), count * es))
                << "broadcast root " << root << " rank " << r << " " << describe(t, RedKind::Sum, count, n, c);
          for (int r = 0; r < n; ++r) in[r] = makeInput(t, RedKind::Max, r, count);
          out = runColl(c, CollType::Reduce, t, RedKind::Max, count, root, in, count);
          const Buf want = reference(t, RedKind::Max, in, count, false, nullptr);
          ASSERT_EQ(0, std::memcmp(want.data(), out[root].data(), count * es))
              << "reduce root " << root << " " << describe(t, RedKind::Max, count, n, c);
        }
      }
  }
}

TEST_P(DeviceEmulation, AllToAllGatherScatter) {
  const int n = GetParam();
  Cluster c(n, 2, 1024, 256);
  for (const char* proto : {"ll", "simple"}) {
    c.proto = proto;
    for (size_t count : {size_t(1), size_t(33), size_t(2000)}) {
      const strataDataType_t t = strataInt32;
      const size_t es = 4;
      std::vector<Buf> in(n);
      for (int r = 0; r < n; ++r) {
        in[r] = Buf(count * n * es + 16);
        for (size_t i = 0; i < count * n; ++i) kernels::storeElement(t, in[r].data(), i, double(r * 100000 + i));
      }
      auto out = runColl(c, CollType::AllToAll, t, RedKind::Sum, count, 0, in, count * n);
      for (int r = 0; r < n; ++r)
        for (int q = 0; q < n; ++q)
          ASSERT_EQ(0, std::memcmp(in[q].data() + r * count * es, out[r].data() + q * count * es, count * es))
              << "all-to-all rank " << r << " from " << q << " count " << count << " proto " << proto;
      const int root = n - 1;
      out = runColl(c, CollType::Gather, t, RedKind::Sum, count, root, in, count * n);
      for (int q = 0; q < n; ++q)
        ASSERT_EQ(0, std::memcmp(in[q].data(), out[root].data() + q * count * es, count * es))
            << "gather block " << q << " count " << count << " proto " << proto;
      out = runColl(c, CollType::Scatter, t, RedKind::Sum, count, root, in, count);
      for (int r = 0; r < n; ++r)
        ASSERT_EQ(0, std::memcmp(in[root].data() + r * count * es, out[r].data(), count * es))
            << "scatter rank " << r << " count " << count << " proto " << proto;
    }
  }
}

TEST_P(DeviceEmulation, GroupedSendRecvKeepsOrderPerPeer) {
  // Each rank sends two messages to its right neighbour and one to itself, receives two from its
  // left: the second message per pair goes in a second launch, after the first.
  const int n = GetParam();
  Cluster c(n, 1, 1024, 256);
  for (const char* proto : {"ll", "simple"}) {
    c.proto = proto;
    const size_t bytes1 = 3001, bytes2 = 17;
    std::vector<Buf> a(n), b(n), ra(n, Buf(bytes1)), rb(n, Buf(bytes2)), self(n), selfOut(n, Buf(64));
    std::vector<std::vector<DevLaunch>> launches(n);
    for (int r = 0; r < n; ++r) {
      a[r] = Buf(bytes1);
      b[r] = Buf(bytes2);
      self[r] = Buf(64);
      for (size_t i = 0; i < bytes1; ++i) a[r][i] = static_cast<unsigned char>(r * 13 + i);
      for (size_t i = 0; i < bytes2; ++i) b[r][i] = static_cast<unsigned char>(200 + r + i);
      for (size_t i = 0; i < 64; ++i) self[r][i] = static_cast<unsigned char>(r + 3 * i);
      const int right = (r + 1) % n, left = (r + n - 1) % n;
      std::vector<DevP2P> ops = {{true, a[r].data(), bytes1, right},  {false, ra[r].data(), bytes1, left},
                                 {true, b[r].data(), bytes2, right},  {false, rb[r].data(), bytes2, left},
                                 {true, self[r].data(), 64, r},       {false, selfOut[r].data(), 64, r}};
      ASSERT_TRUE(planDeviceP2P(c.params(r), ops, &launches[r]).ok());
    }
    ASSERT_TRUE(c.run(launches));
    for (int r = 0; r < n; ++r) {
      const int left = (r + n - 1) % n;
      EXPECT_EQ(a[left], ra[r]) << "rank " << r << " proto " << proto;
      EXPECT_EQ(b[left], rb[r]) << "rank " << r << " proto " << proto;
      EXPECT_EQ(self[r], selfOut[r]) << "rank " << r;
    }
  }
}

TEST_P(DeviceEmulation, SendRecvSizesDifferPerConnection) {
  // Odd ranks send large messages (Simple), even ranks small ones (LL): each rank's launch holds
  // one of each, and both ends of every connection must still pick the same protocol.
  const int n = GetParam();
  if (n < 2) return;
  Cluster c(n, 1, 1024, 256);
  auto size = [](int r) { return r % 2 ? size_t(5000) : size_t(50); };
  std::vector<Buf> out(n), in(n);
  std::vector<std::vector<DevLaunch>> launches(n);
  for (int r = 0; r < n; ++r) {
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    out[r] = Buf(size(r));
    for (size_t i = 0; i < out[r].size(); ++i) out[r][i] = static_cast<unsigned char>(r * 7 + i * 3);
    in[r] = Buf(size(left));
    std::vector<DevP2P> ops = {{true, out[r].data(), size(r), right}, {false, in[r].data(), size(left), left}};
    ASSERT_TRUE(planDeviceP2P(c.params(r), ops, &launches[r]).ok());
  }
  ASSERT_TRUE(c.run(launches));
  for (int r = 0; r < n; ++r) EXPECT_EQ(out[(r + n - 1) % n], in[r]) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceEmulation, ::testing::Values(1, 2, 3, 4, 5, 8),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

TEST(DeviceEmulationFault, AbortFlagStopsWaitingBlocks) {
  // Rank 1 never runs: rank 0's all-reduce waits on it until the host raises the abort flag.
  Cluster c(2, 1, 1024, 256);
  std::vector<Buf> in = {makeInput(strataFloat32, RedKind::Sum, 0, 4096)};
  Buf out(4096 * 4);
  std::vector<DevLaunch> launches;
  DevCall call;
  call.send = in[0].data();
  call.recv = out.data();
  call.count = 4096;
  ASSERT_TRUE(planDeviceCollective(c.params(0), call, &launches).ok());
  std::vector<std::vector<DevLaunch>> perRank = {launches, {}};
  std::thread raiser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    __atomic_store_n(&c.abort_, 1u, __ATOMIC_RELEASE);  // blocks poll it (dev::loadVolatile32)
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(c.run(perRank));
  raiser.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(DevicePlan, ChoosesProtocolAlgorithmAndChannels) {
  DevPlanParams p;
  p.rank = 0;
  p.nranks = 4;
  std::vector<DevLaunch> l;
  DevCall small;
  small.count = 16;
  ASSERT_TRUE(planDeviceCollective(p, small, &l).ok());
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].work.proto, dev::Proto::LL);
  EXPECT_EQ(l[0].work.algo, dev::Algo::Tree);
  EXPECT_EQ(l[0].blocks, 1);
  DevCall big;
  big.count = 64 << 20;
  l.clear();
  ASSERT_TRUE(planDeviceCollective(p, big, &l).ok());
  EXPECT_EQ(l[0].work.proto, dev::Proto::Simple);
  EXPECT_EQ(l[0].work.algo, dev::Algo::Ring);
  EXPECT_EQ(l[0].blocks, 8);
  DevCall none;
  none.count = 0;
  l.clear();
  ASSERT_TRUE(planDeviceCollective(p, none, &l).ok());
  EXPECT_TRUE(l.empty());
  DevCall a2a;
  a2a.coll = CollType::AllToAll;
  a2a.count = 10;
  std::vector<char> buf(1000);
  a2a.send = a2a.recv = buf.data();
  l.clear();
  EXPECT_EQ(planDeviceCollective(p, a2a, &l).code(), strataInvalidArgument);
  // Unpaired self send.
  std::vector<DevP2P> ops = {{true, buf.data(), 10, 0}};
  EXPECT_EQ(planDeviceP2P(p, ops, &l).code(), strataInvalidUsage);
}

}  // namespace
}  // namespace strata
