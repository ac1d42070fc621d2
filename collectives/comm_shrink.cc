// comm_shrink.cc: Comm::shrink, the communicator of the surviving ranks. It must work when peers
// are dead, so it cannot use the parent's collectives: the lowest survivor (the gatherer) accepts
// one connection from every other survivor on its listener, which the parent's infos name; each
// sends its new listener's address and the ranks it excludes, and gets back the members and their
// infos (or the error that stops them all). The new bootstrap is then made from those infos, as a
// split does.
//
// By default every survivor names the same dead ranks. With STRATA_SHRINK_DETECT each names only
// what it knows (maybe nothing) and the survivors agree on the rest: a rank whose listener refuses
// connections is dead (a survivor skips such a gatherer and goes to the next lowest rank; the
// gatherer probes ranks that have not come after a moment), the ranks anyone names are out, and a
// rank that has not come by the timeout is left out. That is agreement for ranks that crashed; a
// rank that hangs (alive, listening) costs the timeout.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/comm.h"
#include "topology/host_identity.h"
#include "transport/config.h"
#include "transport/log.h"
#include "transport/socket.h"
#include "transport/waiter.h"

namespace strata {
namespace {

constexpr uint32_t kShrinkMagic = 0x53484b32;  // "SHK2"
constexpr double kConnectSec = 0.2;            ///< DETECT: a gatherer refusing this long is dead
constexpr double kProbeAfterSec = 0.3;         ///< DETECT: then ranks not yet come are probed
constexpr double kProbeSec = 0.3;              ///< how long a probe retries a refused connection
constexpr double kTellExcludedSec = 2.0;       ///< DETECT: how long a named rank still alive may take to come

/// What a survivor sends the gatherer; `nexclude` int32 ranks follow.
struct ShrinkJoin {
  uint32_t magic;
  int32_t parentRank;
  uint32_t detect;    ///< STRATA_SHRINK_DETECT given
  uint32_t nexclude;  ///< ranks it excludes (at most the parent's size)
  RankInfo info;      ///< its new listener and identity
};

/// The gatherer's answer; on success `members` parent ranks (int32) and as many RankInfos follow.
struct ShrinkReply {
  int32_t status;  ///< strataResult_t
  int32_t members;
  char message[240];
};

std::string listText(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < 16; ++i) s += (s.empty() ? "" : ",") + std::to_string(v[i]);
  if (v.size() > 16) s += fmt::format(",... ({} ranks)", v.size());
  return s.empty() ? "(none)" : s;
}

/// A survivor that came: its socket, what it sent.
struct Joined {
  int fd = -1;
  std::vector<int> exclude;
  RankInfo info;
};

/// The gatherer's side. `exclude`: this rank's list (sorted). Fills members (parent ranks,
/// ascending, this rank first) and their infos; every joined survivor gets the answer.
class Gathering {
 public:
  Gathering(Bootstrap* bs, int rank, int nranks, int index, bool detect, double timeout, std::vector<int> exclude)
      : bs_(bs), rank_(rank), nranks_(nranks), index_(index), detect_(detect), timeout_(timeout),
        excludeMine_(std::move(exclude)), out_(static_cast<size_t>(nranks), 0), joined_(static_cast<size_t>(nranks)) {
    for (int r : excludeMine_) out_[static_cast<size_t>(r)] = 1;
  }
  ~Gathering() {
    for (Joined& j : joined_) net::closeFd(&j.fd);
  }

  Status run(const RankInfo& mine, double deadline, std::vector<int>* members, std::vector<RankInfo>* infos) {
    Status st = collect(deadline);
    members->clear();
    infos->clear();
    if (st.ok()) {
      members->push_back(rank_);
      infos->push_back(mine);
      for (int r = 0; r < nranks_; ++r)
        if (joined_[static_cast<size_t>(r)].fd >= 0 && !out_[static_cast<size_t>(r)]) {
          members->push_back(r);
          infos->push_back(joined_[static_cast<size_t>(r)].info);
        }
      if (!found_.empty())
        log::warn("rank {}: shrink: rank(s) {} found dead (refused the connection or never came)", rank_,
                  listText(found_));
    }
    answer(st, *members, *infos, deadline);
    if (st.ok() && detect_) tellTheExcluded(std::min(deadline, net::nowSec() + kTellExcludedSec));
    return st;
  }

