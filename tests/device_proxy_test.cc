// device_proxy_test.cc: the CUDA path's network proxy (collectives/device_proxy.h), emulated on
// the host. Thread ranks sit on virtual nodes (a topology file's placement) or all talk tcp
// (STRATA_TRANSPORT=tcp); their FIFO arenas are host memory mapped only within a node, and peers
// on other nodes go through the proxy over real tcp (or UCX) connections (tests/support/
// device_proxy_emulation.h). Every device collective and grouped send/recv runs through the
// emulated kernels (kernels/device/dev_algos.h) for n = 2, 3, 4 with tiny slots (sizes spanning
// many slots, consecutive operations and several launches on the same connections) and is checked
// exactly. A peer that dies or aborts mid-transfer makes the others fail well within the timeout;
// a peer that leaves in order (goodbye) is no failure until this rank's device work sends to it.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kernels/element_value.h"
#include "kernels/host_reduce.h"
#include "support/device_proxy_emulation.h"
#include "support/rank_order_inputs.h"
#include "support/thread_ranks.h"

namespace strata::testing {
namespace {

using kernels::RedKind;
using Buf = std::vector<unsigned char>;
using Clock = std::chrono::steady_clock;

/// A topology file of virtual nodes: rank r on node placement[r] (one rail).
std::string writeTopology(const std::vector<int>& placement) {
  char path[] = "/tmp/strata-proxy-test-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return "";
  int nodes = 0;
  for (int x : placement) nodes = std::max(nodes, x + 1);
  std::string s = "{\"version\": 1, \"rails\": 1, \"nodes\": [";
  for (int i = 0; i < nodes; ++i)
    s += (i ? ", " : "") + std::string("{\"hostname\": \"pnode") + std::to_string(i) + "\"}";
  s += "], \"placement\": [";
  for (size_t r = 0; r < placement.size(); ++r) s += (r ? ", " : "") + std::to_string(placement[r]);
  s += "]}\n";
  const bool ok = write(fd, s.data(), s.size()) == static_cast<ssize_t>(s.size());
  close(fd);
  return ok ? path : "";
}

/// n thread ranks (communicators from strataCommInitAll) with emulated device sides.
class ProxyCluster {
 public:
  /// `placement` empty: no topology file (the caller sets STRATA_TRANSPORT=tcp).
  ProxyCluster(int n, const std::vector<int>& placement, int channels, uint64_t slotBytes) : n_(n) {
    std::string file;
    std::unique_ptr<ScopedEnv> topo;
    if (!placement.empty()) {
      file = writeTopology(placement);
      topo = std::make_unique<ScopedEnv>("STRATA_TOPO_FILE", file);
    }
    comms_.resize(static_cast<size_t>(n));
    const strataResult_t made = strataCommInitAll(comms_.data(), n);
    topo.reset();
    if (!file.empty()) unlink(file.c_str());
    EXPECT_EQ(made, strataSuccess) << strataGetLastError(nullptr);
    if (made != strataSuccess) {
      comms_.clear();
      return;
    }
    for (int r = 0; r < n; ++r) ranks_.push_back(std::make_unique<EmulatedDeviceRank>());
    std::vector<Status> st(static_cast<size_t>(n));
    std::vector<std::thread> t;
    for (int r = 0; r < n; ++r)
      t.emplace_back([&, r] {
        st[r] = setupEmulatedDevice(*static_cast<Comm*>(comms_[r]), channels, slotBytes, 256, ranks_[r].get());
      });
    for (auto& x : t) x.join();
    ok_ = true;
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].message();
      ok_ = ok_ && st[r].ok();
    }
  }
  ~ProxyCluster() {
    // Proxies say goodbye to each other concurrently (no rank may take that for a failure), then
    // the communicators go.
    std::vector<bool> failedBefore;
    for (auto& d : ranks_) failedBefore.push_back(!d->proxyFailure().ok());
    std::vector<std::thread> t;
    for (auto& d : ranks_) t.emplace_back([&d] { d->proxy.reset(); });
    for (auto& x : t) x.join();
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (failedBefore[r]) continue;
      EXPECT_TRUE(ranks_[r]->proxyFailure().ok())
          << "rank " << r << " at teardown: " << ranks_[r]->proxyFailure().message();
    }
    ranks_.clear();
    for (strataComm_t c : comms_) strataCommDestroy(c);
  }
  bool ok() const { return ok_; }
  int n() const { return n_; }
  EmulatedDeviceRank& rank(int r) { return *ranks_[static_cast<size_t>(r)]; }
  DevPlanParams params(int r) const {
    DevPlanParams p = ranks_[static_cast<size_t>(r)]->params();
    p.algo = algo;
    p.deterministic = deterministic;
    return p;
  }
  /// Every rank's launches, ranks concurrently. False if any rank gave up.
  bool run(std::vector<std::vector<DevLaunch>>& launches) {
    std::atomic<bool> all{true};
    std::vector<std::thread> t;
    for (int r = 0; r < n_; ++r)
      t.emplace_back([&, r] {
        if (!runEmulatedLaunches(*ranks_[r], launches[r])) all = false;
      });
    for (auto& x : t) x.join();
    return all;
  }
  /// No proxy reported a failure.
  void expectHealthy() {
    for (int r = 0; r < n_; ++r) {
      EXPECT_TRUE(rank(r).proxyFailure().ok()) << "rank " << r << ": " << rank(r).proxyFailure().message();
      EXPECT_EQ(__atomic_load_n(&rank(r).abort, __ATOMIC_ACQUIRE), 0u) << "rank " << r;
    }
  }
  std::string algo = "auto";
  bool deterministic = false;  ///< plan deterministic mode's reductions (the rank-order tree)

 private:
  int n_;
  bool ok_ = false;
  std::vector<strataComm_t> comms_;
  std::vector<std::unique_ptr<EmulatedDeviceRank>> ranks_;
};

