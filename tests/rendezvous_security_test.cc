// rendezvous_security_test.cc: an unfriendly neighbour on the same host against the rendezvous.
// Strangers that connect and say nothing, send half a message, claim 2^31-1 ranks, know every
// public value of a torchrun-style launch but not the user's secret, or write garbage to a rank's
// listener after init: the job must still form within its join timeout and compute correct
// results, and the root must stay alive. Real sockets on 127.0.0.1; ranks are threads, or forked
// processes for the launcher-variable cases.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "collectives/comm.h"
#include "collectives/launch_env.h"
#include "strata/strata.h"
#include "support/free_port.h"
#include "support/thread_ranks.h"
#include "transport/bootstrap.h"
#include "transport/bootstrap_wire.h"
#include "transport/secret.h"
#include "transport/socket.h"

using namespace strata;
using namespace strata::testing;

namespace {

// The join protocol's messages (a stranger can read the source).
using wire::JoinMsg;
using wire::JoinReply;
using wire::kJoinMagic;

/// Opens up to n connections that say nothing; stops at the first that fails (e.g. once a
/// one-shot root has served its round and closed its listener).
std::vector<int> connectMany(uint32_t addr, uint16_t port, int n) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    int fd = -1;
    if (!net::connectTo(addr, port, net::nowSec() + 0.5, &fd).ok()) break;
    fds.push_back(fd);
  }
  return fds;
}

void closeAll(std::vector<int>* fds) {
  for (int& fd : *fds) net::closeFd(&fd);
  fds->clear();
}

/// Sends a join message as a stranger would; returns the root's answer (status, message).
std::pair<int, std::string> strangerJoin(const UniqueIdData& d, int rank, int nranks) {
  int fd = -1;
  if (!net::connectTo(d.rootAddr, d.rootPort, net::nowSec() + 5, &fd).ok()) return {-1, "cannot connect"};
  JoinMsg m;
  memset(static_cast<void*>(&m), 0, sizeof(m));
  m.magic = kJoinMagic;
  memcpy(m.secret, d.secret, 16);
  m.rank = rank;
  m.nranks = nranks;
  m.info.rank = rank;
  m.info.addr = htonl(INADDR_LOOPBACK);
  m.info.port = htons(9);
  JoinReply r{};
  std::pair<int, std::string> out{-2, ""};
  if (net::sendAll(fd, &m, sizeof(m), net::nowSec() + 5, nullptr, "root").ok() &&
      net::recvAll(fd, &r, sizeof(r), net::nowSec() + 10, nullptr, "root").ok()) {
    out.first = r.status;
    out.second.resize(std::min<uint32_t>(r.msgLen, 4096));
    (void)net::recvAll(fd, out.second.data(), out.second.size(), net::nowSec() + 2, nullptr, "root");
  }
  ::close(fd);
  return out;
}

/// n thread ranks join `id`; each runs an all-reduce and checks it. Returns the seconds it took.
double joinAndCheck(const strataUniqueId& id, int n) {
  double start = net::nowSec();
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      strataComm_t c = nullptr;
      ASSERT_EQ(strataCommInitRank(&c, n, id, r), strataSuccess) << strataGetLastError(nullptr);
      std::vector<float> buf(1000, static_cast<float>(r + 1));
      ASSERT_EQ(strataAllReduce(buf.data(), buf.data(), buf.size(), strataFloat32, strataSum, c), strataSuccess);
      for (float v : buf) ASSERT_EQ(v, n * (n + 1) / 2.0f);
      strataCommDestroy(c);
    });
  for (auto& t : ts) t.join();
  return net::nowSec() - start;
}

TEST(RootListener, TwoHundredSilentConnectionsDoNotStopAThreeRankJoin) {
  ScopedEnv join("STRATA_JOIN_TIMEOUT", "20");
  strataUniqueId id;
  ASSERT_EQ(strataGetUniqueId(&id), strataSuccess);
  UniqueIdData d = decodeUniqueId(id);
  std::vector<int> silent = connectMany(d.rootAddr, d.rootPort, 200);
  ASSERT_EQ(silent.size(), 200u);
  // More keep arriving while the ranks join.
  std::vector<int> more;
  std::thread flood([&] { more = connectMany(d.rootAddr, d.rootPort, 100); });
  double took = joinAndCheck(id, 3);
  flood.join();
  EXPECT_LT(took, 10) << "the join waited on silent strangers";
  closeAll(&silent);
  closeAll(&more);
}

