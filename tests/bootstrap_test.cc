// bootstrap_test: the bootstrap on its own, ranks as threads: Bruck's all-gather is exact for
// every rank count (powers of two and not) and for blocks larger than a socket buffer (both ends
// of an exchange send at once); infos reach every rank; barrier; connections opened without
// blocking (startOpen / pollOpen) find the right peer whatever order they arrive in; opening to a
// rank whose listener is gone fails naming it; waiting for a peer process that died fails at once.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

#include "transport/bootstrap.h"
#include "transport/socket.h"

namespace strata {
namespace {

// Joins n thread ranks; returns their bootstraps (index = rank).
std::vector<std::unique_ptr<Bootstrap>> joinAll(int n) {
  strataUniqueId id;
  EXPECT_TRUE(createUniqueId(&id, false).ok());
  std::vector<std::unique_ptr<Bootstrap>> bs(static_cast<size_t>(n));
  std::vector<Status> st(static_cast<size_t>(n));
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r)
    th.emplace_back([&, r] {
      RankInfo self;
      self.pid = 1000 + r;  // checked below: every rank sees every other's info
      self.hostHash = 77;
      st[r] = Bootstrap::join(id, r, n, self, 30, &bs[r]);
    });
  for (auto& t : th) t.join();
  for (int r = 0; r < n; ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].message();
  return bs;
}

template <typename Fn>
void onAll(int n, Fn&& fn) {
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r) th.emplace_back([&, r] { fn(r); });
  for (auto& t : th) t.join();
}

class BruckAllGather : public ::testing::TestWithParam<int> {};

TEST_P(BruckAllGather, ExactForSmallAndLargeBlocks) {
  const int n = GetParam();
  auto bs = joinAll(n);
  ASSERT_EQ(static_cast<int>(bs.size()), n);
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(bs[r]);
    for (int p = 0; p < n; ++p) EXPECT_EQ(bs[r]->infos()[p].pid, 1000 + p) << "rank " << r << " info of " << p;
  }
  for (size_t bytes : {size_t{1}, size_t{3}, size_t{4096}, size_t{1} << 20}) {
    std::vector<std::vector<unsigned char>> out(static_cast<size_t>(n));
    std::vector<Status> st(static_cast<size_t>(n));
    onAll(n, [&](int r) {
      std::vector<unsigned char> mine(bytes);
      for (size_t i = 0; i < bytes; ++i) mine[i] = static_cast<unsigned char>(r * 31 + i * 7);
      out[r].resize(bytes * static_cast<size_t>(n));
      st[r] = bs[r]->allGather(mine.data(), out[r].data(), bytes);
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(st[r].ok()) << st[r].message();
      size_t wrong = 0;
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < bytes; ++i)
          wrong += out[r][static_cast<size_t>(p) * bytes + i] != static_cast<unsigned char>(p * 31 + i * 7);
      EXPECT_EQ(wrong, 0u) << "rank " << r << ", " << bytes << " bytes per rank";
    }
  }
  std::vector<Status> st(static_cast<size_t>(n));
  onAll(n, [&](int r) { st[r] = bs[r]->barrier(); });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(st[r].ok()) << st[r].message();
}

INSTANTIATE_TEST_SUITE_P(Ranks, BruckAllGather, ::testing::Values(1, 2, 3, 5, 7, 8, 13));

