// bootstrap.cc: unique ids, the root rendezvous server, and each rank's setup ring.
//
// Join protocol (all integers little-endian host order; one machine architecture per job):
//   rank -> root: JoinMsg {magic, secret, rank, nranks, RankInfo}
//   root -> rank: JoinReply {status, nranks, msgLen} then RankInfo[nranks] or an error message.
// The root waits for all ranks of a round; if some never arrive within the join timeout (counted
// from the first arrival), every waiting rank gets "rank R of N did not join within T s".
#include "transport/bootstrap.h"

#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "transport/config.h"
#include "transport/log.h"
#include "transport/socket.h"

namespace strata {
namespace {

constexpr uint32_t kIdMagic = 0x53545241;    // "STRA"
constexpr uint32_t kJoinMagic = 0x4a4f494e;  // "JOIN"
constexpr uint32_t kHelloMagic = 0x48454c4f; // "HELO"

struct JoinMsg {
  uint32_t magic;
  uint8_t secret[16];
  int32_t rank;
  int32_t nranks;
  RankInfo info;
};

struct JoinReply {
  int32_t status;  // strataResult_t
  int32_t nranks;
  uint32_t msgLen;
  uint64_t roundTag;  // fresh per rendezvous round: names this communicator's resources
};

struct Hello {
  uint32_t magic;
  uint32_t kind;
  uint8_t secret[16];
  uint64_t commTag;
  int32_t rank;
  int32_t index;
};

void randomBytes(void* p, size_t n) {
  uint8_t* c = static_cast<uint8_t*>(p);
  while (n > 0) {
    ssize_t r = getrandom(c, n, 0);
    if (r > 0) {
      c += r;
      n -= static_cast<size_t>(r);
    }
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

// Serves rounds of joins on `listenFd` until one round completes (one-shot) or forever.
void rootServe(int listenFd, UniqueIdData id, bool persistent) {
  do {
    std::vector<int> fds;
    std::vector<RankInfo> infos;
    int nranks = -1;
    double deadline = 1e300;
    bool done = false;
    while (!done) {
      int fd = -1;
      Status st = net::acceptOne(listenFd, deadline, nullptr, &fd);
      if (!st.ok()) {
        if (st.code() != strataTimeout) {
          log::warn("bootstrap root: {}", st.message());
          continue;
        }
        std::vector<int> missing;
        for (int r = 0; r < nranks; ++r)
          if (fds[r] < 0) missing.push_back(r);
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
        log::warn("bootstrap root: {}", msg);
        break;
      }
      JoinMsg m{};
      st = net::recvAll(fd, &m, sizeof(m), net::nowSec() + 10, nullptr, "joining rank");
      if (!st.ok() || m.magic != kJoinMagic || memcmp(m.secret, id.secret, 16) != 0) {
        log::warn("bootstrap root: dropped a connection with a bad join message or secret");
        if (st.ok()) replyError(fd, strataInvalidArgument, "bootstrap: wrong unique id secret");
        net::closeFd(&fd);
        continue;
      }
      if (nranks < 0) {
        if (m.nranks < 1) {
          replyError(fd, strataInvalidArgument, fmt::format("bootstrap: nranks {} < 1", m.nranks));
          net::closeFd(&fd);
          continue;
        }
        nranks = m.nranks;
        fds.assign(nranks, -1);
        infos.assign(nranks, RankInfo{});
        deadline = net::nowSec() + config().joinTimeoutSec;
      }
      if (m.nranks != nranks || m.rank < 0 || m.rank >= nranks || fds[m.rank] >= 0) {
        replyError(fd, strataInvalidArgument,
                   fmt::format("bootstrap: rank {} of {} conflicts with this round ({} ranks{})", m.rank,
                               m.nranks, nranks,
                               (m.rank >= 0 && m.rank < nranks && fds[m.rank] >= 0) ? ", rank taken" : ""));
        net::closeFd(&fd);
        continue;
      }
      fds[m.rank] = fd;
      infos[m.rank] = m.info;
      if (std::all_of(fds.begin(), fds.end(), [](int f) { return f >= 0; })) {
        JoinReply r{strataSuccess, nranks, 0, 0};
        randomBytes(&r.roundTag, sizeof(r.roundTag));
        for (int& f : fds) {
          double dl = net::nowSec() + 10;
          Status s1 = net::sendAll(f, &r, sizeof(r), dl, nullptr, "joined rank");
          if (s1.ok()) s1 = net::sendAll(f, infos.data(), sizeof(RankInfo) * infos.size(), dl, nullptr, "joined rank");
          if (!s1.ok()) log::warn("bootstrap root: {}", s1.message());
          net::closeFd(&f);
        }
        done = true;
      }
    }
  } while (persistent);
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

Status startRootServer(UniqueIdData* d, bool persistent) {
  int fd = -1;
  uint16_t port = 0;
  Status st = net::listenAny(d->rootPort, &fd, &port);
  if (!st.ok()) return Status(st.code(), "bootstrap root: " + st.message());
  d->rootPort = port;
  d->magic = kIdMagic;
  std::thread(rootServe, fd, *d, persistent).detach();
  return OkStatus();
}

Status createUniqueId(strataUniqueId* out, bool persistent, uint32_t rootAddr) {
  UniqueIdData d;
  d.rootAddr = rootAddr ? rootAddr : net::advertisedAddr();
  d.rootPort = 0;
  randomBytes(d.secret, sizeof(d.secret));
  randomBytes(&d.commTag, sizeof(d.commTag));
  STRATA_RETURN_IF_ERROR(startRootServer(&d, persistent));
  *out = encodeUniqueId(d);
  return OkStatus();
}

Bootstrap::~Bootstrap() {
  net::closeFd(&nextFd_);
  net::closeFd(&prevFd_);
  net::closeFd(&listenFd_);
  for (Pending& p : pending_) net::closeFd(&p.fd);
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
  Status st = net::connectTo(d.rootAddr, d.rootPort, deadline, &fd);
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
  JoinReply r{};
  st = net::sendAll(fd, &m, sizeof(m), deadline, nullptr, rootName);
  // The root answers when all ranks are in or its own join timeout fires; allow it a margin.
  if (st.ok()) st = net::recvAll(fd, &r, sizeof(r), deadline + 5, nullptr, rootName);
  std::vector<RankInfo> infos;
  if (st.ok() && r.status != strataSuccess) {
    std::string msg(std::min<uint32_t>(r.msgLen, 4096), '\0');
    (void)net::recvAll(fd, msg.data(), msg.size(), net::nowSec() + 2, nullptr, rootName);
    st = Status(static_cast<strataResult_t>(r.status), msg);
  } else if (st.ok()) {
    if (r.nranks != nranks) st = internalError("bootstrap root answered with {} ranks, expected {}", r.nranks, nranks);
    infos.resize(nranks);
    if (st.ok()) st = net::recvAll(fd, infos.data(), sizeof(RankInfo) * nranks, deadline + 5, nullptr, rootName);
  } else if (st.code() == strataTimeout) {
    st = makeError(strataTimeout, "rank {} of {}: not all ranks joined within {} s", rank, nranks, timeoutSec);
  }
  net::closeFd(&fd);
  if (!st.ok()) {
    ::close(lfd);
    return st;
  }
  return fromInfos(lfd, rank, std::move(infos), r.roundTag, d.secret, timeoutSec, out);
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
  STRATA_RETURN_IF_ERROR(b->connectRing());
  *out = std::move(b);
  return OkStatus();
}

Status Bootstrap::connectRing() {
  if (nranks_ == 1) return OkStatus();
  double deadline = net::nowSec() + timeoutSec_;
  STRATA_RETURN_IF_ERROR(connectPeer((rank_ + 1) % nranks_, kRing, 0, deadline, &nextFd_));
  return acceptPeer((rank_ + nranks_ - 1) % nranks_, kRing, 0, deadline, &prevFd_);
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

Status Bootstrap::acceptPeer(int peer, Kind kind, int index, double deadline, int* fd) {
  while (true) {
    for (size_t i = 0; i < pending_.size(); ++i) {
      if (pending_[i].kind == kind && pending_[i].rank == peer && pending_[i].index == index) {
        *fd = pending_[i].fd;
        pending_.erase(pending_.begin() + static_cast<long>(i));
        return OkStatus();
      }
    }
    int c = -1;
    Status st = net::acceptOne(listenFd_, deadline, &aborted_, &c);
    if (st.code() == strataTimeout)
      return makeError(strataTimeout, "rank {}: rank {} did not connect within {} s", rank_, peer, timeoutSec_);
    STRATA_RETURN_IF_ERROR(st);
    Hello h{};
    st = net::recvAll(c, &h, sizeof(h), net::nowSec() + 10, &aborted_, "a connecting peer");
    if (!st.ok() || h.magic != kHelloMagic || memcmp(h.secret, secret_, 16) != 0 || h.commTag != commTag_ ||
        h.rank < 0 || h.rank >= nranks_) {
      log::warn("rank {}: dropped a connection with a bad hello", rank_);
      net::closeFd(&c);
      continue;
    }
    pending_.push_back(Pending{h.kind, h.rank, h.index, c});
  }
}

Status Bootstrap::allGather(const void* mine, void* all, size_t bytes) {
  char* a = static_cast<char*>(all);
  if (a + static_cast<size_t>(rank_) * bytes != mine) memcpy(a + static_cast<size_t>(rank_) * bytes, mine, bytes);
  double deadline = net::nowSec() + timeoutSec_;
  int prev = (rank_ + nranks_ - 1) % nranks_;
  std::string next = fmt::format("rank {}", (rank_ + 1) % nranks_), from = fmt::format("rank {}", prev);
  // Step s: forward the block of rank (rank - s), receive the block of rank (rank - s - 1).
  for (int s = 0; s < nranks_ - 1; ++s) {
    int sendBlock = (rank_ - s + nranks_) % nranks_;
    int recvBlock = (rank_ - s - 1 + nranks_) % nranks_;
    STRATA_RETURN_IF_ERROR(net::sendAll(nextFd_, a + static_cast<size_t>(sendBlock) * bytes, bytes, deadline,
                                        &aborted_, next));
    STRATA_RETURN_IF_ERROR(net::recvAll(prevFd_, a + static_cast<size_t>(recvBlock) * bytes, bytes, deadline,
                                        &aborted_, from));
  }
  return OkStatus();
}

Status Bootstrap::barrier() {
  std::vector<char> all(static_cast<size_t>(nranks_));
  char one = 1;
  return allGather(&one, all.data(), 1);
}

}  // namespace strata