TEST(RootListener, HalfSentJoinMessagesDoNotStopTheJoin) {
  ScopedEnv join("STRATA_JOIN_TIMEOUT", "20");
  strataUniqueId id;
  ASSERT_EQ(strataGetUniqueId(&id), strataSuccess);
  UniqueIdData d = decodeUniqueId(id);
  std::vector<int> half = connectMany(d.rootAddr, d.rootPort, 20);
  JoinMsg m{};
  m.magic = kJoinMagic;
  memcpy(m.secret, d.secret, 16);  // even with the secret: half a message is not a join
  for (size_t i = 0; i < half.size(); ++i)
    ASSERT_TRUE(net::sendAll(half[i], &m, 1 + (i * 37) % (sizeof(m) - 1), net::nowSec() + 5, nullptr, "root").ok());
  double took = joinAndCheck(id, 3);
  // Well below the 5 s a half-sent message is given: nobody waited on them.
  EXPECT_LT(took, 4) << "the join waited on half-sent messages";
  closeAll(&half);
}

TEST(RootListener, JoinClaimingTwoToTheThirtyOneRanksIsRefusedAndTheRootLives) {
  ScopedEnv join("STRATA_JOIN_TIMEOUT", "20");
  strataUniqueId id;
  ASSERT_EQ(strataGetUniqueId(&id), strataSuccess);
  UniqueIdData d = decodeUniqueId(id);
  auto [status, msg] = strangerJoin(d, 0, 0x7fffffff);
  EXPECT_EQ(status, strataInvalidArgument) << msg;
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
  auto [st2, msg2] = strangerJoin(d, 5, 3);  // rank beyond the count
  EXPECT_EQ(st2, strataInvalidArgument) << msg2;
  joinAndCheck(id, 3);
}

TEST(RankListener, GarbageAfterInitIsDroppedAndTheJobContinues) {
  ScopedEnv transport("STRATA_TRANSPORT", "tcp");  // data sockets open through the listeners
  const int n = 3;
  std::vector<strataComm_t> comms(n);
  ASSERT_EQ(strataCommInitAll(comms.data(), n), strataSuccess) << strataGetLastError(nullptr);
  std::vector<int> strangers;
  auto attack = [&] {
    for (int r = 0; r < n; ++r) {
      const RankInfo& me = static_cast<Comm*>(comms[r])->bootstrap().infos()[r];
      std::vector<int> fds = connectMany(me.addr, me.port, 80);  // silent
      for (size_t i = 0; i < fds.size(); i += 4) {             // and some talk nonsense
        std::vector<uint8_t> junk(1 + (i * 13) % 200, static_cast<uint8_t>(0xa5 + i));
        (void)net::sendAll(fds[i], junk.data(), junk.size(), net::nowSec() + 2, nullptr, "rank");
        if (i % 8 == 0) net::closeFd(&fds[i]);
      }
      for (int fd : fds)
        if (fd >= 0) strangers.push_back(fd);
    }
  };
  attack();
  auto run = [&](int iters) {
    std::vector<std::thread> ts;
    for (int r = 0; r < n; ++r)
      ts.emplace_back([&, r] {
        for (int it = 0; it < iters; ++it) {
          std::vector<float> buf(100000, static_cast<float>(r + it));
          ASSERT_EQ(strataAllReduce(buf.data(), buf.data(), buf.size(), strataFloat32, strataSum, comms[r]),
                    strataSuccess)
              << strataGetLastError(comms[r]);
          for (float v : buf) ASSERT_EQ(v, static_cast<float>(n * (n - 1) / 2 + n * it));
        }
      });
    for (auto& t : ts) t.join();
  };
  run(3);
  attack();  // again once the data connections exist
  run(3);
  closeAll(&strangers);
  for (strataComm_t c : comms) strataCommDestroy(c);
}