 private:
  /// Takes every survivor's join until all have come (or, DETECT, are known dead). After the
  /// first problem (lists that differ, a malformed join) the others still coming get a moment
  /// to join, so that they are told it too.
  Status collect(double deadline) {
    Status problem;
    std::vector<int> waiting;
    for (int r = 0; r < nranks_; ++r)
      if (r != rank_ && !out_[static_cast<size_t>(r)]) waiting.push_back(r);
    std::vector<Bootstrap::Opening> opening(static_cast<size_t>(nranks_));
    for (int r : waiting) STRATA_RETURN_IF_ERROR(bs_->startOpen(r, Bootstrap::kShrink, index_, -1, false, &opening[r]));
    std::vector<char> probed(static_cast<size_t>(nranks_), 0);
    const double probeAt = net::nowSec() + kProbeAfterSec;
    WaitSet ws;
    while (true) {
      for (size_t i = 0; i < waiting.size();) {
        const int r = waiting[i];
        int fd = -1;
        STRATA_RETURN_IF_ERROR(bs_->pollOpen(&opening[static_cast<size_t>(r)], &fd));
        if (fd < 0) {
          ++i;
          continue;
        }
        joined_[static_cast<size_t>(r)].fd = fd;
        const Status st = readJoin(r, deadline);
        if (!st.ok() && problem.ok()) {
          problem = st;
          deadline = std::min(deadline, net::nowSec() + kTellExcludedSec);
        }
        waiting.erase(waiting.begin() + static_cast<long>(i));
      }
      // Ranks someone named (DETECT) are no longer waited for.
      waiting.erase(std::remove_if(waiting.begin(), waiting.end(), [&](int r) { return out_[static_cast<size_t>(r)]; }),
                    waiting.end());
      if (waiting.empty()) return problem;
      const double now = net::nowSec();
      if (detect_ && now >= probeAt) {
        for (size_t i = 0; i < waiting.size();) {
          const int r = waiting[i];
          if (!probed[static_cast<size_t>(r)]++ && !bs_->probePeer(r, net::nowSec() + kProbeSec)) {
            markFound(r);
            waiting.erase(waiting.begin() + static_cast<long>(i));
          } else {
            ++i;
          }
        }
        if (waiting.empty()) return problem;
      }
      if (now > deadline) {
        if (!problem.ok()) return problem;
        if (!detect_)
          return Status(strataTimeout, fmt::format("rank {} did not join the shrink within {} s (is it dead too? then "
                                                   "exclude it)",
                                                   waiting.front(), timeout_));
        for (int r : waiting) markFound(r);  // alive perhaps, but not taking part
        return OkStatus();
      }
      ws.clear();
      bs_->addOpenWaitSources(opening[static_cast<size_t>(waiting.front())], &ws);
      pollFds(ws.fds, 50000);
    }
  }

