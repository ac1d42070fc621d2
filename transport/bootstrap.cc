// bootstrap.cc: unique ids, the root rendezvous server, each rank's partner sockets (Bruck's
// all-gather) and the non-blocking connection opening used by transports that connect on first use.
//
// Join protocol (all integers little-endian host order; one machine architecture per job):
//   rank -> root: JoinMsg {magic, secret, rank, nranks, RankInfo}
//   root -> rank: JoinReply {status, nranks, msgLen, roundTag} then, on success, the address of
//                 each rank it sends to in Bruck's all-gather (rank - 2^k, k < ceil(log2 n)), else
//                 an error message of msgLen bytes.
// The root's traffic is O(n log n) (not n copies of n RankInfos); the ranks then all-gather their
// RankInfos among themselves in ceil(log2 n) rounds. The root waits for all ranks of a round; if
// some never arrive within the join timeout (counted from the first arrival), every waiting rank
// gets "rank R of N did not join within T s".
#include "transport/bootstrap.h"

#include <netinet/in.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "transport/bootstrap_wire.h"
#include "transport/config.h"
#include "transport/log.h"
#include "transport/process_alive.h"
#include "transport/secret.h"
#include "transport/socket.h"

namespace strata {
namespace {

using wire::JoinMsg;
using wire::JoinReply;
using wire::kJoinMagic;
using wire::Hello;
using wire::kHelloMagic;
constexpr uint32_t kIdMagic = 0x53545241;    // "STRA"

struct PartnerAddr {
  uint32_t addr;  // network order
  uint16_t port;  // network order
  uint16_t pad;
};

// Unauthenticated connections a listener holds (the oldest is dropped beyond it), and the time a
// connection has to deliver its whole join message or hello.
constexpr size_t kMaxUnauthenticated = 64;
constexpr double kHelloTimeoutSec = 5;
// Most ranks a join may claim (the root allocates 12 bytes per rank before they arrive).
constexpr int kMaxRanks = 1 << 22;

// Rounds of Bruck's all-gather over n ranks: ceil(log2 n).
int bruckRounds(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

// The root holds a socket per joining rank until the round completes: let it have as many
// descriptors as the hard limit allows.
void raiseFdLimit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &r);
  }
}

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 16) s += fmt::format(" and {} more", ranks.size() - 16);
  return s;
}

void replyError(int fd, strataResult_t code, const std::string& msg) {
  JoinReply r{code, 0, static_cast<uint32_t>(msg.size()), 0};
  double dl = net::nowSec() + 2;
  if (net::sendAll(fd, &r, sizeof(r), dl, nullptr, "joining rank").ok())
    (void)net::sendAll(fd, msg.data(), msg.size(), dl, nullptr, "joining rank");
}

