// ib_device_test.cc: the ibverbs transport on a real RDMA device (label rdma): two ranks as threads
// of one process connect through the HCA (loopback) with the production, dlopen'd libibverbs and
// move exact data through the slot path, the single-copy path and a reduction. Without a device
// (or without libibverbs) every test skips visibly with the transport's reason.
#include <gtest/gtest.h>

#include "ib_test_util.h"
#include "transport/ib/ib_transport.h"

namespace strata::ib {
namespace {

using testutil::drive;
using testutil::pattern;

TEST(IbDevice, LoopbackExactDataAndReduction) {
  std::unique_ptr<NetTransport> tr[2];
  Status st = createIbTransport(0, &tr[0]);
  if (!st.ok()) GTEST_SKIP() << "no usable RDMA device: " << st.message();
  ASSERT_TRUE(createIbTransport(1, &tr[1]).ok());
  int fds[2];
  testutil::oobPair(fds);
  std::unique_ptr<Connection> c[2];
  ASSERT_TRUE(tr[0]->connect(0, 1, fds[0], 1, &c[0]).ok());
  ASSERT_TRUE(tr[1]->connect(1, 0, fds[1], 1, &c[1]).ok());
  const std::vector<size_t> sizes = {1, 4097, 200000, 4 << 20, 64 << 20};
  testutil::twoRanks([&](int r) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      const size_t n = sizes[k];
      std::vector<uint8_t> src = pattern(r, k, n), dst(n, 0);
      Transfer s, v;
      s.kind = Transfer::Send;
      s.src = src.data();
      s.bytes = n;
      v.kind = Transfer::Recv;
      v.dst = dst.data();
      v.bytes = n;
      c[r]->postSend(&s);
      c[r]->postRecv(&v);
      Status ds = drive(c[r].get(), {&s, &v}, 60);
      ASSERT_TRUE(ds.ok()) << ds.message();
      ASSERT_TRUE(dst == pattern(1 - r, k, n)) << n << " bytes";
    }
    const size_t count = 3 << 20;
    std::vector<float> mine(count, static_cast<float>(r + 1)), out(count, 0);
    Transfer s, v;
    s.kind = Transfer::Send;
    s.src = mine.data();
    s.bytes = count * 4;
    v.kind = Transfer::RecvReduce;
    v.src = mine.data();
    v.dst = out.data();
    v.bytes = count * 4;
    v.dtype = strataFloat32;
    v.op = kernels::RedKind::Sum;
    c[r]->postSend(&s);
    c[r]->postRecv(&v);
    Status ds = drive(c[r].get(), {&s, &v}, 60);
    ASSERT_TRUE(ds.ok()) << ds.message();
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[i], 3.0f) << i;
  });
}

TEST(IbDevice, UnavailableTransportExplainsWhy) {
  std::unique_ptr<NetTransport> tr;
  Status st = createIbTransport(0, &tr);
  if (st.ok()) GTEST_SKIP() << "an RDMA device is present: nothing to explain";
  EXPECT_EQ(st.message().rfind("ibverbs: ", 0), 0u) << st.message();
  EXPECT_EQ(tr, nullptr);
}

}  // namespace
}  // namespace strata::ib
