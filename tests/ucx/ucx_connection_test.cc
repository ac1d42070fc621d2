// ucx_connection_test.cc: the UCX transport with ranks as threads of one process, each with its
// own transport (UCX context and worker), over UCX's tcp on loopback (STRATA_UCX_NET_DEVICES=lo,
// set before the first transport; the transport list is strata's network-only default). The oob
// sockets are socketpair()s. Checks exact bytes, FIFO order, reductions, size mismatches, dead
// peers, failure notices, late handshakes and bounded teardown, each with one rail and with two
// (two contexts and workers per rank, both on lo, through ucx::createTransportOnRails); and that
// striping splits chunks over both rails, and how many rails a connection takes.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "transport/socket.h"
#include "transport/ucx/ucx_connection.h"
#include "transport/ucx/ucx_transport.h"
#include "transport/ucx/ucx_wire.h"

using namespace strata;

namespace {

/// Progresses `c` until every transfer in `ts` completes, sleeping through addWaitSources as an
/// executor would; fails on the connection's error or after `timeoutSec`.
Status drive(Connection& c, const std::vector<Transfer*>& ts, double timeoutSec = 20) {
  const double deadline = net::nowSec() + timeoutSec;
  WaitSet ws;
  while (true) {
    bool progressed = false;
    STRATA_RETURN_IF_ERROR(c.progress(&progressed));
    bool all = true;
    for (Transfer* t : ts) all = all && t->complete;
    if (all) return OkStatus();
    if (net::nowSec() > deadline) return internalError("test timed out waiting on rank {}", c.peer());
    if (!progressed) {
      ws.clear();
      c.addWaitSources(&ws);
      if (ws.fds.empty() && ws.bells.empty()) return internalError("connection offered nothing to wait on");
      sleepOn(ws, 2000, [] { return false; });
    }
  }
}

/// `n` ranks; rank i has railsOf[i] rails (default `rails` each: 1 = the transport as the
/// communicator makes it, more = that many contexts on lo) and connects with `rails` shared.
struct Ranks {
  std::vector<std::unique_ptr<NetTransport>> tr;
  std::vector<std::vector<int>> oob;  // oob[i][j]: rank i's end towards j
  int rails;
  explicit Ranks(int n, int rails = 1, std::vector<int> railsOf = {})
      : tr(n), oob(n, std::vector<int>(n, -1)), rails(rails) {
    for (int i = 0; i < n; ++i) {
      const int mine = railsOf.empty() ? rails : railsOf[static_cast<size_t>(i)];
      Status st = mine == 1 ? createUcxTransport(i, &tr[i])
                            : ucx::createTransportOnRails(i, std::vector<std::string>(mine, "lo"), &tr[i]);
      EXPECT_TRUE(st.ok()) << st.message();
      for (int j = i + 1; j < n; ++j) {
        int sv[2];
        EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        net::setNonBlocking(sv[0]);
        net::setNonBlocking(sv[1]);
        oob[i][j] = sv[0];
        oob[j][i] = sv[1];
      }
    }
  }
  std::unique_ptr<Connection> connect(int me, int peer) {
    std::unique_ptr<Connection> c;
    Status st = tr[me]->connect(me, peer, oob[me][peer], rails, &c);
    EXPECT_TRUE(st.ok()) << st.message();
    oob[me][peer] = -1;  // owned by the connection now
    return c;
  }
  ~Ranks() {
    for (auto& row : oob)
      for (int& fd : row) net::closeFd(&fd);
  }
};

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    v[i] = static_cast<uint8_t>(x >> 24);
  }
  return v;
}


/// Parameter: rails per rank (1: one context, as a single-rail process has; 2: two on lo).
class UcxConnectionTest : public ::testing::TestWithParam<int> {
 protected:
  static void SetUpTestSuite() { setenv("STRATA_UCX_NET_DEVICES", "lo", 0); }
};
INSTANTIATE_TEST_SUITE_P(Rails, UcxConnectionTest, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int>& i) { return fmt::format("rails{}", i.param); });