double inputValue(RedKind op, int rank, size_t i) {
  if (op == RedKind::Max || op == RedKind::Min) return double((rank * 31 + i * 17) % 7) - 3;
  return double((rank * 7 + i * 13) % 5) - 2;
}

Buf makeInput(strataDataType_t t, RedKind op, int rank, size_t count, size_t salt = 0) {
  Buf b(count * kernels::dtypeSize(t) + 16);
  for (size_t i = 0; i < count; ++i) kernels::storeElement(t, b.data(), i, inputValue(op, rank, i + salt));
  return b;
}

Buf reference(strataDataType_t t, RedKind op, const std::vector<Buf>& inputs, size_t count) {
  const size_t es = kernels::dtypeSize(t);
  Buf acc(count * es + 16);
  std::memcpy(acc.data(), inputs[0].data(), count * es);
  for (size_t r = 1; r < inputs.size(); ++r) kernels::reduce(acc.data(), acc.data(), inputs[r].data(), count, t, op);
  return acc;
}

/// One collective on every rank (inputs `in`, outputs of `outElems`); returns the outputs.
std::vector<Buf> runColl(ProxyCluster& c, CollType coll, strataDataType_t t, RedKind op, size_t count, int root,
                         std::vector<Buf>& in, size_t outElems, bool inPlace = false) {
  const int n = c.n();
  std::vector<Buf> out(n, Buf(outElems * kernels::dtypeSize(t) + 16, 0xcd));
  std::vector<std::vector<DevLaunch>> launches(n);
  for (int r = 0; r < n; ++r) {
    DevCall call;
    call.coll = coll;
    call.send = inPlace ? out[r].data() : in[r].data();
    call.recv = out[r].data();
    if (inPlace) std::memcpy(out[r].data(), in[r].data(), std::min(in[r].size(), out[r].size()));
    call.count = count;
    call.dtype = t;
    call.op = op;
    call.root = root;
    EXPECT_TRUE(planDeviceCollective(c.params(r), call, &launches[r]).ok());
    for (const DevLaunch& l : launches[r]) EXPECT_EQ(l.work.proto, dev::Proto::Simple) << "proxied peers: Simple only";
  }
  EXPECT_TRUE(c.run(launches)) << collName(coll) << " count " << count;
  return out;
}

