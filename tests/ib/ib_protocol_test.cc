// ib_protocol_test.cc: unit tests of the verbs-free parts of the ibverbs transport: registration
// cache, slot/credit bookkeeping, encodings, read striping, GID choice, HCA selection and the oob
// handshake state machine (over a socketpair, with recording hooks).
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cstring>

#include "ib_test_util.h"
#include "transport/ib/ib_device.h"
#include "transport/ib/ib_handshake.h"
#include "transport/ib/ib_protocol.h"
#include "transport/ib/reg_cache.h"

namespace strata::ib {
namespace {

// ---- registration cache -------------------------------------------------------------------

struct FakeRegistrar {
  int regs = 0, deregs = 0, live = 0;
  std::vector<std::pair<uintptr_t, size_t>> calls;
  bool failNext = false;
  RegCache make(size_t max) {
    return RegCache(
        max,
        [this](void* a, size_t n, void** mr, uint32_t* lk, uint32_t* rk) {
          if (failNext) return systemError("registration refused");
          ++regs;
          ++live;
          calls.emplace_back(reinterpret_cast<uintptr_t>(a), n);
          *mr = reinterpret_cast<void*>(static_cast<uintptr_t>(regs));
          *lk = 100 + regs;
          *rk = 200 + regs;
          return OkStatus();
        },
        [this](void*) {
          ++deregs;
          --live;
        });
  }
};

TEST(IbRegCache, HitsCoveredRangesAndAlignsToPages) {
  FakeRegistrar f;
  alignas(4096) static char buf[16 * 4096];
  {
    RegCache c = f.make(4);
    RegCache::Region* a = nullptr;
    ASSERT_TRUE(c.acquire(buf + 100, 3 * 4096, &a).ok());
    EXPECT_EQ(a->begin, reinterpret_cast<uintptr_t>(buf));
    EXPECT_EQ(a->end, reinterpret_cast<uintptr_t>(buf) + 4 * 4096);
    EXPECT_EQ(f.calls[0].second, 4u * 4096);
    RegCache::Region* b = nullptr;
    ASSERT_TRUE(c.acquire(buf + 4096, 100, &b).ok());  // inside: a hit
    EXPECT_EQ(a, b);
    EXPECT_EQ(b->refs, 2);
    EXPECT_EQ(c.hits(), 1u);
    EXPECT_EQ(c.misses(), 1u);
    EXPECT_EQ(f.regs, 1);
    c.release(a);
    c.release(b);
    EXPECT_EQ(a->refs, 0);
    EXPECT_EQ(c.size(), 1u);  // cached after release
  }
  EXPECT_EQ(f.live, 0);  // the destructor deregisters everything
}

// Bound 0 (the transport's default): a registration lives while a transfer pins it, shared by
// transfers in flight at once, and is deregistered at the last release. A buffer freed and mapped
// again at that address therefore gets a fresh registration (a cached one would pin the old pages).
TEST(IbRegCache, BoundZeroRegistersPerTransfer) {
  FakeRegistrar f;
  alignas(4096) static char buf[8 * 4096];
  RegCache c = f.make(0);
  RegCache::Region *a = nullptr, *b = nullptr;
  ASSERT_TRUE(c.acquire(buf, 2 * 4096, &a).ok());
  ASSERT_TRUE(c.acquire(buf, 4096, &b).ok());  // in flight at the same time: shared
  EXPECT_EQ(a, b);
  EXPECT_EQ(f.regs, 1);
  c.release(a);
  EXPECT_EQ(f.live, 1) << "still pinned by the second transfer";
  c.release(b);
  EXPECT_EQ(f.live, 0);
  EXPECT_EQ(c.size(), 0u);
  ASSERT_TRUE(c.acquire(buf, 2 * 4096, &a).ok());  // the same range again: registered anew
  EXPECT_EQ(f.regs, 2);
  c.release(a);
  EXPECT_EQ(f.live, 0);
}

TEST(IbRegCache, EvictsLeastRecentlyUsedUnpinnedBeyondBound) {
  FakeRegistrar f;
  alignas(4096) static char buf[64 * 4096];
  RegCache c = f.make(3);
  RegCache::Region* r[5];
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.acquire(buf + i * 8 * 4096, 4096, &r[i]).ok());
    c.release(r[i]);
  }
  ASSERT_TRUE(c.acquire(buf, 10, &r[0]).ok());  // touch region 0: region 1 is now the oldest
  c.release(r[0]);
  ASSERT_TRUE(c.acquire(buf + 3 * 8 * 4096, 4096, &r[3]).ok());
  EXPECT_EQ(c.size(), 3u);
  EXPECT_EQ(c.evictions(), 1u);
  RegCache::Region* again = nullptr;
  const int before = f.regs;
  ASSERT_TRUE(c.acquire(buf + 8 * 4096, 4096, &again).ok());  // region 1 was evicted: registers again
  EXPECT_EQ(f.regs, before + 1);
  ASSERT_TRUE(c.acquire(buf, 10, &r[4]).ok());  // region 0 survived
  EXPECT_EQ(f.regs, before + 1);
  EXPECT_EQ(f.live, static_cast<int>(c.size()));
}