// A rank drops a connection whose hello does not follow within seconds of its accept. A
// connection object that is asked for long before its first use (a peer's kind, say) must not
// connect until then. Rank 0 asks for all of its connections; rank 3 accepts everything waiting
// on its listener while it serves rank 1, and again, past the drop delay, while it serves rank 2;
// only then does rank 0 send to rank 3. Had rank 0 connected when asked, rank 3 would have
// dropped that silent connection, and rank 0's send would fail.
TEST(RankListener, ConnectionsAskedForLongBeforeFirstUseAreNotDropped) {
  ScopedEnv transport("STRATA_TRANSPORT", "tcp");
  ScopedEnv timeout("STRATA_TIMEOUT", "10");
  const int n = 4;
  std::vector<strataComm_t> comms(n);
  ASSERT_EQ(strataCommInitAll(comms.data(), n), strataSuccess) << strataGetLastError(nullptr);
  for (int p = 1; p < n; ++p) ASSERT_NE(static_cast<Comm*>(comms[0])->conn(p), nullptr);
  auto exchange = [&](int r, int peer) {
    std::vector<float> out(1000, static_cast<float>(r)), in(1000, -1.0f);
    ASSERT_EQ(strataGroupStart(), strataSuccess);
    ASSERT_EQ(strataSend(out.data(), out.size(), strataFloat32, peer, comms[r]), strataSuccess);
    ASSERT_EQ(strataRecv(in.data(), in.size(), strataFloat32, peer, comms[r]), strataSuccess);
    ASSERT_EQ(strataGroupEnd(), strataSuccess) << "rank " << r << ": " << strataGetLastError(comms[r]);
    for (float v : in) ASSERT_EQ(v, static_cast<float>(peer));
  };
  auto pair = [&](int a, int b) {
    std::thread t([&] { exchange(b, a); });
    exchange(a, b);
    t.join();
  };
  pair(1, 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(5500));  // past the drop delay (5 s)
  pair(2, 3);
  pair(0, 3);
  for (strataComm_t c : comms) strataCommDestroy(c);
}