void checkAllReduce(ProxyCluster& c, strataDataType_t t, RedKind op, size_t count, bool inPlace) {
  const int n = c.n();
  std::vector<Buf> in(n);
  for (int r = 0; r < n; ++r) in[r] = makeInput(t, op, r, count);
  auto out = runColl(c, CollType::AllReduce, t, op, count, 0, in, count, inPlace);
  const Buf want = reference(t, op, in, count);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(0, std::memcmp(want.data(), out[r].data(), count * kernels::dtypeSize(t)))
        << "all-reduce rank " << r << " " << kernels::dtypeName(t) << " count " << count << " algo " << c.algo;
}

void checkRest(ProxyCluster& c, size_t count) {
  const int n = c.n();
  const strataDataType_t t = strataFloat32;
  const size_t es = 4;
  std::vector<Buf> in(n);
  // reduce-scatter: block r of the sum
  for (int r = 0; r < n; ++r) in[r] = makeInput(t, RedKind::Sum, r, count * n);
  auto out = runColl(c, CollType::ReduceScatter, t, RedKind::Sum, count, 0, in, count);
  const Buf all = reference(t, RedKind::Sum, in, count * n);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(0, std::memcmp(all.data() + r * count * es, out[r].data(), count * es)) << "reduce-scatter rank " << r;
  // all-gather
  for (int r = 0; r < n; ++r) in[r] = makeInput(t, RedKind::Sum, r, count, 1000 * r);
  out = runColl(c, CollType::AllGather, t, RedKind::Sum, count, 0, in, count * n);
  for (int r = 0; r < n; ++r)
    for (int q = 0; q < n; ++q)
      ASSERT_EQ(0, std::memcmp(in[q].data(), out[r].data() + q * count * es, count * es))
          << "all-gather rank " << r << " block " << q;
  // broadcast and reduce from every root
  for (int root = 0; root < n; ++root) {
    out = runColl(c, CollType::Broadcast, t, RedKind::Sum, count, root, in, count);
    for (int r = 0; r < n; ++r)
      ASSERT_EQ(0, std::memcmp(in[root].data(), out[r].data(), count * es))
          << "broadcast root " << root << " rank " << r;
    std::vector<Buf> rin(n);
    for (int r = 0; r < n; ++r) rin[r] = makeInput(t, RedKind::Max, r, count);
    out = runColl(c, CollType::Reduce, t, RedKind::Max, count, root, rin, count);
    const Buf want = reference(t, RedKind::Max, rin, count);
    ASSERT_EQ(0, std::memcmp(want.data(), out[root].data(), count * es)) << "reduce root " << root;
  }
  // all-to-all (send/recv entries, one launch)
  for (int r = 0; r < n; ++r) {
    in[r] = Buf(count * n * es + 16);
    for (size_t i = 0; i < count * n; ++i) kernels::storeElement(strataInt32, in[r].data(), i, double(r * 100000 + i));
  }
  out = runColl(c, CollType::AllToAll, strataInt32, RedKind::Sum, count, 0, in, count * n);
  for (int r = 0; r < n; ++r)
    for (int q = 0; q < n; ++q)
      ASSERT_EQ(0, std::memcmp(in[q].data() + r * count * es, out[r].data() + q * count * es, count * es))
          << "all-to-all rank " << r << " from " << q;
}