TEST(BootstrapOpen, ConnectionsFindTheirPeerInAnyOrder) {
  // Rank 0 accepts (kData, 0..2) from ranks 1 and 2; they connect in reverse index order and
  // write their (rank, index); rank 0 asks for them in yet another order.
  const int n = 3;
  auto bs = joinAll(n);
  std::vector<int> got;
  std::vector<Status> st(static_cast<size_t>(n));
  onAll(n, [&](int r) {
    if (r == 0) {
      for (int peer : {2, 1})
        for (int idx : {1, 0, 2}) {
          Bootstrap::Opening o;
          Status s = bs[0]->startOpen(peer, Bootstrap::kData, idx, -1, false, &o);
          int fd = -1;
          const double deadline = net::nowSec() + 20;
          while (s.ok() && fd < 0 && net::nowSec() < deadline) {
            s = bs[0]->pollOpen(&o, &fd);
            if (fd < 0) usleep(1000);
          }
          if (!s.ok() || fd < 0) {
            st[0] = s.ok() ? Status(strataTimeout, "no connection") : s;
            return;
          }
          int msg[2] = {-1, -1};
          s = net::recvAll(fd, msg, sizeof(msg), net::nowSec() + 10, nullptr, "peer");
          ::close(fd);
          if (!s.ok()) {
            st[0] = s;
            return;
          }
          got.push_back(msg[0] * 10 + msg[1]);
          EXPECT_EQ(msg[0], peer);
          EXPECT_EQ(msg[1], idx);
        }
      return;
    }
    for (int idx : {2, 1, 0}) {
      Bootstrap::Opening o;
      Status s = bs[r]->startOpen(0, Bootstrap::kData, idx, -1, true, &o);
      int fd = -1;
      const double deadline = net::nowSec() + 20;
      while (s.ok() && fd < 0 && net::nowSec() < deadline) {
        s = bs[r]->pollOpen(&o, &fd);
        if (fd < 0) usleep(1000);
      }
      if (!s.ok() || fd < 0) {
        st[r] = s.ok() ? Status(strataTimeout, "not connected") : s;
        return;
      }
      const int msg[2] = {r, idx};
      st[r] = net::sendAll(fd, msg, sizeof(msg), net::nowSec() + 10, nullptr, "rank 0");
      ::close(fd);
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].message();
  EXPECT_EQ(got, (std::vector<int>{21, 20, 22, 11, 10, 12}));
}

TEST(BootstrapOpen, ARankWhoseListenerIsGoneFailsNamed) {
  auto bs = joinAll(2);
  bs[1].reset();  // rank 1's listener closes: it "exited"
  Bootstrap::Opening o;
  Status s = bs[0]->startOpen(1, Bootstrap::kData, 0, -1, true, &o);
  int fd = -1;
  const double deadline = net::nowSec() + 10;
  while (s.ok() && fd < 0 && net::nowSec() < deadline) {
    s = bs[0]->pollOpen(&o, &fd);
    if (fd < 0) usleep(1000);
  }
  ASSERT_FALSE(s.ok()) << "connected to a rank that is gone";
  EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.message();
  EXPECT_EQ(s.code(), strataRemoteError);
}

// Waiting for a connection from a peer process of this machine: one whose process is gone fails
// at once, naming it (a member killed during a split, between the exchange and the new
// communicator's set-up); one that lives is waited for until the deadline.
TEST(BootstrapAccept, PeerProcessThatDiedIsAnErrorNotAWait) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);  // reaped: its pid names no process
  for (const int peerPid : {static_cast<int>(child), static_cast<int>(getppid())}) {
    std::vector<RankInfo> infos(2);
    int lfd = -1;
    ASSERT_TRUE(Bootstrap::openListener(&lfd, &infos[0]).ok());
    infos[0].rank = 0, infos[0].pid = getpid(), infos[0].hostHash = 5, infos[0].processHash = 1;
    infos[1].rank = 1, infos[1].pid = peerPid, infos[1].hostHash = 5, infos[1].processHash = 2;
    uint8_t secret[16] = {};
    std::unique_ptr<Bootstrap> b;
    ASSERT_TRUE(Bootstrap::fromInfos(lfd, 0, infos, 42, secret, 30, &b).ok());
    int fd = -1;
    const double start = net::nowSec();
    Status st = b->acceptPeer(1, Bootstrap::kRing, 0, start + 1.0, &fd);
    const double took = net::nowSec() - start;
    EXPECT_FALSE(st.ok());
    if (peerPid == child) {
      EXPECT_LT(took, 0.5);
      EXPECT_NE(st.message().find("rank 1 died (process " + std::to_string(child) + " is gone)"), std::string::npos)
          << st.message();
    } else {
      EXPECT_EQ(st.code(), strataTimeout) << st.message();
      EXPECT_GE(took, 0.9);
    }
  }
}

}  // namespace
}  // namespace strata