TEST(IbRegCache, PinnedRegionsAreNeverEvicted) {
  FakeRegistrar f;
  alignas(4096) static char buf[64 * 4096];
  RegCache c = f.make(2);
  RegCache::Region* r[4];
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(c.acquire(buf + i * 8 * 4096, 4096, &r[i]).ok());
  EXPECT_EQ(c.size(), 4u);  // all pinned: over the bound for now
  EXPECT_EQ(f.deregs, 0);
  for (int i = 0; i < 4; ++i) c.release(r[i]);
  EXPECT_EQ(c.size(), 2u);  // trimmed once released
  EXPECT_EQ(f.deregs, 2);
}

TEST(IbRegCache, OverlappingNewRangeReplacesStaleEntriesAndErrorsPropagate) {
  FakeRegistrar f;
  alignas(4096) static char buf[64 * 4096];
  RegCache c = f.make(8);
  RegCache::Region* a = nullptr;
  ASSERT_TRUE(c.acquire(buf, 4096, &a).ok());
  c.release(a);
  RegCache::Region* b = nullptr;
  ASSERT_TRUE(c.acquire(buf, 8 * 4096, &b).ok());  // not covered: new range; the old one overlaps
  EXPECT_EQ(c.size(), 1u);
  EXPECT_EQ(f.deregs, 1);
  f.failNext = true;
  RegCache::Region* d = nullptr;
  Status st = c.acquire(buf + 32 * 4096, 4096, &d);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "registration refused");
}

// ---- slots and credits --------------------------------------------------------------------

TEST(IbSlots, CreditsLimitInFlightChunksToTheSlots) {
  SlotCredits c(4);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(c.canSend());
    EXPECT_EQ(c.take(), static_cast<uint64_t>(i));
  }
  EXPECT_FALSE(c.canSend());
  EXPECT_EQ(c.inFlight(), 4u);
  c.addCredits(1);
  ASSERT_TRUE(c.canSend());
  EXPECT_EQ(c.take(), 4u);
  EXPECT_EQ(c.slotOf(4), 0u);
  EXPECT_EQ(c.slotOf(7), 3u);
  EXPECT_FALSE(c.canSend());
  c.addCredits(3);
  EXPECT_EQ(c.inFlight(), 1u);
}

TEST(IbSlots, ArrivalsOutOfOrderAreConsumedInOrderAndCreditsBatch) {
  SlotArrivals a(4);
  EXPECT_FALSE(a.headReady());
  ASSERT_TRUE(a.arrive(2));  // seq 2 lands first (another queue pair)
  EXPECT_FALSE(a.headReady());
  ASSERT_TRUE(a.arrive(0));
  ASSERT_TRUE(a.headReady());
  EXPECT_EQ(a.headSlot(), 0u);
  a.consume();
  EXPECT_FALSE(a.headReady());  // seq 1 missing
  ASSERT_TRUE(a.arrive(1));
  a.consume();
  a.consume();
  EXPECT_EQ(a.headSeq(), 3u);
  EXPECT_EQ(a.owed(), 3u);
  EXPECT_EQ(a.takeOwed(), 3u);
  EXPECT_EQ(a.owed(), 0u);
  EXPECT_FALSE(a.arrive(4));  // no such slot
  ASSERT_TRUE(a.arrive(3));
  EXPECT_FALSE(a.arrive(3));  // overrun: the slot is still full
}