/// Grouped send/recv: two messages to the right neighbour (two launches: the second waits for
/// the first on the same connection), a message to self, and from the left.
void checkSendRecv(ProxyCluster& c, size_t bytes1, size_t bytes2) {
  const int n = c.n();
  std::vector<Buf> a(n), b(n), ra(n, Buf(bytes1)), rb(n, Buf(bytes2)), self(n), selfOut(n, Buf(64));
  std::vector<std::vector<DevLaunch>> launches(n);
  for (int r = 0; r < n; ++r) {
    a[r] = Buf(bytes1);
    b[r] = Buf(bytes2);
    self[r] = Buf(64);
    for (size_t i = 0; i < bytes1; ++i) a[r][i] = static_cast<unsigned char>(r * 13 + i);
    for (size_t i = 0; i < bytes2; ++i) b[r][i] = static_cast<unsigned char>(200 + r + i * 7);
    for (size_t i = 0; i < 64; ++i) self[r][i] = static_cast<unsigned char>(r + 3 * i);
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    std::vector<DevP2P> ops = {{true, a[r].data(), bytes1, right}, {false, ra[r].data(), bytes1, left},
                               {true, b[r].data(), bytes2, right}, {false, rb[r].data(), bytes2, left},
                               {true, self[r].data(), 64, r},      {false, selfOut[r].data(), 64, r}};
    ASSERT_TRUE(planDeviceP2P(c.params(r), ops, &launches[r]).ok());
    ASSERT_EQ(launches[r].size(), 2u);
  }
  ASSERT_TRUE(c.run(launches));
  for (int r = 0; r < n; ++r) {
    const int left = (r + n - 1) % n;
    EXPECT_EQ(a[left], ra[r]) << "rank " << r;
    EXPECT_EQ(b[left], rb[r]) << "rank " << r;
    EXPECT_EQ(self[r], selfOut[r]) << "rank " << r;
  }
}

struct Layout {
  const char* name;
  int n;
  std::vector<int> placement;  ///< empty: every peer proxied (STRATA_TRANSPORT=tcp)
  const char* transport;       ///< STRATA_TRANSPORT, or null
};

#ifdef STRATA_RDMA_LAYOUTS
// device_proxy_rdma_test (label rdma): the proxy's wire over a real verbs stack, raw verbs and UCX
// over verbs (CI: soft-RoCE, scripts/rdma_vm.sh); the tests after these layouts are not built.
const Layout kLayouts[] = {
    {"n2_two_nodes_ib", 2, {0, 1}, "ib"},
    {"n4_nodes_2_2_ib", 4, {0, 0, 1, 1}, "ib"},
#ifdef STRATA_HAVE_UCX
    {"n3_nodes_2_1_ucx", 3, {0, 0, 1}, "ucx"},
#endif
};
#else
const Layout kLayouts[] = {
    {"n2_two_nodes", 2, {0, 1}, nullptr},
    {"n3_nodes_2_1", 3, {0, 0, 1}, nullptr},
    {"n4_nodes_2_2", 4, {0, 0, 1, 1}, nullptr},
    {"n4_round_robin", 4, {0, 1, 0, 1}, nullptr},
    {"n3_tcp_everywhere", 3, {}, "tcp"},
#ifdef STRATA_HAVE_UCX
    {"n4_nodes_2_2_ucx", 4, {0, 0, 1, 1}, "ucx"},  // the proxy's wire over UCX (loopback) instead of tcp
#endif
};
#endif

class DeviceProxyEmulation : public ::testing::TestWithParam<Layout> {
 protected:
  void SetUp() override {
#ifdef STRATA_RDMA_LAYOUTS
    if (!hasRdmaDevice())
      GTEST_SKIP() << "no RDMA device (/sys/class/infiniband is empty): runs on soft-RoCE in CI's rdma stage";
    // UCX 1.13 on soft-RoCE: its verbs transports, and its RoCE destination-GID check off (docs/RDMA.md).
    ucx_.push_back(std::make_unique<ScopedEnv>("UCX_TLS", "rc_verbs,ud_verbs"));
    ucx_.push_back(std::make_unique<ScopedEnv>("UCX_UD_VERBS_ETH_DGID_CHECK", "n"));
#endif
    if (GetParam().transport) tcp_ = std::make_unique<ScopedEnv>("STRATA_TRANSPORT", GetParam().transport);
  }
  void TearDown() override {
    tcp_.reset();
    ucx_.clear();
  }
  static bool hasRdmaDevice() {
    DIR* d = opendir("/sys/class/infiniband");
    if (!d) return false;
    bool any = false;
    while (dirent* e = readdir(d)) any = any || e->d_name[0] != '.';
    closedir(d);
    return any;
  }
  std::unique_ptr<ScopedEnv> tcp_;
  std::vector<std::unique_ptr<ScopedEnv>> ucx_;
};

