// gpu_deterministic_test.cc: deterministic mode on device buffers on a real GPU (label gpu; skipped
// without one). n thread ranks share the GPU under STRATA_DETERMINISTIC=1; for fp32, fp64, fp16
// and bf16 sums of order-sensitive inputs (tests/support/rank_order_inputs.h), sizes from one
// element through the LL protocol to several Simple channels, every device all-reduce,
// reduce-scatter and reduce must equal, bit for bit, the same call on host buffers (the host
// path's deterministic algorithms) and the rank-order tree computed by the test.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu/device_ranks.h"
#include "kernels/host_reduce.h"
#include "support/rank_order_inputs.h"
#include "support/thread_ranks.h"

namespace strata::testing {
namespace {

/// One reduction on device buffers and on host buffers; true when both match the tree bit for bit.
bool checkOne(DeviceRank& d, CollType coll, strataDataType_t t, size_t count, std::string* why) {
  const int n = d.n, r = d.rank, root = n - 1;
  const size_t es = kernels::dtypeSize(t), inElems = coll == CollType::ReduceScatter ? count * n : count;
  std::vector<Bytes> all;
  for (int q = 0; q < n; ++q) all.push_back(orderSensitiveInput(t, q, inElems));
  const Bytes& in = all[static_cast<size_t>(r)];
  const bool hasOut = coll != CollType::Reduce || r == root;
  const size_t first = coll == CollType::ReduceScatter ? count * r : 0;
  ArenaCursor cursor{&d};
  unsigned char* din = cursor.take(inElems * es);
  unsigned char* dout = cursor.take(count * es);
  if (!din || !dout) return *why = "device arena exhausted", false;
  if (cudaMemcpy(din, in.data(), inElems * es, cudaMemcpyHostToDevice) != cudaSuccess) return *why = "upload", false;
  Bytes hostOut(count * es + 16), devOut(count * es + 16);
  strataResult_t rcDev, rcHost;
  switch (coll) {
    case CollType::AllReduce:
      rcDev = strataAllReduceStream(din, dout, count, t, strataSum, d.comm, d.stream);
      rcHost = strataAllReduce(in.data(), hostOut.data(), count, t, strataSum, d.comm);
      break;
    case CollType::ReduceScatter:
      rcDev = strataReduceScatterStream(din, dout, count, t, strataSum, d.comm, d.stream);
      rcHost = strataReduceScatter(in.data(), hostOut.data(), count, t, strataSum, d.comm);
      break;
    default:
      rcDev = strataReduceStream(din, dout, count, t, strataSum, root, d.comm, d.stream);
      rcHost = strataReduce(in.data(), hostOut.data(), count, t, strataSum, root, d.comm);
      break;
  }
  if (rcDev != strataSuccess || rcHost != strataSuccess)
    return *why = std::string("call failed: ") + strataGetLastError(d.comm), false;
  if (cudaStreamSynchronize(d.stream) != cudaSuccess ||
      cudaMemcpy(devOut.data(), dout, count * es, cudaMemcpyDeviceToHost) != cudaSuccess)
    return *why = "stream or download failed", false;
  if (!hasOut) return true;
  const Bytes want = rankOrderTreeSum(t, all, first, count);
  const size_t badDev = bitMismatches(t, devOut.data(), want.data(), count);
  const size_t badHost = bitMismatches(t, hostOut.data(), devOut.data(), count);
  if (badDev || badHost)
    *why = std::to_string(badDev) + " elements differ from the tree, " + std::to_string(badHost) + " from the host path";
  return badDev == 0 && badHost == 0;
}

class GpuDeterministic : public ::testing::TestWithParam<int> {};

TEST_P(GpuDeterministic, DeviceBuffersEqualHostBuffersAndTheRankOrderTree) {
  STRATA_REQUIRE_CUDA_DEVICE();
  ScopedEnv det("STRATA_DETERMINISTIC", "1");
  runDeviceThreadRanks(GetParam(), [](DeviceRank& d, CheckReport& rep) {
    for (strataDataType_t t : {strataFloat32, strataFloat64, strataFloat16, strataBfloat16})
      for (size_t bytes : {size_t(0), size_t(40), size_t(12) << 10, size_t(200) << 10, size_t(3) << 20})
        for (CollType coll : {CollType::AllReduce, CollType::ReduceScatter, CollType::Reduce}) {
          const size_t count = bytes ? bytes / kernels::dtypeSize(t) + 1 : 1;
          const std::string label = std::string("deterministic ") + collName(coll) + " " + kernels::dtypeName(t) +
                                    " count " + std::to_string(count);
          d.setLabel(label);
          std::string why;
          const bool ok = checkOne(d, coll, t, count, &why);
          expectCheck(d, rep, ok, label + ": " + why);
        }
  });
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuDeterministic, ::testing::Values(2, 3, 4, 8),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

}  // namespace
}  // namespace strata::testing