TEST(Secret, Sha256AndHmacMatchKnownVectors) {
  auto hex = [](const uint8_t* p, size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s += fmt::format("{:02x}", p[i]);
    return s;
  };
  uint8_t out[32];
  sha256("abc", 3, out);
  EXPECT_EQ(hex(out, 32), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string longer(1000, 'a');
  sha256(longer.data(), 56, out);  // padding spills into a second block
  EXPECT_EQ(hex(out, 32), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  hmacSha256("Jefe", "what do ya want for nothing?", out);
  EXPECT_EQ(hex(out, 32), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(Secret, FileIsCreatedOnceWithPrivateModeWhenRanksRace) {
  char dir[] = "/tmp/strata_secret_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/secret";
  std::vector<std::string> got(16);
  std::vector<std::thread> ts;
  for (int i = 0; i < 16; ++i)
    ts.emplace_back([&, i] { EXPECT_TRUE(readOrCreateSecretFile(path, &got[i]).ok()); });
  for (auto& t : ts) t.join();
  EXPECT_GE(got[0].size(), 32u);
  for (const std::string& s : got) EXPECT_EQ(s, got[0]);
  struct stat sb {};
  ASSERT_EQ(stat(path.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0600u);
  // Only the secret file is left (no temporaries).
  int entries = 0;
  std::string ls = std::string("ls -A ") + dir + " | wc -l";
  FILE* p = popen(ls.c_str(), "r");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(fscanf(p, "%d", &entries), 1);
  pclose(p);
  EXPECT_EQ(entries, 1);
  // A file others can read is refused.
  chmod(path.c_str(), 0644);
  std::string s;
  Status st = readOrCreateSecretFile(path, &s);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("chmod 600"), std::string::npos) << st.message();
  unlink(path.c_str());
  rmdir(dir);
}

// torchrun-style launch in forked processes. Every rank sees RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT; a stranger sees the same public values (but not STRATA_SECRET).
class TorchrunJob {
 public:
  explicit TorchrunJob(int n) : n_(n), port_(std::to_string(freePort())) {}
  void setEnv(int rank, const char* secret) {
    setenv("RANK", std::to_string(rank).c_str(), 1);
    setenv("WORLD_SIZE", std::to_string(n_).c_str(), 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", port_.c_str(), 1);
    setenv("STRATA_JOIN_TIMEOUT", "20", 1);
    unsetenv("STRATA_UNIQUE_ID");
    unsetenv("STRATA_SECRET_FILE");
    if (secret) setenv("STRATA_SECRET", secret, 1);
    else unsetenv("STRATA_SECRET");
    (void)reloadConfig();
  }
  /// Forks rank r: init from the environment, an all-reduce, exit 0 when its result is right.
  pid_t start(int rank, const char* secret) {
    pid_t pid = fork();
    if (pid == 0) {
      alarm(60);
      setEnv(rank, secret);
      strataComm_t c = nullptr;
      if (strataCommInitFromEnv(&c, nullptr) != strataSuccess) {
        fprintf(stderr, "rank %d: %s\n", rank, strataGetLastError(nullptr));
        _exit(11);
      }
      std::vector<float> buf(1000, static_cast<float>(rank + 1));
      if (strataAllReduce(buf.data(), buf.data(), buf.size(), strataFloat32, strataSum, c) != strataSuccess) _exit(12);
      for (float v : buf)
        if (v != n_ * (n_ + 1) / 2.0f) _exit(13);
      strataCommDestroy(c);
      _exit(0);
    }
    pids_.push_back(pid);
    return pid;
  }
  /// The id a stranger computes from the public values (as rank `rank`, which serves no root).
  UniqueIdData strangersId(int rank) {
    setEnv(rank, nullptr);
    LaunchInfo li;
    EXPECT_TRUE(readLaunchEnv(&li).ok());
    for (const char* v : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "STRATA_JOIN_TIMEOUT"}) unsetenv(v);
    (void)reloadConfig();
    return decodeUniqueId(li.id);
  }
  std::vector<int> wait() {
    std::vector<int> codes;
    for (pid_t p : pids_) {
      int st = 0;
      waitpid(p, &st, 0);
      codes.push_back(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
    return codes;
  }
  /// Waits until rank 0's root listens.
  void waitForRoot(const UniqueIdData& d) {
    int fd = -1;
    ASSERT_TRUE(net::connectTo(d.rootAddr, d.rootPort, net::nowSec() + 20, &fd).ok());
    ::close(fd);
  }

 private:
  int n_;
  std::string port_;
  std::vector<pid_t> pids_;
};

TEST(Torchrun, StrangerWithThePublicValuesButNotTheSecretIsRefused) {
  TorchrunJob job(3);
  const char* secret = "correct horse battery staple";
  job.start(0, secret);
  job.start(1, secret);
  UniqueIdData d = job.strangersId(2);
  job.waitForRoot(d);
  // The stranger claims rank 2 before the real one arrives.
  auto [status, msg] = strangerJoin(d, 2, 3);
  EXPECT_EQ(status, strataInvalidArgument) << msg;
  EXPECT_NE(msg.find("secret"), std::string::npos) << msg;
  job.start(2, secret);
  for (int code : job.wait()) EXPECT_EQ(code, 0);
}

TEST(Torchrun, WithoutASecretTheDerivedOneIsPublicButHugeRankCountsAreStillRefused) {
  TorchrunJob job(2);
  job.start(0, nullptr);
  UniqueIdData d = job.strangersId(1);
  job.waitForRoot(d);
  // Without STRATA_SECRET a stranger can compute the secret (hence the warning rank 0 logs), but
  // a join claiming 2^31-1 ranks, or another rank count than the job's, is refused.
  auto [status, msg] = strangerJoin(d, 1, 0x7fffffff);
  EXPECT_EQ(status, strataInvalidArgument) << msg;
  auto [st2, msg2] = strangerJoin(d, 1, 5);
  EXPECT_EQ(st2, strataInvalidArgument) << msg2;
  EXPECT_NE(msg2.find("this job has 2"), std::string::npos) << msg2;
  job.start(1, nullptr);
  for (int code : job.wait()) EXPECT_EQ(code, 0);
}

TEST(Torchrun, TheUserSecretChangesTheDerivedSecret) {
  TorchrunJob job(4);
  UniqueIdData open = job.strangersId(1);
  job.setEnv(1, "s3cret");
  LaunchInfo li;
  ASSERT_TRUE(readLaunchEnv(&li).ok());
  UniqueIdData keyed = decodeUniqueId(li.id);
  EXPECT_NE(memcmp(open.secret, keyed.secret, 16), 0);
  EXPECT_EQ(open.rootPort, keyed.rootPort);
  for (const char* v : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "STRATA_JOIN_TIMEOUT", "STRATA_SECRET"})
    unsetenv(v);
  (void)reloadConfig();
}

}  // namespace
