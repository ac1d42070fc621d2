// ib_device_test.cc: the ibverbs transport on a real RDMA device (label rdma; CI runs it on the
// kernel's soft-RoCE under qemu, scripts/rdma_vm.sh). Two ranks as threads of one process connect
// through the device (loopback) with the production, dlopen'd libibverbs and move exact data
// through the slot FIFO (write with immediate, credit returns), the single-copy RDMA READ path
// into the destination and into the reduction scratch ring, with 1 and 4 queue pairs. Also on the
// device: GID choice (the IPv4-mapped RoCE v2 entry found by itself, STRATA_IB_GID_INDEX forcing
// another), STRATA_IB_HCA selection, the path MTU from the port, buffers freed and mapped again at
// the same address (registrations must not outlive the transfer), sleeping on the completion
// channel while idle, and a peer whose queue pairs are gone becoming a completion error within the
// QP timeout. Without a device (or without libibverbs) every test skips visibly with the
// transport's reason.
#include <sys/mman.h>
#include <time.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "ib_test_util.h"
#include "transport/ib/ib_connection.h"
#include "transport/ib/ib_device.h"
#include "transport/ib/ib_transport.h"
#include "transport/ib/ib_verbs.h"
#include "transport/socket.h"

namespace strata::ib {
namespace {

using testutil::drive;
using testutil::pattern;

/// The production verbs table and the first device's first port, or a skip reason.
struct DeviceInfo {
  const Verbs* v = nullptr;
  std::string name;  ///< "rxe0"
  std::string skip;
};
DeviceInfo device() {
  DeviceInfo d;
  std::unique_ptr<NetTransport> tr;
  if (Status st = createIbTransport(0, &tr); !st.ok()) {
    d.skip = "no usable RDMA device: " + st.message();
    return d;
  }
  if (Status st = loadVerbs(&d.v); !st.ok()) {
    d.skip = st.message();
    return d;
  }
  int n = 0;
  ibv_device** list = d.v->getDeviceList(&n);
  if (n > 0) d.name = d.v->getDeviceName(list[0]);
  d.v->freeDeviceList(list);
  return d;
}
#define REQUIRE_DEVICE(d)                        \
  const DeviceInfo d = device();                 \
  if (!d.skip.empty()) GTEST_SKIP() << d.skip;

std::string sysfs(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

/// GID table indices of `dev` port 1 from sysfs: the IPv4-mapped RoCE v2 entry and another RoCE v2 one.
void roceV2Gids(const std::string& dev, int* ipv4, int* other) {
  *ipv4 = *other = -1;
  const std::string port = "/sys/class/infiniband/" + dev + "/ports/1/";
  for (int i = 0; i < 16; ++i) {
    const std::string gid = sysfs(port + "gids/" + std::to_string(i));
    if (gid.empty() || gid == "0000:0000:0000:0000:0000:0000:0000:0000") continue;
    if (sysfs(port + "gid_attrs/types/" + std::to_string(i)) != "RoCE v2") continue;
    if (gid.rfind("0000:0000:0000:0000:0000:ffff:", 0) == 0) {
      if (*ipv4 < 0) *ipv4 = i;
    } else if (*other < 0) {
      *other = i;
    }
  }
}

/// Two connected ranks over transports made with `opt`.
struct Pair {
  std::unique_ptr<NetTransport> tr[2];
  std::unique_ptr<Connection> c[2];
  IbConnection* ib(int r) { return static_cast<IbConnection*>(c[r].get()); }
};
Status connectPair(const Verbs* v, const Options& opt, Pair* p) {
  for (int r = 0; r < 2; ++r) STRATA_RETURN_IF_ERROR(createTransport(v, opt, r, &p->tr[r]));
  int fds[2];
  testutil::oobPair(fds);
  STRATA_RETURN_IF_ERROR(p->tr[0]->connect(0, 1, fds[0], 1, &p->c[0]));
  return p->tr[1]->connect(1, 0, fds[1], 1, &p->c[1]);
}

/// Each rank sends `src[r]` (n bytes) and receives into `dst[r]`; both exact.
void exchange(Pair* p, uint8_t* src[2], uint8_t* dst[2], size_t n) {
  testutil::twoRanks([&](int r) {
    Transfer s, v;
    s.kind = Transfer::Send;
    s.src = src[r];
    s.bytes = n;
    v.kind = Transfer::Recv;
    v.dst = dst[r];
    v.bytes = n;
    p->c[r]->postSend(&s);
    p->c[r]->postRecv(&v);
    Status ds = drive(p->c[r].get(), {&s, &v}, 120);
    ASSERT_TRUE(ds.ok()) << ds.message();
  });
}

/// Exact data over the slot path and the single-copy path, then a reduction (scratch ring).
void sendReceiveAndReduce(Pair* p) {
  const std::vector<size_t> sizes = {1, 4097, 200000, 4 << 20, 24 << 20};
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
      p->c[r]->postSend(&s);
      p->c[r]->postRecv(&v);
      Status ds = drive(p->c[r].get(), {&s, &v}, 120);
      ASSERT_TRUE(ds.ok()) << ds.message();
      ASSERT_TRUE(dst == pattern(1 - r, k, n)) << n << " bytes";
    }
    const size_t count = 3 << 20;  // 12 MiB: read through the scratch ring in chunks
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
    p->c[r]->postSend(&s);
    p->c[r]->postRecv(&v);
    Status ds = drive(p->c[r].get(), {&s, &v}, 120);
    ASSERT_TRUE(ds.ok()) << ds.message();
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[i], 3.0f) << i;
  });
}

