// ib_transport_test.cc: the ibverbs transport end to end over the test-only RC provider
// (fake_verbs.h): two ranks as threads, oob sockets from socketpair. Exact data from 1 byte to
// 64 MiB through the slot path and the single-copy path, queued transfers in FIFO order both ways,
// reductions, size mismatches, credit exhaustion, dead peers and propagated failures.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <numeric>

#include "fake_verbs.h"
#include "ib_test_util.h"
#include "transport/ib/ib_connection.h"
#include "transport/ib/ib_transport.h"

namespace strata::ib {
namespace {

using testutil::drive;
using testutil::pattern;
using testutil::twoRanks;

Options smallOptions() {
  Options o;
  o.qpsPerRail = 2;
  o.slots = 8;
  o.slotBytes = 16 << 10;
  o.singleCopyMinBytes = 256 << 10;
  o.readChunkBytes = 1 << 20;
  o.regCacheEntries = 16;
  return o;
}

// Two ranks, their transports and connections over one fake fabric.
struct Pair {
  explicit Pair(std::vector<fake::DeviceSpec> devs, Options opt = smallOptions(), int rails = 1)
      : fabric(std::move(devs)) {
    for (int r = 0; r < 2; ++r) {
      Status st = createTransport(fabric.verbs(), opt, r, &tr[r]);
      EXPECT_TRUE(st.ok()) << st.message();
    }
    int fds[2];
    testutil::oobPair(fds);
    EXPECT_TRUE(tr[0] && tr[1] && fds[0] >= 0);
    EXPECT_TRUE(tr[0]->connect(0, 1, fds[0], rails, &conn[0]).ok());
    EXPECT_TRUE(tr[1]->connect(1, 0, fds[1], rails, &conn[1]).ok());
  }
  ~Pair() {
    conn[0].reset();
    conn[1].reset();
    tr[0].reset();
    tr[1].reset();
    EXPECT_EQ(fabric.liveQps(), 0);
    EXPECT_EQ(fabric.liveMrs(), 0);
    EXPECT_EQ(fabric.cqOverflows(), 0u);
    EXPECT_EQ(fabric.firstMisuse(), "");
  }
  fake::Fabric fabric;
  std::unique_ptr<NetTransport> tr[2];
  std::unique_ptr<Connection> conn[2];
};

std::vector<fake::DeviceSpec> oneIb() { return {fake::ibDevice("fake_ib0", 1)}; }

Transfer sendOf(const std::vector<uint8_t>& b) {
  Transfer t;
  t.kind = Transfer::Send;
  t.src = b.data();
  t.bytes = b.size();
  return t;
}

Transfer recvInto(std::vector<uint8_t>& b) {
  Transfer t;
  t.kind = Transfer::Recv;
  t.dst = b.data();
  t.bytes = b.size();
  return t;
}

// Every size both ways at once, each message checked byte for byte.
void exchangeSizes(Pair& p, const std::vector<size_t>& sizes) {
  twoRanks([&](int r) {
    Connection* c = p.conn[r].get();
    for (size_t k = 0; k < sizes.size(); ++k) {
      const size_t n = sizes[k];
      std::vector<uint8_t> src = pattern(r, k, n), dst(n, 0xee);
      Transfer s = sendOf(src), v = recvInto(dst);
      c->postSend(&s);
      c->postRecv(&v);
      Status st = drive(c, {&s, &v});
      ASSERT_TRUE(st.ok()) << "rank " << r << " size " << n << ": " << st.message();
      ASSERT_EQ(v.posted, n);
      ASSERT_TRUE(dst == pattern(1 - r, k, n)) << "rank " << r << ": wrong data for " << n << " bytes";
    }
  });
}

// Progresses both connections for `sec` so that credit returns and completions settle.
void settle(Pair& p, double sec) {
  const double until = net::nowSec() + sec;
  while (net::nowSec() < until)
    for (auto& c : p.conn) {
      bool pr = false;
      ASSERT_TRUE(c->progress(&pr).ok());
    }
}

const std::vector<size_t> kSizes = {1, 3, 64, 4095, (16 << 10) - 64, (16 << 10) - 63, 100000,
                                    (256 << 10) - 8, 256 << 10, (1 << 20) + 5, 8 << 20, 64 << 20};

TEST(IbTransport, ExactDataSlotAndSingleCopyPaths) {
  Pair p(oneIb());
  exchangeSizes(p, kSizes);
  // Exactly the messages from 256 KiB went single-copy (RDMA-read, both directions).
  uint64_t large = 0;
  for (size_t n : kSizes) large += n >= (256u << 10) ? n : 0;
  EXPECT_EQ(p.fabric.bytesRead(), 2 * large);
}

TEST(IbTransport, ExactDataSlotPathOnly) {
  Options o = smallOptions();
  o.singleCopyMinBytes = 0;  // never single copy
  o.slotBytes = 64 << 10;
  Pair p(oneIb(), o);
  exchangeSizes(p, kSizes);
  EXPECT_EQ(p.fabric.bytesRead(), 0u);
}

TEST(IbTransport, RoceGidAddressing) {
  // The fake checks that the address vector names one of the peer's GIDs of the same type.
  Pair p({fake::roceDevice("fake_roce0", 1)});
  exchangeSizes(p, {1, 5000, 1 << 20});
}

TEST(IbTransport, MultiRailStripesLargeTransfers) {
  Pair p({fake::ibDevice("fake_ib0", 1), fake::ibDevice("fake_ib1", 2)}, smallOptions(), 2);
  exchangeSizes(p, {100, 16 << 20});
  auto* c0 = dynamic_cast<IbConnection*>(p.conn[0].get());
  ASSERT_NE(c0, nullptr);
  EXPECT_EQ(c0->railsUsed(), 2);
  EXPECT_EQ(c0->queuePairs(), 4);
  // Both rails carried a good share of the 2 x 16 MiB.
  EXPECT_GT(p.fabric.bytesOn("fake_ib0"), 8u << 20);
  EXPECT_GT(p.fabric.bytesOn("fake_ib1"), 8u << 20);
}

TEST(IbTransport, ManyQueuedTransfersKeepFifoOrderBothWays) {
  Pair p(oneIb());
  constexpr int kN = 120;
  auto sizeOf = [](int k) -> size_t {
    static const size_t s[] = {1, 17, 16 << 10, 40000, 300 << 10, 7, (1 << 20) + 3};
    return s[k % 7];
  };
  twoRanks([&](int r) {
    Connection* c = p.conn[r].get();
    std::vector<std::vector<uint8_t>> src(kN), dst(kN);
    std::vector<Transfer> s(kN), v(kN);
    std::vector<Transfer*> all;
    for (int k = 0; k < kN; ++k) {
      src[k] = pattern(r, k, sizeOf(k));
      dst[k].assign(sizeOf(k), 0);
      s[k].kind = Transfer::Send;
      s[k].src = src[k].data();
      s[k].bytes = sizeOf(k);
      v[k].kind = Transfer::Recv;
      v[k].dst = dst[k].data();
      v[k].bytes = sizeOf(k);
      c->postSend(&s[k]);
      c->postRecv(&v[k]);
      all.push_back(&s[k]);
      all.push_back(&v[k]);
    }
    Status st = drive(c, all);
    ASSERT_TRUE(st.ok()) << st.message();
    for (int k = 0; k < kN; ++k) ASSERT_TRUE(dst[k] == pattern(1 - r, k, sizeOf(k))) << "message " << k;
    EXPECT_TRUE(c->idle());
  });
}

template <typename T>
void reduceCase(Pair& p, size_t count, strataDataType_t dt, kernels::RedKind op, bool inPlace) {
  twoRanks([&](int r) {
    Connection* c = p.conn[r].get();
    std::vector<T> mine(count), out(count), theirs(count);
    for (size_t i = 0; i < count; ++i) {
      mine[i] = static_cast<T>((i % 1000) * (r + 1)) - static_cast<T>(r * 300);
      theirs[i] = static_cast<T>((i % 1000) * (2 - r)) - static_cast<T>((1 - r) * 300);
    }
    Transfer s, v;
    s.kind = Transfer::Send;
    s.src = mine.data();
    s.bytes = count * sizeof(T);
    v.kind = Transfer::RecvReduce;
    std::vector<T> local = mine;
    v.src = inPlace ? local.data() : mine.data();
    v.dst = inPlace ? local.data() : out.data();
    v.bytes = count * sizeof(T);
    v.dtype = dt;
    v.op = op;
    c->postSend(&s);
    c->postRecv(&v);
    Status st = drive(c, {&s, &v});
    ASSERT_TRUE(st.ok()) << st.message();
    const std::vector<T>& res = inPlace ? local : out;
    for (size_t i = 0; i < count; ++i) {
      const T want = op == kernels::RedKind::Sum ? static_cast<T>(mine[i] + theirs[i]) : std::max(mine[i], theirs[i]);
      ASSERT_EQ(res[i], want) << "element " << i << " of " << count;
    }
  });
}

TEST(IbTransport, RecvReduceFloatSumAndIntMax) {
  Pair p(oneIb());
  for (size_t count : {1ul, 1000ul, 60000ul, (3ul << 20) + 7}) {  // slot path, then single copy (scratch ring)
    reduceCase<float>(p, count, strataFloat32, kernels::RedKind::Sum, false);
    reduceCase<int32_t>(p, count, strataInt32, kernels::RedKind::Max, false);
    reduceCase<float>(p, count, strataFloat32, kernels::RedKind::Sum, true);  // dst == src
  }
}

TEST(IbTransport, SizeMismatchNamesBothRanks) {
  for (size_t base : {100ul, 1ul << 20}) {  // slot path, single-copy path
    Pair p(oneIb());
    std::string err[2];
    twoRanks([&](int r) {
      Connection* c = p.conn[r].get();
      std::vector<uint8_t> buf(4 * base, 1);
      Transfer t;
      t.kind = r == 0 ? Transfer::Send : Transfer::Recv;
      t.src = buf.data();
      t.dst = buf.data();
      t.bytes = r == 0 ? base : 2 * base;
      if (r == 0) c->postSend(&t);
      else c->postRecv(&t);
      Transfer more;  // keeps rank 0 waiting on rank 1 after its send went out
      more.kind = Transfer::Recv;
      more.dst = buf.data() + 2 * base;
      more.bytes = 8;
      if (r == 0) c->postRecv(&more);
      Status st = drive(c, r == 0 ? std::vector<Transfer*>{&t, &more} : std::vector<Transfer*>{&t}, 10);
      err[r] = st.message();
    });
    const std::string want = fmt::format("message size mismatch: rank 0 sent {} bytes, rank 1 expects {} bytes", base, 2 * base);
    EXPECT_NE(err[1].find(want), std::string::npos) << err[1];
    EXPECT_NE(err[0].find("rank 1 failed: " + want), std::string::npos) << err[0];
  }
}

TEST(IbTransport, CreditsExhaustedThenRefilledWhenReceiverPostsLate) {
  Options o = smallOptions();
  o.slots = 4;
  Pair p(oneIb(), o);
  constexpr int kN = 24;
  std::atomic<int> phase{0};
  twoRanks([&](int r) {
    Connection* c = p.conn[r].get();
    std::vector<std::vector<uint8_t>> bufs(kN);
    std::vector<Transfer> ts(kN);
    std::vector<Transfer*> all;
    if (r == 0) {
      for (int k = 0; k < kN; ++k) {
        bufs[k] = pattern(0, k, 1000 + k);
        ts[k].kind = Transfer::Send;
        ts[k].src = bufs[k].data();
        ts[k].bytes = bufs[k].size();
        c->postSend(&ts[k]);
        all.push_back(&ts[k]);
      }
      // Without receives at rank 1, only `slots` chunks may leave: the rest wait for credits.
      const double until = net::nowSec() + 0.3;
      while (net::nowSec() < until) {
        bool pr = false;
        ASSERT_TRUE(c->progress(&pr).ok());
      }
      int done = 0;
      for (Transfer& t : ts) done += t.complete;
      EXPECT_EQ(done, 4);
      phase = 1;
      Status st = drive(c, all);
      ASSERT_TRUE(st.ok()) << st.message();
    } else {
      // Connect (progress) but post nothing until rank 0 has seen its credits run out.
      while (phase.load() == 0) {
        bool pr = false;
        ASSERT_TRUE(c->progress(&pr).ok());
      }
      for (int k = 0; k < kN; ++k) {
        bufs[k].assign(1000 + k, 0);
        ts[k].kind = Transfer::Recv;
        ts[k].dst = bufs[k].data();
        ts[k].bytes = bufs[k].size();
        c->postRecv(&ts[k]);
        all.push_back(&ts[k]);
      }
      Status st = drive(c, all);
      ASSERT_TRUE(st.ok()) << st.message();
      for (int k = 0; k < kN; ++k) EXPECT_TRUE(bufs[k] == pattern(0, k, 1000 + k)) << k;
    }
  });
}

TEST(IbTransport, IdleReceiverSleepsOnCompletionChannelAndWakes) {
  Pair p(oneIb());
  exchangeSizes(p, {8});  // connected
  settle(p, 0.05);
  std::vector<uint8_t> src = pattern(0, 9, 4096), dst(4096, 0);
  Transfer s = sendOf(src), v = recvInto(dst);
  double wokeAfter = 0;
  twoRanks([&](int r) {
    if (r == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      p.conn[0]->postSend(&s);
      ASSERT_TRUE(drive(p.conn[0].get(), {&s}).ok());
    } else {
      Connection* c = p.conn[1].get();
      c->postRecv(&v);
      bool pr = false;
      for (int i = 0; i < 5; ++i) ASSERT_TRUE(c->progress(&pr).ok());
      ASSERT_FALSE(v.complete);
      // Sleeps of up to 5 s each: only completion events (or the oob socket) can end them early.
      const double t0 = net::nowSec();
      int sleeps = 0;
      while (!v.complete && sleeps < 10) {
        WaitSet ws;
        c->addWaitSources(&ws);
        ASSERT_GE(ws.fds.size(), 2u);  // the oob socket and the completion channel
        pollFds(ws.fds, 5000000);
        ++sleeps;
        for (int i = 0; i < 5; ++i) ASSERT_TRUE(c->progress(&pr).ok());
      }
      wokeAfter = net::nowSec() - t0;
      ASSERT_TRUE(v.complete);
    }
  });
  EXPECT_LT(wokeAfter, 2.0);
  EXPECT_GT(wokeAfter, 0.02);
  EXPECT_TRUE(dst == src);
}

TEST(IbTransport, PeerQueuePairKilledFailsBothSidesNamingThePeer) {
  Pair p(oneIb());
  exchangeSizes(p, {8});
  p.fabric.killContext(1);  // rank 1's device context (opened second)
  std::string err[2];
  twoRanks([&](int r) {
    Connection* c = p.conn[r].get();
    std::vector<uint8_t> a(1 << 20, 3), b(1 << 20);
    Transfer s = sendOf(a), v = recvInto(b);
    c->postSend(&s);
    c->postRecv(&v);
    err[r] = drive(c, {&s, &v}, 10).message();
  });
  EXPECT_NE(err[0].find("rank 1"), std::string::npos) << err[0];
  EXPECT_NE(err[1].find("rank 0"), std::string::npos) << err[1];
  EXPECT_EQ(err[0].find("no completion within"), std::string::npos) << err[0];
  EXPECT_EQ(err[1].find("no completion within"), std::string::npos) << err[1];
}

TEST(IbTransport, OobClosedMeansPeerGone) {
  Pair p(oneIb());
  exchangeSizes(p, {8});
  settle(p, 0.1);     // no verbs traffic left in flight: only the oob socket can tell
  p.conn[1].reset();  // rank 1 exits: its socket closes
  std::vector<uint8_t> b(64);
  Transfer v = recvInto(b);
  p.conn[0]->postRecv(&v);
  Status st = drive(p.conn[0].get(), {&v}, 10);
  EXPECT_NE(st.message().find("rank 1 closed the connection (peer exited or failed)"), std::string::npos)
      << st.message();
}

TEST(IbTransport, OobClosedDuringHandshake) {
  Pair p(oneIb());
  p.conn[1].reset();
  std::vector<uint8_t> b(64);
  Transfer v = recvInto(b);
  p.conn[0]->postRecv(&v);
  Status st = drive(p.conn[0].get(), {&v}, 10);
  EXPECT_NE(st.message().find("rank 1 closed the connection"), std::string::npos) << st.message();
}

TEST(IbTransport, SendFailureReasonReachesThePeer) {
  Pair p(oneIb());
  exchangeSizes(p, {8});
  p.conn[1]->sendFailure("rank 1: out of memory in the trainer");
  std::vector<uint8_t> b(64);
  Transfer v = recvInto(b);
  p.conn[0]->postRecv(&v);
  Status st = drive(p.conn[0].get(), {&v}, 10);
  EXPECT_NE(st.message().find("rank 1 failed: rank 1: out of memory in the trainer"), std::string::npos)
      << st.message();
  bool pr = false;
  EXPECT_FALSE(p.conn[1]->progress(&pr).ok());  // the failed side stays broken
}

TEST(IbTransport, NoDeviceOrNoActivePortIsAClearError) {
  {
    fake::Fabric f({});
    std::unique_ptr<NetTransport> tr;
    Status st = createTransport(f.verbs(), smallOptions(), 0, &tr);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("no RDMA device (libibverbs loaded, 0 devices)"), std::string::npos) << st.message();
  }
  {
    fake::DeviceSpec d = fake::ibDevice("fake_down0", 1);
    d.ports[0].active = false;
    fake::Fabric f({d});
    std::unique_ptr<NetTransport> tr;
    Status st = createTransport(f.verbs(), smallOptions(), 0, &tr);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("no active port on 1 RDMA device(s) (fake_down0)"), std::string::npos)
        << st.message();
  }
  {
    fake::Fabric f({fake::ibDevice("fake_ib0", 1)});
    Options o = smallOptions();
    o.hca = "mlx5";
    std::unique_ptr<NetTransport> tr;
    Status st = createTransport(f.verbs(), o, 0, &tr);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("STRATA_IB_HCA='mlx5'"), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace strata::ib