  /// DETECT: a rank another survivor named may be alive and on its way: while it lives (its
  /// listener answers a probe) and until `by`, take its join and tell it it was left out, rather
  /// than leave it waiting for an answer until its timeout.
  void tellTheExcluded(double by) {
    std::vector<int> alive;
    for (int r = 0; r < nranks_; ++r)
      if (r != rank_ && out_[static_cast<size_t>(r)] && joined_[static_cast<size_t>(r)].fd < 0 &&
          std::find(found_.begin(), found_.end(), r) == found_.end() && bs_->probePeer(r, net::nowSec() + kProbeSec))
        alive.push_back(r);
    std::vector<Bootstrap::Opening> opening(alive.size());
    for (size_t i = 0; i < alive.size(); ++i)
      if (!bs_->startOpen(alive[i], Bootstrap::kShrink, index_, -1, false, &opening[i]).ok()) return;
    WaitSet ws;
    while (!alive.empty() && net::nowSec() < by) {
      for (size_t i = 0; i < alive.size();) {
        int fd = -1;
        if (!bs_->pollOpen(&opening[i], &fd).ok()) return;
        if (fd < 0) {
          ++i;
          continue;
        }
        ShrinkReply reply{};
        reply.status = strataInvalidUsage;
        const std::string why = fmt::format("rank {} came to the shrink, but another survivor excludes it", alive[i]);
        std::strncpy(reply.message, why.c_str(), sizeof(reply.message) - 1);
        (void)net::sendAll(fd, &reply, sizeof(reply), by + 1, nullptr, fmt::format("rank {}", alive[i]));
        net::closeFd(&fd);
        alive.erase(alive.begin() + static_cast<long>(i));
        opening.erase(opening.begin() + static_cast<long>(i));
      }
      if (alive.empty()) break;
      ws.clear();
      bs_->addOpenWaitSources(opening.front(), &ws);
      pollFds(ws.fds, 20000);
    }
  }

  void markFound(int r) {
    out_[static_cast<size_t>(r)] = 1;
    found_.push_back(r);
  }

  /// Reads rank r's join from its socket and checks it against this rank's.
  Status readJoin(int r, double deadline) {
    Joined& j = joined_[static_cast<size_t>(r)];
    const std::string who = fmt::format("rank {}", r);
    ShrinkJoin h;
    Status st = net::recvAll(j.fd, &h, sizeof(h), deadline, nullptr, who);
    if (!st.ok()) return Status(strataRemoteError, fmt::format("rank {} broke off the shrink: {}", r, st.message()));
    if (h.magic != kShrinkMagic || h.parentRank != r || h.nexclude > static_cast<uint32_t>(nranks_))
      return internalError("rank {} sent a malformed shrink message", r);
    j.exclude.resize(h.nexclude);
    if (h.nexclude > 0) STRATA_RETURN_IF_ERROR(net::recvAll(j.fd, j.exclude.data(), h.nexclude * sizeof(int), deadline,
                                                            nullptr, who));
    j.info = h.info;
    if ((h.detect != 0) != detect_)
      return invalidUsage("survivors shrink differently: rank {} {} STRATA_SHRINK_DETECT, rank {} {}", rank_,
                          detect_ ? "with" : "without", r, h.detect ? "with" : "without");
    if (!detect_) {
      if (j.exclude != excludeMine_)
        return invalidUsage("survivors pass different exclude lists: rank {} excludes {}, rank {} excludes {}", rank_,
                            listText(excludeMine_), r, listText(j.exclude));
      return OkStatus();
    }
    for (int x : j.exclude) {
      if (x < 0 || x >= nranks_ || x == r) return internalError("rank {} sent a malformed shrink message", r);
      if (x != rank_) out_[static_cast<size_t>(x)] = 1;  // it came to this rank: it counts this rank alive
    }
    return OkStatus();
  }

  /// Sends every joined survivor the outcome: the members or why not.
  void answer(const Status& st, const std::vector<int>& members, const std::vector<RankInfo>& infos, double deadline) {
    for (int r = 0; r < nranks_; ++r) {
      Joined& j = joined_[static_cast<size_t>(r)];
      if (j.fd < 0) continue;
      ShrinkReply reply{};
      std::string why = st.message();
      reply.status = st.code();
      if (st.ok() && out_[static_cast<size_t>(r)]) {  // it came, but another survivor counts it dead
        reply.status = strataInvalidUsage;
        why = fmt::format("rank {} came to the shrink, but another survivor excludes it", r);
      }
      reply.members = static_cast<int32_t>(members.size());
      std::strncpy(reply.message, why.c_str(), sizeof(reply.message) - 1);
      const std::string who = fmt::format("rank {}", r);
      Status s = net::sendAll(j.fd, &reply, sizeof(reply), deadline, nullptr, who);
      if (s.ok() && reply.status == strataSuccess) {
        s = net::sendAll(j.fd, members.data(), members.size() * sizeof(int), deadline, nullptr, who);
        if (s.ok()) s = net::sendAll(j.fd, infos.data(), infos.size() * sizeof(RankInfo), deadline, nullptr, who);
      }
      if (!s.ok()) log::warn("rank {}: shrink: cannot answer rank {}: {}", rank_, r, s.message());
      net::closeFd(&j.fd);
    }
  }