TEST(IbDevice, LoopbackExactDataAndReduction) {
  REQUIRE_DEVICE(d);
  Pair p;
  ASSERT_TRUE(connectPair(d.v, optionsFromConfig(), &p).ok());
  sendReceiveAndReduce(&p);
  EXPECT_EQ(p.ib(0)->queuePairs(), 2);  // the default, STRATA_IB_QPS_PER_CONN=2
}

TEST(IbDevice, OneAndFourQueuePairsPerConnection) {
  REQUIRE_DEVICE(d);
  for (int qps : {1, 4}) {
    SCOPED_TRACE(std::to_string(qps) + " queue pairs");
    Options opt = optionsFromConfig();
    opt.qpsPerRail = qps;
    opt.singleCopyMinBytes = 64 << 10;  // more of the sizes go single-copy, striped over the QPs
    Pair p;
    ASSERT_TRUE(connectPair(d.v, opt, &p).ok());
    sendReceiveAndReduce(&p);
    EXPECT_EQ(p.ib(0)->queuePairs(), qps);
    EXPECT_EQ(p.ib(1)->queuePairs(), qps);
  }
}

TEST(IbDevice, ChoosesTheIpv4MappedRoceV2GidAndHonoursAForcedIndex) {
  REQUIRE_DEVICE(d);
  int ipv4 = -1, other = -1;
  roceV2Gids(d.name, &ipv4, &other);
  if (ipv4 < 0) GTEST_SKIP() << d.name << " has no IPv4-mapped RoCE v2 GID (an InfiniBand port?)";
  std::shared_ptr<Devices> dev;
  Options opt = optionsFromConfig();
  opt.gidIndex = -1;
  ASSERT_TRUE(Devices::open(d.v, opt, &dev).ok());
  ASSERT_FALSE(dev->rails().empty());
  EXPECT_EQ(dev->rails()[0].gidIndex, ipv4) << "the IPv4-mapped RoCE v2 entry, as sysfs lists it";
  EXPECT_TRUE(dev->rails()[0].ethernet);
  // Another RoCE v2 entry (the link-local IPv6 one on soft-RoCE), forced: it is used, and works.
  if (other >= 0) {
    opt.gidIndex = other;
    ASSERT_TRUE(Devices::open(d.v, opt, &dev).ok());
    EXPECT_EQ(dev->rails()[0].gidIndex, other);
    Pair p;
    ASSERT_TRUE(connectPair(d.v, opt, &p).ok());
    std::vector<uint8_t> a = pattern(0, 1, 300000), b = pattern(1, 1, 300000), ra(a.size()), rb(b.size());
    uint8_t* src[2] = {a.data(), b.data()};
    uint8_t* dst[2] = {ra.data(), rb.data()};
    exchange(&p, src, dst, a.size());
    EXPECT_TRUE(ra == b && rb == a) << "data over GID index " << other;
  }
  // An index past the table: the port is skipped and the transport says why.
  opt.gidIndex = 250;
  Status st = Devices::open(d.v, opt, &dev);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no active port"), std::string::npos) << st.message();
}