TEST_P(DeviceProxyEmulation, EveryCollectiveAndSendRecvExact) {
  const Layout& l = GetParam();
  ProxyCluster c(l.n, l.placement, 2, 1024);
  ASSERT_TRUE(c.ok());
  for (int r = 0; r < l.n; ++r) ASSERT_TRUE(c.rank(r).proxy) << "rank " << r << " has no proxy";
  for (const char* algo : {"ring", "tree"}) {
    c.algo = algo;
    for (size_t count : {size_t(1), size_t(777), size_t(20000)})
      checkAllReduce(c, strataFloat32, RedKind::Sum, count, count == 777);
    checkAllReduce(c, strataInt64, RedKind::Max, 5000, false);
    checkAllReduce(c, strataFloat16, RedKind::Sum, 3001, true);
  }
  c.algo = "auto";
  for (size_t count : {size_t(1), size_t(13), size_t(3000)}) checkRest(c, count);
  checkSendRecv(c, 5000, 17);
  checkSendRecv(c, 1, 70000);
  c.expectHealthy();
  for (int r = 0; r < l.n; ++r) {  // the data did go through the proxies
    const ProxyStats s = c.rank(r).proxy->stats();
    EXPECT_GT(s.stepsSent, 0u) << "rank " << r;
    EXPECT_GT(s.bytesReceived, 0u) << "rank " << r;
  }
}

#ifndef STRATA_RDMA_LAYOUTS  // minutes under emulation on soft-RoCE
TEST_P(DeviceProxyEmulation, LargeMessagesManyLaunches) {
  // 4 KiB slots, ~1 MiB per rank over 3 channels: hundreds of steps per channel through 8-slot
  // FIFOs, operation after operation on the same persistent counters.
  const Layout& l = GetParam();
  ProxyCluster c(l.n, l.placement, 3, 4096);
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 3; ++i) {
    checkAllReduce(c, strataFloat32, RedKind::Sum, 262144 + 7 * i, i == 1);
    checkSendRecv(c, 300000 + i, 4096);
  }
  c.algo = "tree";  // 3 channels: trees rooted at ranks 0, 1 and 2, each with its own proxied links
  checkAllReduce(c, strataFloat32, RedKind::Sum, 262144, false);
  c.algo = "auto";
  checkRest(c, 65536);
  c.expectHealthy();
}

TEST_P(DeviceProxyEmulation, DeterministicReductionsGiveTheRankOrderTree) {
  // Deterministic mode's rank tree talks to every peer (channel 0 only when peers are proxied):
  // order-sensitive float inputs must come out as the rank-order tree, bit for bit.
  const Layout& l = GetParam();
  ProxyCluster c(l.n, l.placement, 2, 1024);
  ASSERT_TRUE(c.ok());
  c.deterministic = true;
  const int n = l.n;
  for (strataDataType_t t : {strataFloat32, strataBfloat16}) {
    for (size_t count : {size_t(7), size_t(3000), size_t(70000)}) {
      std::vector<Buf> in(n);
      for (int r = 0; r < n; ++r) in[r] = orderSensitiveInput(t, r, count);
      auto out = runColl(c, CollType::AllReduce, t, RedKind::Sum, count, 0, in, count, count == 3000);
      const Buf want = rankOrderTreeSum(t, in, 0, count);
      for (int r = 0; r < n; ++r)
        EXPECT_EQ(bitMismatches(t, out[r].data(), want.data(), count), 0u)
            << "all-reduce rank " << r << " " << kernels::dtypeName(t) << " count " << count;
      out = runColl(c, CollType::Reduce, t, RedKind::Sum, count, n - 1, in, count);
      EXPECT_EQ(bitMismatches(t, out[n - 1].data(), want.data(), count), 0u)
          << "reduce " << kernels::dtypeName(t) << " count " << count;
    }
    const size_t block = 2001;
    std::vector<Buf> in(n);
    for (int r = 0; r < n; ++r) in[r] = orderSensitiveInput(t, r, block * n);
    auto out = runColl(c, CollType::ReduceScatter, t, RedKind::Sum, block, 0, in, block);
    for (int r = 0; r < n; ++r) {
      const Buf want = rankOrderTreeSum(t, in, block * r, block);
      EXPECT_EQ(bitMismatches(t, out[r].data(), want.data(), block), 0u) << "reduce-scatter rank " << r;
    }
  }
  c.expectHealthy();
}