// Both directions at once, exact bytes, for sizes across the inline limit, chunk boundaries and up
// to 64 MiB. connection.h requires bytes > 0; 1 byte is the smallest.
TEST_P(UcxConnectionTest, ExactBytesAcrossSizesBothDirections) {
  Ranks r(2, GetParam());
  const std::vector<size_t> sizes = {1, 7, 8192, 8193, 100000, 1 << 20, (1 << 20) + 3, 5u << 20, 64u << 20};
  std::vector<Status> result(2);
  std::vector<std::thread> th;
  for (int me = 0; me < 2; ++me) {
    th.emplace_back([&, me] {
      auto c = r.connect(me, 1 - me);
      for (size_t n : sizes) {
        auto out = pattern(n, static_cast<uint32_t>(n * 2 + me));
        std::vector<uint8_t> in(n, 0xEE);
        Transfer s = Transfer::sendOf(out.data(), n), v = Transfer::recvOf(in.data(), n);
        c->postSend(&s);
        c->postRecv(&v);
        Status st = drive(*c, {&s, &v});
        if (!st.ok()) {
          result[me] = st;
          return;
        }
        if (in != pattern(n, static_cast<uint32_t>(n * 2 + (1 - me)))) {
          result[me] = internalError("rank {}: wrong bytes for size {}", me, n);
          return;
        }
        if (v.posted != n || s.posted != n) {
          result[me] = internalError("rank {}: posted counters {} / {} for size {}", me, s.posted, v.posted, n);
          return;
        }
      }
    });
  }
  for (auto& t : th) t.join();
  for (auto& st : result) EXPECT_TRUE(st.ok()) << st.message();
}

// Many transfers of mixed sizes queued before any progress, both directions, complete in order.
TEST_P(UcxConnectionTest, ManyQueuedTransfersStayInFifoOrder) {
  Ranks r(2, GetParam());
  constexpr int kCount = 300;
  auto sizeOf = [](int i) { return static_cast<size_t>(1 + (i * 7919) % (i % 10 == 0 ? 3000000 : 20000)); };
  std::vector<Status> result(2);
  std::vector<std::thread> th;
  for (int me = 0; me < 2; ++me) {
    th.emplace_back([&, me] {
      auto c = r.connect(me, 1 - me);
      std::vector<std::vector<uint8_t>> out(kCount), in(kCount);
      std::vector<Transfer> s(kCount), v(kCount);
      std::vector<Transfer*> all;
      for (int i = 0; i < kCount; ++i) {
        out[i] = pattern(sizeOf(i), static_cast<uint32_t>(i * 4 + me));
        in[i].assign(sizeOf(i), 0);
        s[i] = Transfer::sendOf(out[i].data(), out[i].size());
        v[i] = Transfer::recvOf(in[i].data(), in[i].size());
        c->postSend(&s[i]);
        c->postRecv(&v[i]);
        all.push_back(&s[i]);
        all.push_back(&v[i]);
      }
      // FIFO: a receive never completes before the one posted ahead of it.
      const double deadline = net::nowSec() + 30;
      while (true) {
        bool progressed = false;
        result[me] = c->progress(&progressed);
        if (!result[me].ok()) return;
        for (int i = 1; i < kCount; ++i)
          if (v[i].complete && !v[i - 1].complete) {
            result[me] = internalError("receive {} completed before {}", i, i - 1);
            return;
          }
        bool done = true;
        for (Transfer* t : all) done = done && t->complete;
        if (done) break;
        if (net::nowSec() > deadline) {
          result[me] = internalError("timed out");
          return;
        }
      }
      for (int i = 0; i < kCount; ++i)
        if (in[i] != pattern(sizeOf(i), static_cast<uint32_t>(i * 4 + (1 - me)))) {
          result[me] = internalError("rank {}: transfer {} ({} bytes) has wrong bytes", me, i, sizeOf(i));
          return;
        }
    });
  }
  for (auto& t : th) t.join();
  for (auto& st : result) EXPECT_TRUE(st.ok()) << st.message();
}