// Sends a refusal without blocking (best effort: a stranger that does not read it loses it).
void replyNow(int fd, strataResult_t code, const std::string& msg) {
  JoinReply r{code, 0, static_cast<uint32_t>(msg.size()), 0};
  std::string buf(sizeof(r) + msg.size(), '\0');
  memcpy(buf.data(), &r, sizeof(r));
  memcpy(buf.data() + sizeof(r), msg.data(), msg.size());
  (void)::send(fd, buf.data(), buf.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// Logs the first few connections dropped or refused by a listener, then counts them at debug
// level, so that a flood of strangers cannot flood the log either.
void noteDropped(int* count, const std::string& who, const std::string& what) {
  ++*count;
  if (*count <= 3)
    log::warn("{}: {}{}", who, what, *count == 3 ? " (further ones are logged at debug level)" : "");
  else
    log::debug("{}: {} ({} so far)", who, what, *count);
}

// A connection accepted by the root whose join message has not fully arrived.
struct Joiner {
  int fd;
  size_t got;
  double since;
  JoinMsg m;
};

// Reads what has arrived without blocking: 1 complete, 0 not yet, -1 closed or broken.
int readJoiner(Joiner& j) {
  while (j.got < sizeof(JoinMsg)) {
    ssize_t r = ::recv(j.fd, reinterpret_cast<char*>(&j.m) + j.got, sizeof(JoinMsg) - j.got, MSG_DONTWAIT);
    if (r > 0) {
      j.got += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return -1;
  }
  return 1;
}

// Serves rounds of joins on `listenFd` until one round completes (one-shot) or forever. The
// listener is serviced without blocking: connections are accepted as they come and their join
// messages read as they arrive, so that strangers that send nothing or half a message delay
// nobody; they are dropped after kHelloTimeoutSec, and the oldest of them when more than
// kMaxUnauthenticated wait. Sizes are checked before anything is allocated.
void rootServe(int listenFd, UniqueIdData id, bool persistent, int expectNranks) {
  raiseFdLimit();
  net::setNonBlocking(listenFd);
  const std::string who = "bootstrap root";
  std::vector<Joiner> joiners;  // unauthenticated, oldest first
  int dropped = 0, refused = 0;
  do {
    std::vector<int> fds;                // per rank: its connection, once joined
    std::vector<PartnerAddr> addrs;      // per rank: its listener
    int nranks = -1, joined = 0;
    double deadline = 1e300;
    bool done = false;
    // A complete join message on `fd` (which it takes).
    auto onMessage = [&](int fd, const JoinMsg& m) {
      if (m.magic != kJoinMagic || !equalConstantTime(m.secret, id.secret, 16)) {
        noteDropped(&dropped, who, "dropped a connection that did not send a join message with the unique id's secret");
        replyNow(fd, strataInvalidArgument, "bootstrap: wrong unique id secret");
        ::close(fd);
        return;
      }
      std::string bad = wire::joinRefusal(m, expectNranks, nranks);
      if (bad.empty() && nranks < 0) {
        try {
          fds.assign(static_cast<size_t>(m.nranks), -1);
          addrs.assign(static_cast<size_t>(m.nranks), PartnerAddr{});
          nranks = m.nranks;
          deadline = net::nowSec() + config().joinTimeoutSec;
        } catch (const std::bad_alloc&) {
          fds.clear();
          addrs.clear();
          bad = fmt::format("bootstrap: no memory for a round of {} ranks", m.nranks);
        }
      }
      if (bad.empty() && fds[static_cast<size_t>(m.rank)] >= 0)
        bad = fmt::format("bootstrap: rank {} of {} conflicts with this round ({} ranks, rank taken)", m.rank,
                          m.nranks, nranks);
      if (!bad.empty()) {
        noteDropped(&refused, who, "refused a join: " + bad);
        replyNow(fd, strataInvalidArgument, bad);
        ::close(fd);
        return;
      }
      fds[static_cast<size_t>(m.rank)] = fd;
      addrs[static_cast<size_t>(m.rank)] = PartnerAddr{m.info.addr, m.info.port, 0};
      if (++joined < nranks) return;
      JoinReply r{strataSuccess, nranks, 0, 0};
      secureRandom(&r.roundTag, sizeof(r.roundTag));
      const int rounds = bruckRounds(nranks);
      std::vector<PartnerAddr> partners(static_cast<size_t>(rounds));
      for (int rk = 0; rk < nranks; ++rk) {
        for (int k = 0; k < rounds; ++k)
          partners[static_cast<size_t>(k)] = addrs[static_cast<size_t>(((rk - (1 << k)) % nranks + nranks) % nranks)];
        int& f = fds[static_cast<size_t>(rk)];
        double dl = net::nowSec() + 10;
        Status s1 = net::sendAll(f, &r, sizeof(r), dl, nullptr, "joined rank");
        if (s1.ok() && rounds > 0)
          s1 = net::sendAll(f, partners.data(), sizeof(PartnerAddr) * partners.size(), dl, nullptr, "joined rank");
        if (!s1.ok()) log::warn("{}: {}", who, s1.message());
        net::closeFd(&f);
      }
      done = true;
    };
    while (!done) {
      double now = net::nowSec();
      if (now > deadline) {
        std::vector<int> missing;
        for (int r = 0; r < nranks; ++r)
          if (fds[static_cast<size_t>(r)] < 0) missing.push_back(r);
        std::string msg;
        if (missing.size() == 1)
          msg = fmt::format("rank {} of {} did not join within {} s", missing[0], nranks, config().joinTimeoutSec);
        else
          msg = fmt::format("ranks {} of {} did not join within {} s", rankList(missing), nranks,
                            config().joinTimeoutSec);
        for (int& f : fds)
          if (f >= 0) {
            replyError(f, strataTimeout, msg);
            net::closeFd(&f);
          }
        log::warn("{}: {}", who, msg);
        break;
      }
      // Wait for a connection, bytes of a join message, or the next deadline.
      std::vector<pollfd> pfds;
      pfds.push_back(pollfd{listenFd, POLLIN, 0});
      double wake = std::min(deadline, now + 1.0);
      for (const Joiner& j : joiners) {
        pfds.push_back(pollfd{j.fd, POLLIN, 0});
        wake = std::min(wake, j.since + kHelloTimeoutSec);
      }
      int ms = static_cast<int>(std::max(1.0, std::ceil((wake - now) * 1000)));
      (void)::poll(pfds.data(), pfds.size(), ms);
      now = net::nowSec();
      // Read the join messages that arrived (those complete from an earlier round first).
      for (size_t i = 0; i < joiners.size() && !done;) {
        Joiner& j = joiners[i];
        int r = readJoiner(j);
        if (r == 0 && now - j.since <= kHelloTimeoutSec) {
          ++i;
          continue;
        }
        Joiner taken = j;
        joiners.erase(joiners.begin() + static_cast<long>(i));
        if (r == 1) {
          onMessage(taken.fd, taken.m);
        } else {
          noteDropped(&dropped, who,
                      r < 0 ? "dropped a connection that closed before sending a whole join message"
                            : fmt::format("dropped a connection that sent no whole join message within {} s",
                                          kHelloTimeoutSec));
          ::close(taken.fd);
        }
      }
      // Accept what waits; a connection whose join message came with it is served at once.
      for (int n = 0; n < 256 && !done; ++n) {
        int c = ::accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0) {
          if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
            log::debug("{}: accept: {}", who, strerror(errno));
          break;
        }
        net::setNoDelay(c);
        Joiner j{c, 0, now, {}};
        int r = readJoiner(j);
        if (r == 1) {
          onMessage(c, j.m);
          continue;
        }
        if (r < 0) {
          noteDropped(&dropped, who, "dropped a connection that closed before sending a whole join message");
          ::close(c);
          continue;
        }
        joiners.push_back(j);
        if (joiners.size() > kMaxUnauthenticated) {
          noteDropped(&dropped, who,
                      fmt::format("dropped the connection that waited longest: more than {} unauthenticated ones were open",
                                  kMaxUnauthenticated));
          ::close(joiners.front().fd);
          joiners.erase(joiners.begin());
        }
      }
    }
  } while (persistent);
  for (Joiner& j : joiners) ::close(j.fd);
  ::close(listenFd);
}

}  // namespace

UniqueIdData decodeUniqueId(const strataUniqueId& id) {
  UniqueIdData d;
  static_assert(sizeof(UniqueIdData) <= STRATA_UNIQUE_ID_BYTES);
  memcpy(&d, id.internal, sizeof(d));
  return d;
}

strataUniqueId encodeUniqueId(const UniqueIdData& data) {
  UniqueIdData d = data;
  d.magic = kIdMagic;
  strataUniqueId id{};
  memcpy(id.internal, &d, sizeof(d));
  return id;
}

std::string uniqueIdToHex(const strataUniqueId& id) {
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < STRATA_UNIQUE_ID_BYTES; ++i) {
    unsigned char c = static_cast<unsigned char>(id.internal[i]);
    s += hex[c >> 4];
    s += hex[c & 15];
  }
  return s;
}