#endif

INSTANTIATE_TEST_SUITE_P(Layouts, DeviceProxyEmulation, ::testing::ValuesIn(kLayouts),
                         [](const auto& info) { return std::string(info.param.name); });

#ifndef STRATA_RDMA_LAYOUTS

TEST(DeviceProxyPlan, SimpleOnlyWhenAnyPeerIsProxied) {
  DevPlanParams p;
  p.nranks = 4;
  p.proto = "ll";
  p.simpleOnly = true;
  std::vector<DevLaunch> l;
  DevCall small;
  small.count = 16;
  ASSERT_TRUE(planDeviceCollective(p, small, &l).ok());
  EXPECT_EQ(l[0].work.proto, dev::Proto::Simple);
  std::vector<char> buf(64);
  std::vector<DevP2P> ops = {{true, buf.data(), 8, 1}, {false, buf.data() + 8, 8, 3}};
  l.clear();
  ASSERT_TRUE(planDeviceP2P(p, ops, &l).ok());
  for (int i = 0; i < l[0].work.nops; ++i) EXPECT_EQ(l[0].work.ops[i].proto, dev::Proto::Simple);
}

TEST(DeviceProxyLayout, ShadowsForChannelZeroAndRingAndTreePeers) {
  ProxyGeometry g;
  g.rank = 0;
  g.nranks = 8;
  g.nch = 4;
  g.slotBytes = 1024;
  std::vector<uint8_t> proxied = {0, 0, 0, 0, 1, 1, 1, 1};  // ranks 4..7 on the other node
  const ProxyLayout l = ProxyLayout::build(g, proxied);
  for (int p = 0; p < 8; ++p) EXPECT_EQ(l.at(0, p) >= 0, p >= 4) << "channel 0, peer " << p;  // send/recv
  EXPECT_GE(l.at(1, 7), 0);  // ring predecessor on every channel
  EXPECT_LT(l.at(1, 1), 0);  // not proxied
  // Channel 3's tree is rooted at rank 3: rank 0 is virtual rank 5, child of virtual 2 = rank 5.
  EXPECT_GE(l.at(3, 5), 0);
  EXPECT_LT(l.at(3, 6), 0);
  EXPECT_EQ(l.totalBytes(), l.entries * (ProxyLayout::kCtrlBytes + 2 * dev::kSteps * 1024));
}

/// Runs a long all-reduce on every rank while `meanwhile` runs; per rank, whether it completed
/// and when it returned.
struct Outcome {
  bool ok = true;
  Clock::time_point end;
};
std::vector<Outcome> longAllReduce(ProxyCluster& c, const std::function<void()>& meanwhile) {
  const int n = c.n();
  const size_t count = 16 << 20;  // 64 MiB of floats: seconds through 4 KiB slots
  std::vector<Buf> in(n, Buf(count * 4)), out(n, Buf(count * 4));
  std::vector<std::vector<DevLaunch>> launches(n);
  for (int r = 0; r < n; ++r) {
    DevCall call;
    call.send = in[r].data();
    call.recv = out[r].data();
    call.count = count;
    EXPECT_TRUE(planDeviceCollective(c.params(r), call, &launches[r]).ok());
  }
  std::vector<Outcome> res(n);
  std::vector<std::thread> t;
  for (int r = 0; r < n; ++r)
    t.emplace_back([&, r] {
      res[r].ok = runEmulatedLaunches(c.rank(r), launches[r]);
      res[r].end = Clock::now();
    });
  meanwhile();
  for (auto& x : t) x.join();
  return res;
}