// RecvReduce: dst = src (op) received, inline, single-chunk and multi-chunk sizes.
TEST_P(UcxConnectionTest, RecvReduceFloatSumAndIntMax) {
  Ranks r(2, GetParam());
  Status sender, receiver;
  const std::vector<size_t> counts = {3, 2048, 300001, 1000000};  // 12 B .. 4 MB
  std::thread a([&] {
    auto c = r.connect(0, 1);
    for (size_t n : counts) {
      std::vector<float> f(n);
      std::vector<int32_t> k(n);
      for (size_t i = 0; i < n; ++i) {
        f[i] = static_cast<float>(i % 1000) * 0.5f;
        k[i] = static_cast<int32_t>((i * 37) % 2001) - 1000;
      }
      Transfer s1 = Transfer::sendOf(f.data(), n * 4), s2 = Transfer::sendOf(k.data(), n * 4);
      c->postSend(&s1);
      c->postSend(&s2);
      sender = drive(*c, {&s1, &s2});
      if (!sender.ok()) return;
    }
  });
  std::thread b([&] {
    auto c = r.connect(1, 0);
    for (size_t n : counts) {
      std::vector<float> mine(n), outF(n, -1);
      std::vector<int32_t> mineK(n), outK(n, -1);
      for (size_t i = 0; i < n; ++i) {
        mine[i] = static_cast<float>(i % 7);
        mineK[i] = static_cast<int32_t>((i * 11) % 1501) - 750;
      }
      Transfer t1;
      t1.kind = Transfer::RecvReduce;
      t1.src = mine.data();
      t1.dst = outF.data();
      t1.bytes = n * 4;
      t1.dtype = strataFloat32;
      t1.op = kernels::RedKind::Sum;
      Transfer t2 = t1;
      t2.src = mineK.data();
      t2.dst = outK.data();
      t2.dtype = strataInt32;
      t2.op = kernels::RedKind::Max;
      c->postRecv(&t1);
      c->postRecv(&t2);
      receiver = drive(*c, {&t1, &t2});
      if (!receiver.ok()) return;
      for (size_t i = 0; i < n; ++i) {
        const float wantF = static_cast<float>(i % 1000) * 0.5f + static_cast<float>(i % 7);
        const int32_t wantK = std::max(static_cast<int32_t>((i * 37) % 2001) - 1000,
                                       static_cast<int32_t>((i * 11) % 1501) - 750);
        if (outF[i] != wantF || outK[i] != wantK) {
          receiver = internalError("count {} element {}: got {} / {}, want {} / {}", n, i, outF[i], outK[i],
                                   wantF, wantK);
          return;
        }
      }
    }
  });
  a.join();
  b.join();
  EXPECT_TRUE(sender.ok()) << sender.message();
  EXPECT_TRUE(receiver.ok()) << receiver.message();
}

// A size mismatch fails the receiver with invalidUsage naming both ranks and both sizes, for
// inline and chunked messages.
TEST_P(UcxConnectionTest, SizeMismatchNamesBothSides) {
  for (auto [sent, expected] : {std::pair<size_t, size_t>{1000, 2000}, {3u << 20, 2u << 20}, {100, 5u << 20}}) {
    Ranks r(2, GetParam());
    Status st;
    std::atomic<bool> done{false};
    std::thread a([&] {
      auto c = r.connect(0, 1);
      std::vector<uint8_t> buf(sent, 1);
      Transfer s = Transfer::sendOf(buf.data(), sent);
      c->postSend(&s);
      while (!done) {
        bool p = false;
        if (!c->progress(&p).ok()) break;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    std::thread b([&] {
      auto c = r.connect(1, 0);
      std::vector<uint8_t> buf(expected);
      Transfer v = Transfer::recvOf(buf.data(), expected);
      c->postRecv(&v);
      st = drive(*c, {&v}, 10);
      done = true;
    });
    a.join();
    b.join();
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), strataInvalidUsage) << st.message();
    EXPECT_EQ(st.message(), fmt::format("message size mismatch: rank 0 sent {} bytes, rank 1 expects {} bytes",
                                        sent, expected));
  }
}

// The peer's connection and transport are destroyed (its oob socket closes) while a large transfer
// is in flight and while another receive waits: the survivor fails naming the peer, quickly. Its
// buffers are freed before its connection (a caller frees them once the call failed): UCX must not
// write rendezvous data that was still arriving into them later (it did: a rare segfault).
TEST_P(UcxConnectionTest, PeerDestroyedMidTransferFailsNamingPeer) {
  Ranks r(2, GetParam());
  constexpr size_t kBytes = 32u << 20;
  Status st;
  double failedAfter = 0;
  std::atomic<bool> started{false};
  std::thread a([&] {
    auto c = r.connect(0, 1);
    std::vector<uint8_t> buf(kBytes, 3);
    Transfer s = Transfer::sendOf(buf.data(), kBytes);
    c->postSend(&s);
    while (!started || s.posted == 0) {  // until some chunks moved
      bool p = false;
      if (!c->progress(&p).ok()) break;
    }
    c.reset();
    r.tr[0].reset();
  });
  std::thread b([&] {
    auto c = r.connect(1, 0);
    std::vector<uint8_t> buf(kBytes), more(100);
    Transfer v = Transfer::recvOf(buf.data(), kBytes), w = Transfer::recvOf(more.data(), more.size());
    c->postRecv(&v);
    c->postRecv(&w);
    started = true;
    const double t0 = net::nowSec();
    st = drive(*c, {&v, &w}, 15);
    failedAfter = net::nowSec() - t0;
  });
  a.join();
  b.join();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("rank 0"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("timed out"), std::string::npos) << st.message();
  EXPECT_LT(failedAfter, 5.0);
}

// A peer whose oob socket closes (the process died) before the handshake: fails naming it.
TEST_P(UcxConnectionTest, OobClosedBeforeHandshakeFailsNamingPeer) {
  Ranks r(2, GetParam());
  net::closeFd(&r.oob[0][1]);
  auto c = r.connect(1, 0);
  uint8_t b[16];
  Transfer v = Transfer::recvOf(b, sizeof(b));
  c->postRecv(&v);
  Status st = drive(*c, {&v}, 5);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "rank 0 closed the connection (peer exited or failed)");
}