TEST(IbSlots, SenderAndReceiverBookkeepingAgreeOverManyRounds) {
  SlotCredits s(5);
  SlotArrivals r(5);
  uint64_t delivered = 0;
  for (int round = 0; round < 1000; ++round) {
    while (s.canSend()) r.arrive(s.slotOf(s.take()));
    while (r.headReady() && (round % 3 != 0 || r.owed() < 2)) {
      r.consume();
      ++delivered;
    }
    s.addCredits(r.takeOwed());
  }
  EXPECT_EQ(delivered + s.inFlight(), s.next());
  EXPECT_GT(delivered, 1000u);
}

TEST(IbProtocol, ImmediatesAndWorkRequestIdsRoundTrip) {
  for (ImmKind k : {ImmKind::Slot, ImmKind::Credit, ImmKind::Fin}) {
    const uint32_t imm = makeImm(k, 0x0abcdef);
    EXPECT_EQ(immKind(imm), k);
    EXPECT_EQ(immValue(imm), 0x0abcdefu);
  }
  const uint64_t id = makeWrId(WrKind::Read, 63, 0xfedcba987654ull);
  EXPECT_EQ(wrKind(id), WrKind::Read);
  EXPECT_EQ(wrQp(id), 63u);
  EXPECT_EQ(wrValue(id), 0xfedcba987654ull);
  EXPECT_LE(sizeof(SlotHeader), kSlotHeaderBytes);
}

TEST(IbProtocol, ReadPlanCoversTheMessageExactlyAndStripes) {
  for (size_t bytes : {1ul, 1000ul, 4096ul, 4097ul, (64ul << 20) + 3}) {
    ReadPlan p{bytes, 4096, 3};
    size_t sum = 0;
    for (uint64_t c = 0; c < p.chunks(); ++c) {
      EXPECT_EQ(p.offsetOf(c), sum);
      EXPECT_GT(p.lengthOf(c), 0u);
      EXPECT_LE(p.lengthOf(c), 4096u);
      EXPECT_EQ(p.qpOf(c), c % 3);
      sum += p.lengthOf(c);
    }
    EXPECT_EQ(sum, bytes);
  }
}

// ---- GID choice and HCA selection ---------------------------------------------------------

GidEntry gid(int index, std::initializer_list<uint8_t> head, int type, uint8_t last = 1) {
  GidEntry e{index, {}, type};
  int i = 0;
  for (uint8_t b : head) e.raw[i++] = b;
  e.raw[15] = last;
  return e;
}
GidEntry v4(int index, int type) {
  GidEntry e{index, {}, type};
  e.raw[10] = e.raw[11] = 0xff;
  e.raw[12] = 10;
  e.raw[15] = 7;
  return e;
}

TEST(IbGid, PrefersRoceV2Ipv4MappedThenOtherV2) {
  const int v1 = IBV_GID_TYPE_ROCE_V1, v2 = IBV_GID_TYPE_ROCE_V2;
  std::vector<GidEntry> t = {gid(0, {0xfe, 0x80}, v1), gid(1, {0xfe, 0x80}, v2), v4(2, v1), v4(3, v2)};
  EXPECT_EQ(chooseGid(t, true, -1), 3);
  EXPECT_EQ(chooseGid(t, true, 2), 2);    // forced
  EXPECT_EQ(chooseGid(t, true, 9), -1);   // forced but absent
  std::vector<GidEntry> noV4 = {gid(0, {0xfe, 0x80}, v1), gid(1, {0xfe, 0x80}, v2), gid(2, {0x20, 0x01}, v2)};
  EXPECT_EQ(chooseGid(noV4, true, -1), 2);  // global v2 over link-local v2
  std::vector<GidEntry> v1only = {gid(0, {0, 0}, v1, 0), gid(1, {0xfe, 0x80}, v1)};
  EXPECT_EQ(chooseGid(v1only, true, -1), 1);  // zero GIDs are skipped
  std::vector<GidEntry> unknown = {v4(0, -1)};
  EXPECT_EQ(chooseGid(unknown, true, -1), 0);
  EXPECT_EQ(chooseGid({gid(0, {0xfe, 0x80}, IBV_GID_TYPE_IB)}, false, -1), 0);  // InfiniBand: index 0
  EXPECT_EQ(chooseGid({}, true, -1), -1);
}