  Bootstrap* bs_;
  int rank_, nranks_, index_;
  bool detect_;
  double timeout_;
  std::vector<int> excludeMine_;
  std::vector<char> out_;     ///< per parent rank: excluded or found dead
  std::vector<int> found_;    ///< found dead by this gathering (DETECT)
  std::vector<Joined> joined_;
};

/// A survivor's side: joins `gatherer` and reads the members and their infos. `unreachable`: the
/// gatherer refused the connection, or broke it off without an answer (it is dead).
Status joinGathering(Bootstrap* bs, int gatherer, int index, const ShrinkJoin& mine, const std::vector<int>& exclude,
                     int nranks, double connectBy, double deadline, double answerBy, std::vector<int>* members,
                     std::vector<RankInfo>* infos, bool* unreachable) {
  *unreachable = false;
  int fd = -1;
  Status st = bs->connectPeer(gatherer, Bootstrap::kShrink, index, connectBy, &fd);
  if (!st.ok() && fd < 0) {
    *unreachable = true;
    return st;
  }
  const std::string who = fmt::format("rank {} (gathering the shrink)", gatherer);
  if (st.ok()) st = net::sendAll(fd, &mine, sizeof(mine), deadline, nullptr, who);
  if (st.ok() && !exclude.empty()) st = net::sendAll(fd, exclude.data(), exclude.size() * sizeof(int), deadline, nullptr, who);
  ShrinkReply reply{};
  if (st.ok()) st = net::recvAll(fd, &reply, sizeof(reply), answerBy, nullptr, who);
  const bool gotReply = st.ok();
  if (st.ok() && reply.status != strataSuccess) {
    reply.message[sizeof(reply.message) - 1] = '\0';
    st = reply.status > strataSuccess && reply.status < strataNumResults
             ? Status(static_cast<strataResult_t>(reply.status), reply.message)
             : remoteError("rank {} answered the shrink with an unknown status {}", gatherer, reply.status);
  } else if (st.ok() && (reply.members < 1 || reply.members > nranks)) {
    st = internalError("rank {} gathered {} survivors of {} ranks", gatherer, reply.members, nranks);
  }
  if (st.ok()) {
    members->resize(static_cast<size_t>(reply.members));
    infos->resize(static_cast<size_t>(reply.members));
    st = net::recvAll(fd, members->data(), members->size() * sizeof(int), answerBy, nullptr, who);
    if (st.ok()) st = net::recvAll(fd, infos->data(), infos->size() * sizeof(RankInfo), answerBy, nullptr, who);
  }
  net::closeFd(&fd);
  // Broken off without an answer (EOF, reset): the gatherer died after it took the connection.
  if (!st.ok() && !gotReply && st.code() == strataRemoteError) *unreachable = true;
  return st;
}

}  // namespace