// sendFailure's reason reaches the peer, which is waiting on a receive.
TEST_P(UcxConnectionTest, SendFailureReasonReachesPeer) {
  Ranks r(2, GetParam());
  Status st;
  std::atomic<bool> ready{false};
  std::thread a([&] {
    auto c = r.connect(0, 1);
    uint8_t x = 42, y = 0;
    Transfer s = Transfer::sendOf(&x, 1), v = Transfer::recvOf(&y, 1);
    c->postSend(&s);
    c->postRecv(&v);
    Status hs = drive(*c, {&s, &v});  // handshake done, one exchange
    EXPECT_TRUE(hs.ok()) << hs.message();
    while (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    c->sendFailure("rank 0 ran out of memory (test)");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  });
  std::thread b([&] {
    auto c = r.connect(1, 0);
    uint8_t x = 7, y = 0;
    Transfer s = Transfer::sendOf(&x, 1), v = Transfer::recvOf(&y, 1);
    c->postSend(&s);
    c->postRecv(&v);
    Status hs = drive(*c, {&s, &v});
    EXPECT_TRUE(hs.ok()) << hs.message();
    EXPECT_EQ(y, 42);
    std::vector<uint8_t> big(1 << 20);
    Transfer w = Transfer::recvOf(big.data(), big.size());
    c->postRecv(&w);
    ready = true;
    st = drive(*c, {&w}, 10);
  });
  a.join();
  b.join();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "rank 0 failed: rank 0 ran out of memory (test)");
}

// One side posts (and progresses) long before the other even creates its connection.
TEST_P(UcxConnectionTest, HandshakeWhenOneSidePostsLongBeforeTheOther) {
  Ranks r(2, GetParam());
  Status sa, sb;
  auto data = pattern(3u << 20, 9);
  std::vector<uint8_t> got(data.size());
  std::thread a([&] {
    auto c = r.connect(0, 1);
    Transfer s = Transfer::sendOf(data.data(), data.size());
    c->postSend(&s);
    sa = drive(*c, {&s});
  });
  std::thread b([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    auto c = r.connect(1, 0);
    Transfer v = Transfer::recvOf(got.data(), got.size());
    c->postRecv(&v);
    sb = drive(*c, {&v});
  });
  a.join();
  b.join();
  EXPECT_TRUE(sa.ok()) << sa.message();
  EXPECT_TRUE(sb.ok()) << sb.message();
  EXPECT_TRUE(got == data);
}