TEST(IbHca, SelectionListsLikeNccl) {
  EXPECT_TRUE(hcaMatches("", "mlx5_0", 1));
  EXPECT_TRUE(hcaMatches("mlx5", "mlx5_3", 1));
  EXPECT_FALSE(hcaMatches("mlx5_1", "mlx5_0", 1));
  EXPECT_TRUE(hcaMatches("mlx5_0:1,mlx5_1:2", "mlx5_1", 2));
  EXPECT_FALSE(hcaMatches("mlx5_0:1,mlx5_1:2", "mlx5_1", 1));
  EXPECT_FALSE(hcaMatches("^mlx5_0", "mlx5_0", 1));
  EXPECT_TRUE(hcaMatches("^mlx5_0", "mlx5_1", 1));
  EXPECT_FALSE(hcaMatches("=mlx5", "mlx5_0", 1));
  EXPECT_TRUE(hcaMatches("=mlx5_0", "mlx5_0", 1));
}

// ---- handshake state machine --------------------------------------------------------------

struct RecordingHooks : Handshake::Hooks {
  int rank = 0;
  std::vector<std::string> calls;
  Hello peerHello{};
  Info peerInfo;
  Status helloResult, infoResult;
  Status onHello(const Hello& peer, Info* mine) override {
    calls.push_back("hello");
    peerHello = peer;
    mine->rails = 1;
    mine->qps = 2;
    mine->qp[0].qpn = 1000 + rank;
    mine->qp[1].qpn = 2000 + rank;
    mine->rail[0].fifoAddr = 0xabc000 + rank;
    return helloResult;
  }
  Status onInfo(const Info& peer) override {
    calls.push_back("info");
    peerInfo = peer;
    return infoResult;
  }
};

Hello helloOf(int rank) { return Hello{Handshake::kVersion, rank, 1, 2, 8, 16384}; }

// Steps both machines until both connect, one fails, or 2 s pass.
void stepBoth(Handshake& a, Handshake& b, Status* sa, Status* sb) {
  const double until = net::nowSec() + 2;
  while (net::nowSec() < until && sa->ok() && sb->ok() && !(a.connected() && b.connected())) {
    bool p = false;
    *sa = a.progress(&p);
    if (sa->ok()) *sb = b.progress(&p);
  }
}

TEST(IbHandshake, ExchangesHelloInfoReadyInOrder) {
  int fds[2];
  testutil::oobPair(fds);
  RecordingHooks h0, h1;
  h0.rank = 0;
  h1.rank = 1;
  Handshake a(0, 1, fds[0], helloOf(0), &h0), b(1, 0, fds[1], helloOf(1), &h1);
  EXPECT_EQ(a.state(), Handshake::State::AwaitHello);
  Status sa, sb;
  stepBoth(a, b, &sa, &sb);
  ASSERT_TRUE(sa.ok() && sb.ok()) << sa.message() << sb.message();
  ASSERT_TRUE(a.connected() && b.connected());
  EXPECT_EQ(h0.calls, (std::vector<std::string>{"hello", "info"}));
  EXPECT_EQ(h1.calls, (std::vector<std::string>{"hello", "info"}));
  EXPECT_EQ(h0.peerHello.rank, 1);
  EXPECT_EQ(h0.peerHello.slotBytes, 16384u);
  EXPECT_EQ(h0.peerInfo.qp[1].qpn, 2001u);
  EXPECT_EQ(h1.peerInfo.qp[0].qpn, 1000u);
  EXPECT_EQ(h1.peerInfo.rail[0].fifoAddr, 0xabc000u);
  // Connected and quiet: progress keeps succeeding.
  bool p = false;
  EXPECT_TRUE(a.progress(&p).ok());
}

