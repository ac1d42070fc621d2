// device_deterministic_test.cc: deterministic mode on device buffers, run in the host emulation of
// the CUDA kernels (kernels/device/dev_algos.h on host threads; no GPU involved). For fp32, fp64,
// fp16 and bf16 sums of inputs whose result depends on the summation order, n = 2, 3, 4, 5, 8
// ranks and sizes spanning the LL and Simple protocols, one and several channels and many
// pipeline chunks, the device all-reduce, reduce-scatter and reduce (and avg, pre-multiplied sum)
// must equal, bit for bit, both the rank-order tree computed by the test and what the host path's
// deterministic mode returns for the same inputs on host buffers (thread ranks). Before that, the
// default device ring is shown to disagree with the tree on these inputs, so the comparison can fail.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/device/rank_tree.h"
#include "kernels/element_value.h"
#include "kernels/host_reduce.h"
#include "support/device_cluster.h"
#include "support/rank_order_inputs.h"
#include "support/thread_ranks.h"

namespace strata::testing {
namespace {

const strataDataType_t kFloatTypes[] = {strataFloat32, strataFloat64, strataFloat16, strataBfloat16};

/// One reduction of the matrix.
struct Op {
  CollType coll;
  strataDataType_t t;
  size_t count;      ///< elements per rank's output block (all-reduce, reduce: the whole buffer)
  int root = 0;
  bool avg = false;
  double scalar = 0;  ///< non-zero: pre-multiplied sum
  size_t inElems(int n) const { return coll == CollType::ReduceScatter ? count * n : count; }
  std::string describe(int n) const {
    return std::string(collName(coll)) + " " + kernels::dtypeName(t) + " count " + std::to_string(count) + " n " +
           std::to_string(n) + " root " + std::to_string(root) + (avg ? " avg" : "") +
           (scalar != 0 ? " premul" : "");
  }
};

Bytes scalarBits(const Op& op) {
  Bytes s(8, 0);
  if (op.scalar != 0) kernels::storeElement(op.t, s.data(), 0, op.scalar);
  return s;
}

/// The emulated clusters: 4 channels, 4 KiB Simple slots and 1 KiB LL slots (many pipeline
/// chunks), LL up to 16 KiB (two LL channels at the top).
constexpr int kChannels = 4;
constexpr uint64_t kSlotBytes = 4096, kLLSlotBytes = 1024, kLLMaxBytes = 16 << 10;

/// Sizes per type: 1 and 7 elements (partial packs), 16 KiB (LL, 2 channels), 40 KiB (Simple, 1
/// channel, 10 chunks), 300 KiB (Simple, 2 channels).
std::vector<size_t> countsFor(strataDataType_t t) {
  const size_t es = kernels::dtypeSize(t);
  return {1, 7, (16u << 10) / es, (40u << 10) / es, (300u << 10) / es};
}

std::vector<Op> matrix(int n) {
  std::vector<Op> ops;
  for (strataDataType_t t : kFloatTypes)
    for (size_t count : countsFor(t)) {
      ops.push_back(Op{CollType::AllReduce, t, count});
      // Reduce-scatter blocks are a quarter of the size (the whole input is n blocks).
      ops.push_back(Op{CollType::ReduceScatter, t, count > 64 ? count / 4 + 3 : count});
      ops.push_back(Op{CollType::Reduce, t, count, static_cast<int>(count % static_cast<size_t>(n))});
    }
  for (strataDataType_t t : {strataFloat32, strataBfloat16}) {
    ops.push_back(Op{CollType::AllReduce, t, 3001, 0, /*avg=*/true});
    ops.push_back(Op{CollType::AllReduce, t, 3001, 0, false, /*scalar=*/3});
    ops.push_back(Op{CollType::ReduceScatter, t, 2000, 0, true});
    ops.push_back(Op{CollType::Reduce, t, 9000, n - 1, false, 3});
  }
  return ops;
}

std::vector<Bytes> inputs(const Op& op, int n) {
  std::vector<Bytes> in;
  for (int r = 0; r < n; ++r) in.push_back(orderSensitiveInput(op.t, r, op.inElems(n)));
  return in;
}

/// What must come out where: rank r's output block starts at element outFirst(r) of the reduction.
size_t outFirst(const Op& op, int r) { return op.coll == CollType::ReduceScatter ? op.count * r : 0; }
bool hasOutput(const Op& op, int r) { return op.coll != CollType::Reduce || r == op.root; }

/// Runs `op` through the planner and the emulated kernels; every rank's output buffer.
std::vector<Bytes> runDevice(Cluster& c, const Op& op, const std::vector<Bytes>& in, std::vector<DevLaunch>* plan0) {
  const int n = c.n();
  const Bytes s = scalarBits(op);
  std::vector<Bytes> out(n, Bytes(op.count * kernels::dtypeSize(op.t) + 16, 0xcd));
  std::vector<std::vector<DevLaunch>> launches(n);
  for (int r = 0; r < n; ++r) {
    DevCall call;
    call.coll = op.coll;
    call.send = in[r].data();
    call.recv = out[r].data();
    call.count = op.count;
    call.dtype = op.t;
    call.root = op.root;
    call.avg = op.avg;
    call.premul = op.scalar != 0;
    std::memcpy(&call.scalarBits, s.data(), 8);
    EXPECT_TRUE(planDeviceCollective(c.params(r), call, &launches[r]).ok());
  }
  if (plan0) *plan0 = launches[0];
  EXPECT_TRUE(c.run(launches)) << op.describe(n);
  return out;
}

/// Runs every op of `ops` on the host path (host buffers, n thread ranks, deterministic mode).
std::vector<std::vector<Bytes>> runHostDeterministic(int n, const std::vector<Op>& ops) {
  ScopedEnv det("STRATA_DETERMINISTIC", "1");
  std::vector<std::vector<Bytes>> outs(ops.size(), std::vector<Bytes>(static_cast<size_t>(n)));
  runThreadRanks(n, [&](strataComm_t comm, int r) {
    for (size_t k = 0; k < ops.size(); ++k) {
      const Op& op = ops[k];
      const Bytes in = orderSensitiveInput(op.t, r, op.inElems(n));
      Bytes& out = outs[k][static_cast<size_t>(r)];
      out.assign(op.count * kernels::dtypeSize(op.t) + 16, 0xcd);
      strataRedOp_t rop = op.avg ? strataAvg : strataSum;
      const Bytes s = scalarBits(op);
      if (op.scalar != 0) {
        ASSERT_EQ(strataRedOpCreatePreMulSum(&rop, s.data(), op.t, comm), strataSuccess);
      }
      strataResult_t rc = strataSuccess;
      switch (op.coll) {
        case CollType::AllReduce: rc = strataAllReduce(in.data(), out.data(), op.count, op.t, rop, comm); break;
        case CollType::ReduceScatter: rc = strataReduceScatter(in.data(), out.data(), op.count, op.t, rop, comm); break;
        default: rc = strataReduce(in.data(), out.data(), op.count, op.t, rop, op.root, comm); break;
      }
      EXPECT_EQ(rc, strataSuccess) << op.describe(n) << ": " << strataGetLastError(comm);
      if (op.scalar != 0) strataRedOpDestroy(rop, comm);
    }
  });
  return outs;
}

class DeviceDeterministic : public ::testing::TestWithParam<int> {};

TEST_P(DeviceDeterministic, DefaultRingDisagreesWithTheRankOrderTree) {
  // Without deterministic mode the device ring sums in ring order: on these inputs some elements
  // differ from the tree for every type (n = 2 cannot differ: a + b == b + a).
  const int n = GetParam();
  if (n < 3) GTEST_SKIP() << "two ranks: every order is the same sum";
  Cluster c(n, kChannels, kSlotBytes, kLLSlotBytes);
  c.llMaxBytes = kLLMaxBytes;
  c.algo = "ring";
  for (strataDataType_t t : kFloatTypes) {
    const Op op{CollType::AllReduce, t, 4096};
    const std::vector<Bytes> in = inputs(op, n);
    const std::vector<Bytes> out = runDevice(c, op, in, nullptr);
    const Bytes want = rankOrderTreeSum(t, in, 0, op.count);
    EXPECT_GT(bitMismatches(t, out[0].data(), want.data(), op.count), 0u)
        << op.describe(n) << ": the inputs do not expose the summation order";
  }
}

TEST_P(DeviceDeterministic, EqualsTheRankOrderTreeAndTheHostPathBitwise) {
  const int n = GetParam();
  const std::vector<Op> ops = matrix(n);
  const std::vector<std::vector<Bytes>> host = runHostDeterministic(n, ops);
  Cluster c(n, kChannels, kSlotBytes, kLLSlotBytes);
  c.llMaxBytes = kLLMaxBytes;
  c.deterministic = true;
  c.algo = "ring";  // ignored for reductions in deterministic mode
  bool llMulti = false, simpleMulti = false, simpleChunks = false;
  for (size_t k = 0; k < ops.size(); ++k) {
    const Op& op = ops[k];
    SCOPED_TRACE(op.describe(n));
    const std::vector<Bytes> in = inputs(op, n);
    std::vector<DevLaunch> plan;
    const std::vector<Bytes> out = runDevice(c, op, in, &plan);
    ASSERT_EQ(plan.size(), 1u);
    EXPECT_EQ(plan[0].work.algo, dev::Algo::RankTree);
    const bool ll = plan[0].work.proto == dev::Proto::LL;
    llMulti = llMulti || (ll && plan[0].blocks > 1);
    simpleMulti = simpleMulti || (!ll && plan[0].blocks > 1);
    simpleChunks = simpleChunks || (!ll && op.count * kernels::dtypeSize(op.t) / plan[0].blocks > 4 * kSlotBytes);
    const Bytes s = scalarBits(op);
    for (int r = 0; r < n; ++r) {
      if (!hasOutput(op, r)) continue;
      const Bytes want = rankOrderTreeSum(op.t, in, outFirst(op, r), op.count, op.avg, op.scalar != 0 ? s.data() : nullptr);
      EXPECT_EQ(bitMismatches(op.t, out[r].data(), want.data(), op.count), 0u) << "device vs the tree, rank " << r;
      EXPECT_EQ(bitMismatches(op.t, out[r].data(), host[k][r].data(), op.count), 0u) << "device vs host, rank " << r;
    }
  }
  EXPECT_TRUE(llMulti) << "no LL case ran on several channels";
  EXPECT_TRUE(simpleMulti) << "no Simple case ran on several channels";
  EXPECT_TRUE(simpleChunks) << "no Simple case ran through many pipeline chunks";
}

TEST_P(DeviceDeterministic, InPlaceAndRepeatedOperationsOnTheSameConnections) {
  // In place (the input is overwritten by the result) and back-to-back operations that switch
  // protocol and algorithm on persistent step counters.
  const int n = GetParam();
  Cluster c(n, kChannels, kSlotBytes, kLLSlotBytes);
  c.llMaxBytes = kLLMaxBytes;
  for (int round = 0; round < 2; ++round)
    for (size_t count : {size_t(5000), size_t(90000), size_t(33)}) {
      c.deterministic = true;
      const Op op{CollType::AllReduce, strataFloat32, count};
      std::vector<Bytes> in = inputs(op, n), buf = in;
      std::vector<std::vector<DevLaunch>> launches(n);
      for (int r = 0; r < n; ++r) {
        DevCall call;
        call.send = call.recv = buf[r].data();
        call.count = count;
        ASSERT_TRUE(planDeviceCollective(c.params(r), call, &launches[r]).ok());
      }
      ASSERT_TRUE(c.run(launches));
      const Bytes want = rankOrderTreeSum(op.t, in, 0, count);
      for (int r = 0; r < n; ++r)
        EXPECT_EQ(bitMismatches(op.t, buf[r].data(), want.data(), count), 0u) << op.describe(n) << " in place, rank " << r;
      c.deterministic = false;  // a default-mode operation in between
      const std::vector<Bytes> plain = runDevice(c, op, in, nullptr);
      (void)plain;
    }
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceDeterministic, ::testing::Values(2, 3, 4, 5, 8),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

TEST(RankTree, FoldIsTheLevelByLevelTreeForEveryRankCount) {
  // rank_tree.h (shared by the host schedules and the kernels) against the definition written
  // out level by level, as strings: "(0+1)" etc., for 1..100 ranks.
  for (int n = 1; n <= 100; ++n) {
    std::vector<std::string> v;
    for (int k = 0; k < n; ++k) v.push_back(std::to_string(k));
    for (int st = 1; st < n; st *= 2)
      for (int k = 0; k + st < n; k += 2 * st) v[k] = "(" + v[k] + "+" + v[k + st] + ")";
    int leaves = 0;
    const std::string fold = dev::rankTreeFold<std::string>(
        n,
        [&](int k) {
          EXPECT_EQ(k, leaves++) << "leaves in rank order";
          return std::to_string(k);
        },
        [](const std::string& a, const std::string& b) { return "(" + a + "+" + b + ")"; });
    EXPECT_EQ(fold, v[0]) << "n " << n;
  }
}

TEST(DeviceDeterministicPlan, RankTreeForReductionsOnly) {
  DevPlanParams p;
  p.nranks = 4;
  p.deterministic = true;
  p.algo = "tree";
  std::vector<char> buf(1 << 20);
  for (CollType coll : {CollType::AllReduce, CollType::ReduceScatter, CollType::Reduce, CollType::AllGather,
                        CollType::Broadcast}) {
    for (size_t count : {size_t(16), size_t(1) << 17}) {
      std::vector<DevLaunch> l;
      DevCall call;
      call.coll = coll;
      call.send = call.recv = buf.data();
      call.count = count;
      ASSERT_TRUE(planDeviceCollective(p, call, &l).ok());
      ASSERT_EQ(l.size(), 1u);
      EXPECT_EQ(l[0].work.algo == dev::Algo::RankTree, isReduction(coll)) << collName(coll) << " count " << count;
    }
  }
  // Proxied peers: Simple, and channel 0 only (the proxy shadows every peer there, not elsewhere).
  p.simpleOnly = true;
  std::vector<DevLaunch> l;
  DevCall big;
  big.send = big.recv = buf.data();
  big.count = size_t(1) << 18;
  ASSERT_TRUE(planDeviceCollective(p, big, &l).ok());
  EXPECT_EQ(l[0].work.proto, dev::Proto::Simple);
  EXPECT_EQ(l[0].blocks, 1);
  EXPECT_EQ(l[0].work.nch, 1);
}

TEST(DeviceDeterministicFault, AbortFlagStopsTheTreeStep) {
  // Rank 1 never runs: rank 0 waits in its tree step (both protocols) until the abort flag rises.
  for (const char* proto : {"ll", "simple"}) {
    Cluster c(2, 1, 1024, 256);
    c.deterministic = true;
    c.proto = proto;
    const Bytes in = orderSensitiveInput(strataFloat32, 0, 4096);
    Bytes out(4096 * 4 + 16);
    DevCall call;
    call.send = in.data();
    call.recv = out.data();
    call.count = 4096;
    std::vector<std::vector<DevLaunch>> perRank(2);
    ASSERT_TRUE(planDeviceCollective(c.params(0), call, &perRank[0]).ok());
    std::thread raiser([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      __atomic_store_n(&c.abort_, 1u, __ATOMIC_RELEASE);  // blocks poll it (dev::loadVolatile32)
    });
    EXPECT_FALSE(c.run(perRank)) << proto;
    raiser.join();
  }
}

}  // namespace
}  // namespace strata::testing