double secondsBetween(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// The proxies must report within seconds. The emulated kernels then stop at their next abort
// check (every 1024 polls, whose yields take milliseconds when compilers share the two cores
// here), so their return is only required to come, well within a timeout: no hang.
constexpr double kProxyReportSec = 5, kNoHangSec = 120;

TEST(DeviceProxyFault, PeerThatDiesMidTransferFailsTheOthers) {
  // Rank 1 (alone on node 1) dies while data flows: its proxy vanishes without a word (the
  // connections close, as the kernel closes a dead process's sockets) and its kernels stop.
  ProxyCluster c(2, {0, 1}, 1, 4096);
  ASSERT_TRUE(c.ok());
  Clock::time_point death;
  auto res = longAllReduce(c, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    c.rank(1).proxy->simulateDeath();
    __atomic_store_n(&c.rank(1).abort, 1u, __ATOMIC_RELEASE);  // its kernels stop (nobody else learns of it)
    // Its sockets close once its blocks are gone (they may touch the shadows till then).
    while (c.rank(1).busy) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    death = Clock::now();
    c.rank(1).proxy.reset();
  });
  EXPECT_FALSE(res[0].ok) << "rank 0 completed a 64 MiB all-reduce with a dead peer";
  EXPECT_LT(c.rank(0).failedAfter(death), kProxyReportSec) << "rank 0's proxy noticed the death late";
  EXPECT_LT(secondsBetween(death, res[0].end), kNoHangSec);
  const Status st = c.rank(0).proxyFailure();
  EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
}

TEST(DeviceProxyFault, PeerThatAbortsFailsEveryRankWithinTheTimeout) {
  // Rank 2 aborts mid-transfer: its proxy tells its peers, whose proxies fail their ranks and
  // tell theirs, so every rank stops without waiting for its watchdog's timeout.
  ProxyCluster c(4, {0, 0, 1, 1}, 2, 4096);
  ASSERT_TRUE(c.ok());
  Clock::time_point abortAt;
  auto res = longAllReduce(c, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    abortAt = Clock::now();
    __atomic_store_n(&c.rank(2).abort, 1u, __ATOMIC_RELEASE);
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_FALSE(res[r].ok) << "rank " << r;
    EXPECT_LT(secondsBetween(abortAt, res[r].end), kNoHangSec) << "rank " << r;
  }
  // Each learns it from a failure notice or from a connection its failing peer shut.
  for (int r : {0, 1, 3})
    EXPECT_LT(c.rank(r).failedAfter(abortAt), kProxyReportSec)
        << "rank " << r << ": " << c.rank(r).proxyFailure().message();
}

TEST(DeviceProxyFault, PeerThatLeftIsAnErrorOnlyWhenSentTo) {
  ProxyCluster c(2, {0, 1}, 1, 1024);
  ASSERT_TRUE(c.ok());
  checkAllReduce(c, strataFloat32, RedKind::Sum, 5000, false);
  c.rank(1).proxy.reset();  // drains, says goodbye, closes
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(c.rank(0).proxyFailure().ok()) << c.rank(0).proxyFailure().message();
  EXPECT_EQ(__atomic_load_n(&c.rank(0).abort, __ATOMIC_ACQUIRE), 0u);
  // Rank 0 now sends to the rank that left: an error, not a hang.
  std::vector<char> buf(64 << 10, 1);  // more than the 8 slots the kernel may fill without credits
  std::vector<DevP2P> ops = {{true, buf.data(), buf.size(), 1}};
  std::vector<DevLaunch> launches;
  ASSERT_TRUE(planDeviceP2P(c.params(0), ops, &launches).ok());
  const auto t0 = Clock::now();
  EXPECT_FALSE(runEmulatedLaunches(c.rank(0), launches));
  EXPECT_LT(secondsBetween(t0, Clock::now()), kNoHangSec);
  EXPECT_LT(c.rank(0).failedAfter(t0), kProxyReportSec);
  EXPECT_NE(c.rank(0).proxyFailure().message().find("destroyed its communicator"), std::string::npos)
      << c.rank(0).proxyFailure().message();
}

#endif  // STRATA_RDMA_LAYOUTS

}  // namespace

}  // namespace strata::testing