TEST(IbHandshake, SurvivesOneByteAtATimeDelivery) {
  // A relay moves bytes between two socketpairs one at a time: frames arrive in pieces.
  int left[2], right[2];
  testutil::oobPair(left);
  testutil::oobPair(right);
  RecordingHooks h0, h1;
  h1.rank = 1;
  Handshake a(0, 1, left[0], helloOf(0), &h0), b(1, 0, right[0], helloOf(1), &h1);
  const double until = net::nowSec() + 5;
  Status sa, sb;
  while (net::nowSec() < until && !(a.connected() && b.connected()) && sa.ok() && sb.ok()) {
    bool p = false;
    sa = a.progress(&p);
    sb = b.progress(&p);
    char c;
    if (recv(left[1], &c, 1, MSG_DONTWAIT) == 1) {
      ASSERT_EQ(send(right[1], &c, 1, MSG_NOSIGNAL), 1);
    }
    if (recv(right[1], &c, 1, MSG_DONTWAIT) == 1) {
      ASSERT_EQ(send(left[1], &c, 1, MSG_NOSIGNAL), 1);
    }
  }
  ASSERT_TRUE(sa.ok() && sb.ok()) << sa.message() << sb.message();
  EXPECT_TRUE(a.connected() && b.connected());
  close(left[1]);
  close(right[1]);
}

TEST(IbHandshake, EofDuringHandshakeNamesThePeer) {
  int fds[2];
  testutil::oobPair(fds);
  RecordingHooks h0;
  Handshake a(0, 3, fds[0], helloOf(0), &h0);
  close(fds[1]);
  bool p = false;
  Status st = a.progress(&p);
  EXPECT_EQ(st.message(), "rank 3 closed the connection during the ibverbs handshake (peer exited or failed)");
  EXPECT_EQ(a.state(), Handshake::State::Failed);
}

TEST(IbHandshake, WrongPeerRankIsRejected) {
  int fds[2];
  testutil::oobPair(fds);
  RecordingHooks h0, h1;
  Handshake a(0, 1, fds[0], helloOf(0), &h0), b(2, 0, fds[1], helloOf(2), &h1);
  Status sa, sb;
  stepBoth(a, b, &sa, &sb);
  EXPECT_NE(sa.message().find("expected rank 1"), std::string::npos) << sa.message();
  EXPECT_TRUE(h0.calls.empty());
}

TEST(IbHandshake, HookFailureStopsTheHandshake) {
  int fds[2];
  testutil::oobPair(fds);
  RecordingHooks h0, h1;
  h1.infoResult = systemError("cannot move queue pair to RTR");
  Handshake a(0, 1, fds[0], helloOf(0), &h0), b(1, 0, fds[1], helloOf(1), &h1);
  Status sa, sb;
  stepBoth(a, b, &sa, &sb);
  EXPECT_EQ(sb.message(), "cannot move queue pair to RTR");
  EXPECT_FALSE(b.connected());
  EXPECT_FALSE(a.connected());  // never got READY
}

TEST(IbHandshake, FailFrameAndEofAfterConnectNameThePeer) {
  for (bool withReason : {true, false}) {
    int fds[2];
    testutil::oobPair(fds);
    RecordingHooks h0, h1;
    auto a = std::make_unique<Handshake>(0, 1, fds[0], helloOf(0), &h0);
    auto b = std::make_unique<Handshake>(1, 0, fds[1], helloOf(1), &h1);
    Status sa, sb;
    stepBoth(*a, *b, &sa, &sb);
    ASSERT_TRUE(a->connected() && b->connected());
    if (withReason) b->sendFailure("rank 1 hit a CUDA error");
    else b.reset();
    bool p = false;
    Status st = a->progress(&p);
    EXPECT_EQ(st.message(), withReason ? "rank 1 failed: rank 1 hit a CUDA error"
                                       : "rank 1 closed the connection (peer exited or failed)");
  }
}

}  // namespace
}  // namespace strata::ib