// Three ranks on one process, each with its own worker: a ring both ways, so every worker
// receives from two peers at once and the tags keep them apart.
TEST_P(UcxConnectionTest, ThreeRanksRingBothWays) {
  constexpr int n = 3;
  Ranks r(n, GetParam());
  std::vector<Status> result(n);
  std::vector<std::thread> th;
  for (int me = 0; me < n; ++me) {
    th.emplace_back([&, me] {
      const int right = (me + 1) % n, left = (me + n - 1) % n;
      auto cr = r.connect(me, right), cl = r.connect(me, left);
      const size_t bytes = 2u << 20;
      auto toR = pattern(bytes, me * 10 + right), toL = pattern(bytes, me * 10 + left);
      std::vector<uint8_t> fromL(bytes), fromR(bytes);
      Transfer s1 = Transfer::sendOf(toR.data(), bytes), s2 = Transfer::sendOf(toL.data(), bytes);
      Transfer v1 = Transfer::recvOf(fromL.data(), bytes), v2 = Transfer::recvOf(fromR.data(), bytes);
      cr->postSend(&s1);
      cr->postRecv(&v2);
      cl->postSend(&s2);
      cl->postRecv(&v1);
      const double deadline = net::nowSec() + 20;
      while (!(s1.complete && s2.complete && v1.complete && v2.complete)) {
        bool p = false;
        result[me] = cr->progress(&p);
        if (result[me].ok()) result[me] = cl->progress(&p);
        if (!result[me].ok()) return;
        if (net::nowSec() > deadline) {
          result[me] = internalError("timed out");
          return;
        }
      }
      if (fromL != pattern(bytes, left * 10 + me) || fromR != pattern(bytes, right * 10 + me))
        result[me] = internalError("rank {}: wrong bytes", me);
    });
  }
  for (auto& t : th) t.join();
  for (auto& st : result) EXPECT_TRUE(st.ok()) << st.message();
}

// Destroying connections and transports with transfers pending (a large send the peer never
// receives, a receive it never sends) returns within a bounded time.
TEST_P(UcxConnectionTest, TeardownWithPendingTransfersDoesNotHang) {
  Ranks r(2, GetParam());
  std::vector<uint8_t> big(16u << 20, 5), small(64);
  auto c0 = r.connect(0, 1);
  auto c1 = r.connect(1, 0);
  Transfer s = Transfer::sendOf(big.data(), big.size()), v = Transfer::recvOf(small.data(), small.size());
  c0->postSend(&s);  // rank 1 never receives it
  c0->postRecv(&v);  // rank 1 never sends it
  const double t0 = net::nowSec();
  while (net::nowSec() - t0 < 0.2) {  // handshake done, the send's chunks are in flight
    bool p = false;
    ASSERT_TRUE(c0->progress(&p).ok());
    ASSERT_TRUE(c1->progress(&p).ok());
  }
  EXPECT_FALSE(s.complete);
  EXPECT_FALSE(v.complete);
  const double t1 = net::nowSec();
  c0.reset();
  c1.reset();
  r.tr[0].reset();
  r.tr[1].reset();
  EXPECT_LT(net::nowSec() - t1, 4.0);
}

ucx::UcxConnection& ucxOf(Connection& c) { return dynamic_cast<ucx::UcxConnection&>(c); }

// Two rails per rank (two contexts and workers, both on lo): a 64 MiB transfer each way, a stream
// of single-chunk messages and a 3-chunk one arrive exact, and their chunks were split evenly over
// both rails: sent on both rails' endpoints and received by both rails' workers (a receive posted
// on rail 1's worker only matches what came through rail 1).
TEST(UcxRails, LargeTransfersStripeOverBothRailsAndArriveExact) {
  setenv("STRATA_UCX_NET_DEVICES", "lo", 0);
  Ranks r(2, 2);
  std::vector<size_t> sizes = {64u << 20, 3u << 20};
  for (int i = 0; i < 9; ++i) sizes.push_back(1u << 20);  // one chunk each: they alternate rails too
  sizes.push_back(100);                                     // inline: rail 0, no chunk
  std::vector<Status> result(2);
  std::vector<std::array<uint64_t, 2>> sent(2), received(2);
  std::vector<int> railsUsed(2);
  std::vector<std::thread> th;
  for (int me = 0; me < 2; ++me) {
    th.emplace_back([&, me] {
      auto c = r.connect(me, 1 - me);
      std::vector<std::vector<uint8_t>> out, in;
      std::vector<Transfer> s(sizes.size()), v(sizes.size());
      std::vector<Transfer*> all;
      for (size_t k = 0; k < sizes.size(); ++k) {
        out.push_back(pattern(sizes[k], static_cast<uint32_t>(k * 2 + me)));
        in.emplace_back(sizes[k], 0xEE);
      }
      for (size_t k = 0; k < sizes.size(); ++k) {
        s[k] = Transfer::sendOf(out[k].data(), sizes[k]);
        v[k] = Transfer::recvOf(in[k].data(), sizes[k]);
        c->postSend(&s[k]);
        c->postRecv(&v[k]);
        all.push_back(&s[k]);
        all.push_back(&v[k]);
      }
      result[me] = drive(*c, all, 60);
      if (!result[me].ok()) return;
      for (size_t k = 0; k < sizes.size(); ++k)
        if (in[k] != pattern(sizes[k], static_cast<uint32_t>(k * 2 + (1 - me)))) {
          result[me] = internalError("rank {}: transfer {} ({} bytes) has wrong bytes", me, k, sizes[k]);
          return;
        }
      auto& u = ucxOf(*c);
      railsUsed[me] = u.rails();
      for (int rail = 0; rail < 2; ++rail) {
        sent[me][rail] = u.chunksSentOn(rail);
        received[me][rail] = u.chunksReceivedOn(rail);
      }
    });
  }
  for (auto& t : th) t.join();
  // 64 + 3 + 9 chunks per direction, alternating rails: 38 on each.
  for (int me = 0; me < 2; ++me) {
    ASSERT_TRUE(result[me].ok()) << result[me].message();
    EXPECT_EQ(railsUsed[me], 2);
    EXPECT_EQ(sent[me][0], 38u);
    EXPECT_EQ(sent[me][1], 38u);
    EXPECT_EQ(received[me][0], 38u);
    EXPECT_EQ(received[me][1], 38u);
  }
}