TEST(IbDevice, HcaSelectsDevicesAndExplainsAnEmptySelection) {
  REQUIRE_DEVICE(d);
  std::shared_ptr<Devices> dev;
  Options opt = optionsFromConfig();
  opt.hca = "=" + d.name + ":1";
  ASSERT_TRUE(Devices::open(d.v, opt, &dev).ok());
  EXPECT_EQ(dev->rails()[0].name, d.name + ":1");
  opt.hca = "^" + d.name;
  Status st = Devices::open(d.v, opt, &dev);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("STRATA_IB_HCA='^" + d.name + "'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(d.name), std::string::npos) << "names the devices seen: " << st.message();
  opt.hca = d.name + ":2";  // a port the device does not have
  EXPECT_FALSE(Devices::open(d.v, opt, &dev).ok());
}

TEST(IbDevice, PathMtuIsThePortsActiveMtu) {
  REQUIRE_DEVICE(d);
  ibv_device** list = nullptr;
  int n = 0;
  list = d.v->getDeviceList(&n);
  ibv_context* ctx = d.v->openDevice(list[0]);
  ibv_port_attr pa{};
  ASSERT_EQ(d.v->queryPort(ctx, 1, &pa), 0);
  d.v->closeDevice(ctx);
  d.v->freeDeviceList(list);
  Pair p;
  ASSERT_TRUE(connectPair(d.v, optionsFromConfig(), &p).ok());
  std::vector<uint8_t> a = pattern(0, 2, 5000), b = pattern(1, 2, 5000), ra(5000), rb(5000);
  uint8_t* src[2] = {a.data(), b.data()};
  uint8_t* dst[2] = {ra.data(), rb.data()};
  exchange(&p, src, dst, 5000);
  EXPECT_EQ(p.ib(0)->pathMtu(), 128 << pa.active_mtu);
  EXPECT_EQ(p.ib(1)->pathMtu(), 128 << pa.active_mtu);
  std::printf("%s: active_mtu %d bytes, path MTU %d\n", d.name.c_str(), 128 << pa.active_mtu, p.ib(0)->pathMtu());
}

/// `bytes` of fresh anonymous memory at `at` (or anywhere when null) filled with `fill`'s pattern.
uint8_t* mapAt(void* at, size_t bytes, int rank, size_t tag) {
  void* m = mmap(at, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED_NOREPLACE : 0), -1, 0);
  if (m == MAP_FAILED) return nullptr;
  std::vector<uint8_t> v = pattern(rank, tag, bytes);
  memcpy(m, v.data(), bytes);
  return static_cast<uint8_t*>(m);
}

// Buffers unmapped and mapped again at the same address between transfers, as an allocator does:
// every transfer must carry the new memory's contents (single-copy sizes, so the registration
// cache is on the path at both ends: the sender's source is read remotely, the receiver's
// destination is the read's target). With a cached registration (STRATA_IB_REG_CACHE_ENTRIES=256,
// the old default) the second round got stale data on soft-RoCE; the default is now 0.
TEST(IbDevice, BuffersFreedAndMappedAgainAtTheSameAddressCarryTheirNewContents) {
  REQUIRE_DEVICE(d);
  Pair p;
  ASSERT_TRUE(connectPair(d.v, optionsFromConfig(), &p).ok());
  const size_t n = 4 << 20;
  uint8_t* src[2] = {mapAt(nullptr, n, 0, 0), mapAt(nullptr, n, 1, 0)};
  uint8_t* dst[2] = {mapAt(nullptr, n, 9, 0), mapAt(nullptr, n, 9, 0)};
  for (size_t round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    for (int r = 0; r < 2; ++r) ASSERT_TRUE(src[r] && dst[r]);
    exchange(&p, src, dst, n);
    for (int r = 0; r < 2; ++r) {
      const std::vector<uint8_t> want = pattern(1 - r, round, n);
      size_t bad = 0, first = n;
      for (size_t i = 0; i < n; ++i)
        if (dst[r][i] != want[i]) bad++, first = std::min(first, i);
      ASSERT_EQ(bad, 0u) << "rank " << r << " round " << round << ": " << bad << " bytes differ, the first at " << first
                         << ": got " << int(dst[r][first]) << ", want " << int(want[first]) << ", the peer's previous "
                         << "round had " << int(testutil::patternByte(1 - r, round ? round - 1 : 0, first))
                         << ", this rank's fill " << int(testutil::patternByte(9, round, first));
    }
    // Free both ends' buffers and map new memory at the same addresses with the next round's data.
    for (int r = 0; r < 2; ++r) {
      void* s = src[r];
      void* t = dst[r];
      munmap(s, n);
      munmap(t, n);
      src[r] = mapAt(s, n, r, round + 1);
      dst[r] = mapAt(t, n, 9, round + 1);
    }
  }
  for (int r = 0; r < 2; ++r) munmap(src[r], n), munmap(dst[r], n);
}

double threadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// A receive whose data comes 1.5 s later: the waiting rank sleeps on the completion channel (and
// the oob socket), it does not poll.
TEST(IbDevice, AnIdleReceiveSleepsOnTheCompletionChannel) {
  REQUIRE_DEVICE(d);
  Pair p;
  ASSERT_TRUE(connectPair(d.v, optionsFromConfig(), &p).ok());
  std::vector<uint8_t> a = pattern(0, 3, 1000), ra(1000), b(1), rb(1);
  uint8_t* src[2] = {a.data(), b.data()};
  uint8_t* dst[2] = {ra.data(), rb.data()};
  exchange(&p, src, dst, 1);  // handshake done
  double cpu = 0, wall = 0;
  testutil::twoRanks([&](int r) {
    if (r == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      Transfer s;
      s.kind = Transfer::Send;
      s.src = a.data();
      s.bytes = a.size();
      p.c[0]->postSend(&s);
      ASSERT_TRUE(drive(p.c[0].get(), {&s}, 30).ok());
      return;
    }
    Transfer v;
    v.kind = Transfer::Recv;
    v.dst = ra.data();
    v.bytes = ra.size();
    p.c[1]->postRecv(&v);
    const double c0 = threadCpuSeconds(), w0 = net::nowSec();
    Status st = drive(p.c[1].get(), {&v}, 30);
    cpu = threadCpuSeconds() - c0;
    wall = net::nowSec() - w0;
    ASSERT_TRUE(st.ok()) << st.message();
  });
  EXPECT_TRUE(ra == a);
  EXPECT_GT(wall, 1.2);
  EXPECT_LT(cpu, 0.25 * wall) << "the waiting rank used " << cpu << " s of CPU in " << wall << " s";
  std::printf("idle receive: %.2f s waited, %.3f s of CPU\n", wall, cpu);
}

// The peer's queue pairs are destroyed while its oob socket stays open (a peer whose NIC or
// process state is gone but whose TCP side says nothing): a send to it fails with a completion
// error once the retries at the QP timeout run out, here STRATA_IB_TIMEOUT=14 (67 ms) x the default
// STRATA_IB_RETRY_CNT (6). With 7 it never failed on soft-RoCE, which retries forever at 7.
TEST(IbDevice, APeerWhoseQueuePairsAreGoneIsACompletionErrorWithinTheTimeout) {
  REQUIRE_DEVICE(d);
  Options opt = optionsFromConfig();
  opt.timeout = 14;
  EXPECT_LT(opt.retryCnt, 7) << "7 means retry forever on some stacks (soft-RoCE)";
  std::unique_ptr<NetTransport> tr[2];
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(createTransport(d.v, opt, r, &tr[r]).ok());
  int fds[2];
  testutil::oobPair(fds);
  const int keep = dup(fds[1]);  // the peer's oob end stays open after its connection is gone
  std::unique_ptr<Connection> c[2];
  ASSERT_TRUE(tr[0]->connect(0, 1, fds[0], 1, &c[0]).ok());
  ASSERT_TRUE(tr[1]->connect(1, 0, fds[1], 1, &c[1]).ok());
  {
    Pair p;
    p.c[0] = std::move(c[0]);
    p.c[1] = std::move(c[1]);
    std::vector<uint8_t> a(100, 1), b(100, 2), ra(100), rb(100);
    uint8_t* src[2] = {a.data(), b.data()};
    uint8_t* dst[2] = {ra.data(), rb.data()};
    exchange(&p, src, dst, 100);
    c[0] = std::move(p.c[0]);
    p.c[1].reset();  // rank 1's queue pairs are destroyed
  }
  std::vector<uint8_t> big(1 << 20, 7);
  Transfer s;
  s.kind = Transfer::Send;
  s.src = big.data();
  s.bytes = big.size();
  c[0]->postSend(&s);
  const double t0 = net::nowSec();
  Status st = drive(c[0].get(), {&s}, 60);
  const double took = net::nowSec() - t0;
  ASSERT_FALSE(st.ok()) << "a send to destroyed queue pairs completed";
  EXPECT_LT(took, 10.0) << st.message();
  EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
  std::printf("send to a peer without queue pairs failed after %.2f s: %s\n", took, st.message().c_str());
  close(keep);
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