bool uniqueIdFromHex(const std::string& hex, strataUniqueId* id) {
  if (hex.size() != 2 * STRATA_UNIQUE_ID_BYTES) return false;
  auto val = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (int i = 0; i < STRATA_UNIQUE_ID_BYTES; ++i) {
    int hi = val(hex[2 * i]), lo = val(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    id->internal[i] = static_cast<char>(hi * 16 + lo);
  }
  return decodeUniqueId(*id).magic == kIdMagic;
}

Status startRootServer(UniqueIdData* d, bool persistent, int expectNranks) {
  int fd = -1;
  uint16_t port = 0;
  Status st = net::listenAny(d->rootPort, &fd, &port);
  if (!st.ok()) return Status(st.code(), "bootstrap root: " + st.message());
  d->rootPort = port;
  d->magic = kIdMagic;
  std::thread(rootServe, fd, *d, persistent, expectNranks).detach();
  return OkStatus();
}

Status createUniqueId(strataUniqueId* out, bool persistent, uint32_t rootAddr) {
  UniqueIdData d;
  d.rootAddr = rootAddr ? rootAddr : net::advertisedAddr();
  d.rootPort = 0;
  secureRandom(d.secret, sizeof(d.secret));
  secureRandom(&d.commTag, sizeof(d.commTag));
  STRATA_RETURN_IF_ERROR(startRootServer(&d, persistent));
  *out = encodeUniqueId(d);
  return OkStatus();
}

Bootstrap::~Bootstrap() {
  for (int& fd : sendFds_) net::closeFd(&fd);
  for (int& fd : recvFds_) net::closeFd(&fd);
  net::closeFd(&listenFd_);
  for (Pending& p : pending_) net::closeFd(&p.fd);
  for (HalfOpen& h : halfOpen_) net::closeFd(&h.fd);
}

Status Bootstrap::openListener(int* fd, RankInfo* self) {
  uint16_t port = 0;
  STRATA_RETURN_IF_ERROR(net::listenAny(0, fd, &port));
  self->addr = net::advertisedAddr();
  self->port = port;
  return OkStatus();
}

Status Bootstrap::join(const strataUniqueId& id, int rank, int nranks, RankInfo self, double timeoutSec,
                       std::unique_ptr<Bootstrap>* out) {
  UniqueIdData d = decodeUniqueId(id);
  if (d.magic != kIdMagic) return invalidArgument("unique id is not a strata id (bad magic)");
  int lfd = -1;
  STRATA_RETURN_IF_ERROR(openListener(&lfd, &self));
  self.rank = rank;
  double deadline = net::nowSec() + timeoutSec;
  std::string rootName = "bootstrap root " + net::addrToString(d.rootAddr, d.rootPort);
  int fd = -1;
  Status st;
  JoinReply r{};
  for (int attempt = 0;; ++attempt) {
    // A retry only follows a connection the root dropped unanswered: if it is gone now, say so soon.
    st = net::connectTo(d.rootAddr, d.rootPort, attempt == 0 ? deadline : std::min(deadline, net::nowSec() + 2), &fd);
    if (!st.ok()) {
      ::close(lfd);
      return remoteError("rank {} could not reach the {}: {}", rank, rootName, st.message());
    }
    // Advertise the address of the interface that reaches the root (the others are reached the
    // same way), unless an address or interfaces were named: whatever launched the ranks, this is
    // an address every rank can connect to.
    const Config& cfg = config();
    if (cfg.socketAddr.empty() && cfg.socketIfname.empty() && cfg.ncclSocketIfname.empty()) {
      sockaddr_in local{};
      socklen_t len = sizeof(local);
      if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 && local.sin_family == AF_INET &&
          local.sin_addr.s_addr != 0)
        self.addr = local.sin_addr.s_addr;
    }
    JoinMsg m;
    memset(static_cast<void*>(&m), 0, sizeof(m));
    m.magic = kJoinMagic;
    memcpy(m.secret, d.secret, 16);
    m.rank = rank;
    m.nranks = nranks;
    m.info = self;
    r = JoinReply{};
    const double sent = net::nowSec();
    st = net::sendAll(fd, &m, sizeof(m), deadline, nullptr, rootName);
    // The root answers when all ranks are in or its own join timeout fires; allow it a margin.
    if (st.ok()) st = net::recvAll(fd, &r, sizeof(r), deadline + 5, nullptr, rootName);
    // The root closes unanswered only connections it has not read a join message from in time, or
    // the oldest unauthenticated ones while strangers crowd its listener: join again then.
    if (!st.ok() && st.code() != strataTimeout && net::nowSec() - sent < kHelloTimeoutSec + 1 &&
        net::nowSec() < deadline && attempt < 50) {
      log::debug("rank {}: the {} dropped the join connection ({}); joining again", rank, rootName, st.message());
      net::closeFd(&fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    break;
  }
  std::vector<RankInfo> infos;
  if (st.ok() && r.status != strataSuccess) {
    std::string msg(std::min<uint32_t>(r.msgLen, 4096), '\0');
    (void)net::recvAll(fd, msg.data(), msg.size(), net::nowSec() + 2, nullptr, rootName);
    st = wire::joinReplyError(r, msg);
  } else if (st.ok()) {
    if (r.nranks != nranks) st = internalError("bootstrap root answered with {} ranks, expected {}", r.nranks, nranks);
    std::vector<PartnerAddr> partners(static_cast<size_t>(bruckRounds(nranks)));
    if (st.ok() && !partners.empty())
      st = net::recvAll(fd, partners.data(), sizeof(PartnerAddr) * partners.size(), deadline + 5, nullptr, rootName);
    // Until the all-gather below, a rank knows the addresses of the ranks it sends to only.
    infos.resize(nranks);
    for (size_t k = 0; k < partners.size(); ++k) {
      RankInfo& to = infos[static_cast<size_t>(((rank - (1 << k)) % nranks + nranks) % nranks)];
      to.addr = partners[k].addr;
      to.port = partners[k].port;
    }
    infos[static_cast<size_t>(rank)] = self;
  } else if (st.code() == strataTimeout) {
    st = makeError(strataTimeout, "rank {} of {}: not all ranks joined within {} s", rank, nranks, timeoutSec);
  }
  net::closeFd(&fd);
  if (!st.ok()) {
    ::close(lfd);
    return st;
  }
  std::unique_ptr<Bootstrap> b;
  STRATA_RETURN_IF_ERROR(fromInfos(lfd, rank, std::move(infos), r.roundTag, d.secret, timeoutSec, &b));
  std::vector<RankInfo> all(static_cast<size_t>(nranks));
  STRATA_RETURN_IF_ERROR(b->allGather(&self, all.data(), sizeof(RankInfo)));
  b->infos_ = std::move(all);
  *out = std::move(b);
  return OkStatus();
}

Status Bootstrap::fromInfos(int listenFd, int rank, std::vector<RankInfo> infos, uint64_t commTag,
                            const uint8_t secret[16], double timeoutSec, std::unique_ptr<Bootstrap>* out) {
  std::unique_ptr<Bootstrap> b(new Bootstrap());
  b->rank_ = rank;
  b->nranks_ = static_cast<int>(infos.size());
  b->listenFd_ = listenFd;
  b->infos_ = std::move(infos);
  b->commTag_ = commTag;
  memcpy(b->secret_, secret, 16);
  b->timeoutSec_ = timeoutSec;
  net::setNonBlocking(listenFd);  // drainListener accepts without blocking
  const int rounds = bruckRounds(b->nranks_);
  b->sendFds_.assign(static_cast<size_t>(rounds), -1);
  b->recvFds_.assign(static_cast<size_t>(rounds), -1);
  *out = std::move(b);
  return OkStatus();
}

Status Bootstrap::partners(int round, int* sendFd, int* recvFd) {
  int& s = sendFds_[static_cast<size_t>(round)];
  int& r = recvFds_[static_cast<size_t>(round)];
  const double deadline = net::nowSec() + timeoutSec_;
  // Connecting never waits for the peer to accept (its listener's backlog holds the connection),
  // so every rank connects first and then accepts: no cycle of waits.
  if (s < 0) STRATA_RETURN_IF_ERROR(connectPeer(((rank_ - (1 << round)) % nranks_ + nranks_) % nranks_, kRing, round,
                                                deadline, &s));
  if (r < 0) STRATA_RETURN_IF_ERROR(acceptPeer((rank_ + (1 << round)) % nranks_, kRing, round, deadline, &r));
  *sendFd = s;
  *recvFd = r;
  return OkStatus();
}

uint32_t railAddress(const RankInfo& self, const RankInfo& peer, int rail, uint32_t* from) {
  *from = 0;
  if (rail < 0 || static_cast<uint32_t>(rail) >= self.nifs) return peer.addr;
  const uint32_t mine = self.ifAddr[rail], mask = self.ifMask[rail];
  for (uint32_t j = 0; j < peer.nifs && j < RankInfo::kMaxIfs; ++j)
    if ((peer.ifAddr[j] & mask) == (mine & mask)) {
      *from = mine;
      return peer.ifAddr[j];
    }
  return peer.addr;
}

Status Bootstrap::connectPeer(int peer, Kind kind, int index, double deadline, int* fd, int rail) {
  const RankInfo& p = infos_[peer];
  uint32_t from = 0;
  const uint32_t to = railAddress(infos_[rank_], p, rail, &from);
  if (rail >= 0)
    log::debug("rank {} connects to rank {} on rail {}: {} -> {}", rank_, peer, rail, net::addrToString(from, 0),
               net::addrToString(to, p.port));
  Status st = net::connectTo(to, p.port, deadline, fd, from);
  if (!st.ok()) return remoteError("rank {} cannot connect to rank {}: {}", rank_, peer, st.message());
  Hello h{kHelloMagic, kind, {}, commTag_, rank_, index};
  memcpy(h.secret, secret_, 16);
  return net::sendAll(*fd, &h, sizeof(h), deadline, &aborted_, fmt::format("rank {}", peer));
}

bool Bootstrap::probePeer(int peer, double deadline) {
  int fd = -1;
  if (!connectPeer(peer, kProbe, 0, deadline, &fd).ok() && fd < 0) return false;
  net::closeFd(&fd);
  return true;
}

void Bootstrap::serviceHalfOpen() {
  const double now = net::nowSec();
  for (size_t i = 0; i < halfOpen_.size();) {
    HalfOpen& h = halfOpen_[i];
    bool broken = false;
    while (h.got < sizeof(Hello)) {
      ssize_t r = ::recv(h.fd, h.hello + h.got, sizeof(Hello) - h.got, MSG_DONTWAIT);
      if (r > 0) {
        h.got += static_cast<size_t>(r);
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      broken = r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
      break;
    }
    if (!broken && h.got < sizeof(Hello) && now - h.since <= kHelloTimeoutSec) {
      ++i;
      continue;
    }
    Hello hello{};
    memcpy(&hello, h.hello, sizeof(hello));
    const char* why = nullptr;
    if (broken && h.got < sizeof(Hello)) why = "closed before its hello";
    else if (h.got < sizeof(Hello)) why = "sent no whole hello in time";
    else why = wire::helloProblem(hello, secret_, commTag_, nranks_);
    if (why) {
      noteDropped(&dropped_, fmt::format("rank {}", rank_), std::string("dropped a connection that ") + why);
      net::closeFd(&h.fd);
    } else if (hello.kind == kProbe) {
      net::closeFd(&h.fd);  // a survivor of a shrink made sure this rank lives
    } else {
      pending_.push_back(Pending{hello.kind, hello.rank, hello.index, h.fd});
    }
    halfOpen_.erase(halfOpen_.begin() + static_cast<long>(i));
  }
}

void Bootstrap::drainListener() {
  // Hellos come right behind their connection: read them as connections are accepted, so that
  // only connections still silent are counted against the cap (the oldest is dropped beyond it).
  for (int n = 0; n < 1024; ++n) {
    int c = ::accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) break;  // EAGAIN: nothing waiting (errors: the next poll reports the listener)
    net::setNoDelay(c);
    halfOpen_.push_back(HalfOpen{c, 0, net::nowSec(), {}});
    if (halfOpen_.size() > kMaxUnauthenticated) {
      serviceHalfOpen();
      if (halfOpen_.size() > kMaxUnauthenticated) {
        noteDropped(&dropped_, fmt::format("rank {}", rank_),
                    fmt::format("dropped the connection that waited longest: more than {} unauthenticated ones were open",
                                kMaxUnauthenticated));
        net::closeFd(&halfOpen_.front().fd);
        halfOpen_.erase(halfOpen_.begin());
      }
    }
  }
  serviceHalfOpen();
}

Status Bootstrap::acceptPeer(int peer, Kind kind, int index, double deadline, int* fd) {
  Opening o;
  STRATA_RETURN_IF_ERROR(startOpen(peer, kind, index, -1, false, &o));
  // A peer process of this machine that died never connects: say so instead of waiting out the
  // timeout (a member killed during a split, between the exchange and the new communicator's set-up).
  const RankInfo& me = infos_[static_cast<size_t>(rank_)];
  const RankInfo& p = infos_[static_cast<size_t>(peer)];
  const bool canSeeDeath = p.pid > 0 && p.hostHash == me.hostHash && p.processHash != me.processHash;
  WaitSet ws;
  while (true) {
    *fd = -1;
    STRATA_RETURN_IF_ERROR(pollOpen(&o, fd));
    if (*fd >= 0) return OkStatus();
    if (aborted_.load(std::memory_order_relaxed)) return Status(strataAborted, "aborted");
    if (canSeeDeath && !processAlive(p.pid)) {
      STRATA_RETURN_IF_ERROR(pollOpen(&o, fd));  // it may have connected just before it died
      if (*fd >= 0) return OkStatus();
      return remoteError("rank {}: rank {} died (process {} is gone) before it connected", rank_, peer, p.pid);
    }
    if (net::nowSec() > deadline)
      return makeError(strataTimeout, "rank {}: rank {} did not connect within {} s", rank_, peer, timeoutSec_);
    ws.clear();
    addOpenWaitSources(o, &ws);
    pollFds(ws.fds, 100000);
  }
}

Status Bootstrap::startOpen(int peer, Kind kind, int index, int rail, bool initiator, Opening* o) {
  *o = Opening{};
  o->peer = peer;
  o->kind = kind;
  o->index = index;
  o->initiator = initiator;
  if (!initiator) return OkStatus();
  uint32_t from = 0;
  const RankInfo& p = infos_[static_cast<size_t>(peer)];
  const uint32_t to = railAddress(infos_[static_cast<size_t>(rank_)], p, rail, &from);
  if (rail >= 0)
    log::debug("rank {} connects to rank {} on rail {} (socket {}): {} -> {}", rank_, peer, rail, index,
               net::addrToString(from, 0), net::addrToString(to, p.port));
  Status st = net::startConnect(to, p.port, from, &o->fd);
  if (!st.ok()) return remoteError("rank {} cannot connect to rank {}: {}", rank_, peer, st.message());
  return OkStatus();
}

Status Bootstrap::pollOpen(Opening* o, int* fd) {
  *fd = -1;
  if (!o->initiator) {
    drainListener();
    for (size_t i = 0; i < pending_.size(); ++i) {
      const Pending& p = pending_[i];
      if (p.kind == o->kind && p.rank == o->peer && p.index == o->index) {
        *fd = p.fd;
        pending_.erase(pending_.begin() + static_cast<long>(i));
        return OkStatus();
      }
    }
    return OkStatus();
  }
  if (!o->connected) {
    Status st = net::finishConnect(o->fd, &o->connected);
    if (!st.ok()) {
      net::closeFd(&o->fd);
      return remoteError("rank {} cannot connect to rank {} (it exited or failed?): {}", rank_, o->peer,
                         st.message());
    }
    if (!o->connected) return OkStatus();
  }
  Hello h{kHelloMagic, o->kind, {}, commTag_, rank_, o->index};
  memcpy(h.secret, secret_, 16);
  while (o->helloSent < sizeof(h)) {
    ssize_t w = ::send(o->fd, reinterpret_cast<const char*>(&h) + o->helloSent, sizeof(h) - o->helloSent,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return OkStatus();
    if (w < 0) {
      net::closeFd(&o->fd);
      return remoteError("rank {} cannot connect to rank {}: {}", rank_, o->peer, strerror(errno));
    }
    o->helloSent += static_cast<size_t>(w);
  }
  *fd = o->fd;
  o->fd = -1;
  return OkStatus();
}

void Bootstrap::addOpenWaitSources(const Opening& o, WaitSet* ws) const {
  if (o.initiator) {
    if (o.fd >= 0) ws->fds.push_back(pollfd{o.fd, POLLOUT, 0});
    return;
  }
  ws->fds.push_back(pollfd{listenFd_, POLLIN, 0});
  for (const HalfOpen& h : halfOpen_) ws->fds.push_back(pollfd{h.fd, POLLIN, 0});
}

// Sends `sn` bytes on sfd while receiving `rn` bytes on rfd, so that two ranks exchanging large
// blocks never both wait on a full socket buffer.
static Status exchange(int sfd, const char* sp, size_t sn, int rfd, char* rp, size_t rn, double deadline,
                       const std::atomic<bool>* abort, int to, int from) {
  while (sn > 0 || rn > 0) {
    if (sn > 0) {
      ssize_t w = ::send(sfd, sp, sn, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w > 0) {
        sp += w;
        sn -= static_cast<size_t>(w);
      } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return remoteError("connection to rank {} broke while sending: {}", to, strerror(errno));
      }
    }
    if (rn > 0) {
      ssize_t r = ::recv(rfd, rp, rn, MSG_DONTWAIT);
      if (r > 0) {
        rp += r;
        rn -= static_cast<size_t>(r);
      } else if (r == 0) {
        return remoteError("rank {} closed the connection (peer exited or failed)", from);
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return remoteError("connection to rank {} broke while receiving: {}", from, strerror(errno));
      }
    }
    if (sn == 0 && rn == 0) break;
    if (abort->load(std::memory_order_relaxed)) return Status(strataAborted, "aborted");
    if (net::nowSec() > deadline)
      return makeError(strataTimeout, "timed out exchanging setup data with ranks {} and {}", to, from);
    std::vector<pollfd> fds;
    if (sn > 0) fds.push_back(pollfd{sfd, POLLOUT, 0});
    if (rn > 0) fds.push_back(pollfd{rfd, POLLIN, 0});
    pollFds(fds, 100000);
  }
  return OkStatus();
}

Status Bootstrap::allGather(const void* mine, void* all, size_t bytes) {
  char* a = static_cast<char*>(all);
  const int n = nranks_;
  if (n == 1) {
    if (a != mine) memmove(a, mine, bytes);
    return OkStatus();
  }
  // Bruck: tmp block i holds rank (rank + i)'s; round k sends the first min(2^k, n - have) blocks
  // to rank - 2^k and appends as many from rank + 2^k.
  std::vector<char> tmp(static_cast<size_t>(n) * bytes);
  memcpy(tmp.data(), mine, bytes);
  const double deadline = net::nowSec() + timeoutSec_;
  int have = 1;
  for (int k = 0; have < n; ++k) {
    const int cnt = std::min(1 << k, n - have);
    int sfd = -1, rfd = -1;
    STRATA_RETURN_IF_ERROR(partners(k, &sfd, &rfd));
    const int to = ((rank_ - (1 << k)) % n + n) % n, from = (rank_ + (1 << k)) % n;
    STRATA_RETURN_IF_ERROR(exchange(sfd, tmp.data(), static_cast<size_t>(cnt) * bytes, rfd,
                                    tmp.data() + static_cast<size_t>(have) * bytes, static_cast<size_t>(cnt) * bytes,
                                    deadline, &aborted_, to, from));
    have += cnt;
  }
  for (int i = 0; i < n; ++i)
    memcpy(a + static_cast<size_t>((rank_ + i) % n) * bytes, tmp.data() + static_cast<size_t>(i) * bytes, bytes);
  return OkStatus();
}

Status Bootstrap::barrier() {
  std::vector<char> all(static_cast<size_t>(nranks_));
  char one = 1;
  return allGather(&one, all.data(), 1);
}

namespace wire {

std::string joinRefusal(const JoinMsg& m, int expectNranks, int roundNranks) {
  if (m.nranks < 1 || m.nranks > kMaxRanks)
    return fmt::format("bootstrap: nranks {} is out of range [1, {}]", m.nranks, kMaxRanks);
  if (expectNranks > 0 && m.nranks != expectNranks)
    return fmt::format("bootstrap: rank {} claims {} ranks; this job has {}", m.rank, m.nranks, expectNranks);
  if (roundNranks > 0 && m.nranks != roundNranks)
    return fmt::format("bootstrap: rank {} of {} conflicts with this round ({} ranks)", m.rank, m.nranks, roundNranks);
  if (m.rank < 0 || m.rank >= m.nranks)
    return fmt::format("bootstrap: rank {} is out of range [0, {})", m.rank, m.nranks);
  return std::string();
}

const char* helloProblem(const Hello& h, const uint8_t secret[16], uint64_t commTag, int nranks) {
  if (h.magic != kHelloMagic || !equalConstantTime(h.secret, secret, 16) || h.commTag != commTag)
    return "did not prove the communicator's secret";
  if (h.rank < 0 || h.rank >= nranks || h.index < 0 || h.index > (1 << 20) ||
      (h.kind != Bootstrap::kRing && h.kind != Bootstrap::kData && h.kind != Bootstrap::kNetOob &&
       h.kind != Bootstrap::kShrink && h.kind != Bootstrap::kProbe))
    return "sent a hello that names no connection of this communicator";
  return nullptr;
}

Status joinReplyError(const JoinReply& r, const std::string& msg) {
  // Only codes the enum has may become one (another value would be undefined behaviour).
  if (r.status > strataSuccess && r.status < strataNumResults) return Status(static_cast<strataResult_t>(r.status), msg);
  return remoteError("bootstrap root answered with an unknown status {}: {}", r.status, msg);
}

}  // namespace wire

}  // namespace strata