Status Comm::shrink(const std::vector<int>& exclude, const strataConfig_t* cfg, int flags,
                    std::unique_ptr<Comm>* out) {
  *out = nullptr;
  if (flags & STRATA_SHRINK_ABORT) revoke();
  const bool detect = (flags & STRATA_SHRINK_DETECT) != 0;
  const int index = static_cast<int>(shrinkCount_++);
  const double timeout = requestedTimeout(cfg) > 0 ? requestedTimeout(cfg) : config().joinTimeoutSec;
  const double deadline = net::nowSec() + timeout;
  // The gatherer answers by the common deadline, naming a survivor that did not come: wait a
  // little past it for that answer.
  const double answerBy = deadline + std::min(5.0, timeout);

  ShrinkJoin mine;
  std::memset(static_cast<void*>(&mine), 0, sizeof(mine));
  mine.magic = kShrinkMagic;
  mine.parentRank = rank_;
  mine.detect = detect ? 1 : 0;
  STRATA_RETURN_IF_ERROR(localRankInfo(rank_, nranks_, &mine.info));  // its rank is set below
  // A survivor keeps its node (a virtual node of the topology file stays the same node).
  mine.info.nodeHash = bootstrap_->infos()[rank_].nodeHash;
  std::memcpy(mine.info.nodeName, bootstrap_->infos()[rank_].nodeName, sizeof(mine.info.nodeName));
  mine.info.commFlags = requestedCommFlags(cfg) | (deterministic_ ? RankInfo::kCommDeterministic : 0);
  int lfd = -1;
  STRATA_RETURN_IF_ERROR(Bootstrap::openListener(&lfd, &mine.info));

  // The parent may have failed (its bootstrap aborted): its listener and infos are still good.
  bootstrap_->resume();
  std::vector<int> known = exclude;  // sorted; DETECT adds gatherers found dead
  std::vector<int> members;
  std::vector<RankInfo> infos;
  Status st;
  while (true) {
    int gatherer = 0;
    while (std::binary_search(known.begin(), known.end(), gatherer)) ++gatherer;
    if (gatherer == rank_) {
      Gathering g(bootstrap_.get(), rank_, nranks_, index, detect, timeout, known);
      st = g.run(mine.info, deadline, &members, &infos);
      break;
    }
    mine.nexclude = static_cast<uint32_t>(known.size());
    bool unreachable = false;
    const double connectBy = detect ? std::min(deadline, net::nowSec() + kConnectSec) : deadline;
    st = joinGathering(bootstrap_.get(), gatherer, index, mine, known, nranks_, connectBy, deadline, answerBy, &members,
                       &infos, &unreachable);
    if (!(detect && unreachable)) break;
    log::info("rank {}: shrink: rank {} is gone ({}); the next rank gathers", rank_, gatherer, st.message());
    known.insert(std::upper_bound(known.begin(), known.end(), gatherer), gatherer);
  }
  const std::string excludeText = listText(exclude);
  if (!st.ok()) {
    ::close(lfd);
    return Status(st.code(), fmt::format("rank {}: shrink without {}{}: {}", rank_, excludeText,
                                         detect ? " (and any found dead)" : "", st.message()));
  }
  const auto me = std::find(members.begin(), members.end(), rank_);
  if (me == members.end() || !std::is_sorted(members.begin(), members.end())) {
    ::close(lfd);
    return internalError("rank {}: shrink: the gatherer's member list {} is malformed", rank_, listText(members));
  }
  const int newRank = static_cast<int>(me - members.begin());
  for (size_t i = 0; i < infos.size(); ++i) infos[i].rank = static_cast<int>(i);

  // A tag no other communicator of this job uses: parent tag, shrink number and the members.
  uint64_t parts[4] = {bootstrap_->commTag(), 0x5348524bu, static_cast<uint64_t>(index),
                       topology::hashBytes(members.data(), members.size() * sizeof(int))};
  const uint64_t tag = topology::hashBytes(parts, sizeof(parts));
  std::unique_ptr<Bootstrap> bs;
  STRATA_RETURN_IF_ERROR(Bootstrap::fromInfos(lfd, newRank, std::move(infos), tag, bootstrap_->secret(),
                                              config().joinTimeoutSec, &bs));
  std::unique_ptr<Comm> c(new Comm());
  STRATA_RETURN_IF_ERROR(c->init(std::move(bs), cfg, timeoutSec_));  // as a split, it keeps the parent's timeout
  if (newRank == 0)
    log::info("rank {}: shrank {} ranks to {} (without {})", rank_, nranks_, members.size(),
              listText([&] {
                std::vector<int> gone;
                for (int r = 0; r < nranks_; ++r)
                  if (!std::binary_search(members.begin(), members.end(), r)) gone.push_back(r);
                return gone;
              }()));
  *out = std::move(c);
  return OkStatus();
}

}  // namespace strata