// A connection takes min(my rails, the peer's rails, either side's `rails` argument), and works
// with fewer rails than a side has.
TEST(UcxRails, RailCountIsTheMinimumOfBothSidesAndTheSharedRails) {
  setenv("STRATA_UCX_NET_DEVICES", "lo", 0);
  struct Case {
    std::vector<int> railsOf;
    int shared;
    int want;
  };
  for (const Case& k : {Case{{2, 2}, 2, 2}, Case{{2, 2}, 1, 1}, Case{{2, 1}, 2, 1}, Case{{1, 2}, 2, 1},
                        Case{{3, 2}, 3, 2}, Case{{3, 3}, 3, 3}}) {
    Ranks r(2, k.shared, k.railsOf);
    const size_t bytes = (4u << 20) + 5;
    std::vector<Status> result(2);
    std::vector<int> used(2);
    std::vector<std::thread> th;
    for (int me = 0; me < 2; ++me) {
      th.emplace_back([&, me] {
        auto c = r.connect(me, 1 - me);
        auto out = pattern(bytes, static_cast<uint32_t>(me));
        std::vector<uint8_t> in(bytes);
        Transfer s = Transfer::sendOf(out.data(), bytes), v = Transfer::recvOf(in.data(), bytes);
        c->postSend(&s);
        c->postRecv(&v);
        result[me] = drive(*c, {&s, &v});
        if (result[me].ok() && in != pattern(bytes, static_cast<uint32_t>(1 - me)))
          result[me] = internalError("rank {}: wrong bytes", me);
        used[me] = ucxOf(*c).rails();
      });
    }
    for (auto& t : th) t.join();
    for (int me = 0; me < 2; ++me) {
      EXPECT_TRUE(result[me].ok()) << result[me].message();
      EXPECT_EQ(used[me], k.want) << "rails " << k.railsOf[0] << "/" << k.railsOf[1] << " shared " << k.shared;
    }
  }
}

// Rails pair by subnet, in the lower rank's order; unknown subnets pair with unknown ones by
// order; with nothing in common, by index.
TEST(UcxRails, PairRailsBySubnet) {
  using ucx::RailSubnet;
  const RailSubnet a{0x0112c6, 0xffffff}, b{0x0212c6, 0xffffff}, c{0x0312c6, 0xffffff}, none{};
  using P = std::vector<std::pair<int, int>>;
  EXPECT_EQ(ucx::pairRails({a, b}, {a, b}), (P{{0, 0}, {1, 1}}));
  EXPECT_EQ(ucx::pairRails({a, b}, {b, a}), (P{{0, 1}, {1, 0}}));
  EXPECT_EQ(ucx::pairRails({a, b, c}, {c, a}), (P{{0, 1}, {2, 0}}));
  EXPECT_EQ(ucx::pairRails({a}, {c, b}), (P{{0, 0}}));  // routed: by index
  EXPECT_EQ(ucx::pairRails({none, none}, {none, none, none}), (P{{0, 0}, {1, 1}}));
  EXPECT_EQ(ucx::pairRails({a, none}, {none, a}), (P{{0, 1}, {1, 0}}));
}

}  // namespace
