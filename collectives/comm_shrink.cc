// comm_shrink.cc: Comm::shrink, the communicator of the surviving ranks. It must work when peers
// are dead, so it cannot use the parent's collectives: the lowest survivor (the gatherer) accepts
// one connection from every other survivor on its listener, which the parent's infos name;
// each sends its new listener's address and its exclude list, and gets back every survivor's
// info (or the error that stops them all). The new bootstrap is then made from those infos, as
// a split does.
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

namespace strata {
namespace {

constexpr uint32_t kShrinkMagic = 0x53484b31;  // "SHK1"

/// What a survivor sends the gatherer.
struct ShrinkJoin {
  uint32_t magic;
  int32_t parentRank;
  uint64_t excludeDigest;
  char excludeText[120];  ///< the list as given, for the error when lists differ
  RankInfo info;          ///< its new listener and identity
};

/// The gatherer's answer; on success `members` RankInfos follow.
struct ShrinkReply {
  int32_t status;  ///< strataResult_t
  int32_t members;
  char message[240];
};

std::string listText(const std::vector<int>& v) {
  std::string s;
  for (int r : v) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s.empty() ? "(none)" : s;
}

/// Closes every socket in `fds`.
void closeAll(std::vector<int>* fds) {
  for (int& fd : *fds) net::closeFd(&fd);
}

}  // namespace

Status Comm::shrink(const std::vector<int>& exclude, const strataConfig_t* cfg, int flags,
                    std::unique_ptr<Comm>* out) {
  *out = nullptr;
  if (flags & STRATA_SHRINK_ABORT) revoke();
  std::vector<int> members;
  for (int r = 0; r < nranks_; ++r)
    if (!std::binary_search(exclude.begin(), exclude.end(), r)) members.push_back(r);
  const int newRank = static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  const int gatherer = members.front();
  const uint64_t index = shrinkCount_++;
  const double timeout = requestedTimeout(cfg) > 0 ? requestedTimeout(cfg) : config().joinTimeoutSec;
  const double deadline = net::nowSec() + timeout;
  const std::string excludeText = listText(exclude);
  const uint64_t digest = exclude.empty() ? 0 : topology::hashBytes(exclude.data(), exclude.size() * sizeof(int));

  ShrinkJoin mine;
  std::memset(static_cast<void*>(&mine), 0, sizeof(mine));
  mine.magic = kShrinkMagic;
  mine.parentRank = rank_;
  mine.excludeDigest = digest;
  std::strncpy(mine.excludeText, excludeText.c_str(), sizeof(mine.excludeText) - 1);
  STRATA_RETURN_IF_ERROR(localRankInfo(newRank, static_cast<int>(members.size()), &mine.info));
  // A survivor keeps its node (a virtual node of the topology file stays the same node).
  mine.info.nodeHash = bootstrap_->infos()[rank_].nodeHash;
  std::memcpy(mine.info.nodeName, bootstrap_->infos()[rank_].nodeName, sizeof(mine.info.nodeName));
  mine.info.commFlags = requestedCommFlags(cfg) | (deterministic_ ? RankInfo::kCommDeterministic : 0);
  int lfd = -1;
  STRATA_RETURN_IF_ERROR(Bootstrap::openListener(&lfd, &mine.info));

  // The parent may have failed (its bootstrap aborted): its listener and infos are still good.
  bootstrap_->resume();
  std::vector<RankInfo> infos(members.size());
  Status st;
  if (rank_ == gatherer) {
    std::vector<int> fds(members.size(), -1);
    std::string problem;
    strataResult_t code = strataSuccess;
    infos[0] = mine.info;
    for (size_t i = 1; i < members.size() && problem.empty(); ++i) {
      ShrinkJoin j;
      st = bootstrap_->acceptPeer(members[i], Bootstrap::kShrink, static_cast<int>(index), deadline, &fds[i]);
      if (st.ok())
        st = net::recvAll(fds[i], &j, sizeof(j), deadline, nullptr, fmt::format("rank {}", members[i]));
      if (!st.ok()) {
        code = st.code() == strataTimeout ? strataTimeout : strataRemoteError;
        problem = fmt::format("rank {} did not join the shrink within {} s (is it dead too? then exclude it): {}",
                              members[i], timeout, st.message());
        break;
      }
      j.excludeText[sizeof(j.excludeText) - 1] = '\0';
      if (j.magic != kShrinkMagic || j.parentRank != members[i]) {
        code = strataInternalError;
        problem = fmt::format("rank {} sent a malformed shrink message", members[i]);
      } else if (j.excludeDigest != digest) {
        code = strataInvalidUsage;
        problem = fmt::format("survivors pass different exclude lists: rank {} excludes {}, rank {} excludes {}",
                              gatherer, excludeText, members[i], j.excludeText);
      } else {
        infos[i] = j.info;
      }
    }
    ShrinkReply reply{};
    reply.status = code;
    reply.members = static_cast<int32_t>(members.size());
    std::strncpy(reply.message, problem.c_str(), sizeof(reply.message) - 1);
    for (size_t i = 1; i < members.size(); ++i) {
      if (fds[i] < 0) continue;
      const std::string who = fmt::format("rank {}", members[i]);
      Status s = net::sendAll(fds[i], &reply, sizeof(reply), deadline, nullptr, who);
      if (s.ok() && code == strataSuccess)
        s = net::sendAll(fds[i], infos.data(), infos.size() * sizeof(RankInfo), deadline, nullptr, who);
      if (!s.ok() && code == strataSuccess) {
        code = s.code();
        problem = fmt::format("cannot send the survivors' table to rank {}: {}", members[i], s.message());
      }
    }
    closeAll(&fds);
    st = code == strataSuccess ? OkStatus() : Status(code, problem);
  } else {
    int fd = -1;
    st = bootstrap_->connectPeer(gatherer, Bootstrap::kShrink, static_cast<int>(index), deadline, &fd);
    const std::string who = fmt::format("rank {} (gathering the shrink)", gatherer);
    if (st.ok()) st = net::sendAll(fd, &mine, sizeof(mine), deadline, nullptr, who);
    // The gatherer answers by the common deadline, naming a survivor that did not come: wait a
    // little past it for that answer.
    const double answerBy = deadline + std::min(5.0, timeout);
    ShrinkReply reply{};
    if (st.ok()) st = net::recvAll(fd, &reply, sizeof(reply), answerBy, nullptr, who);
    if (st.ok() && reply.status != strataSuccess) {
      reply.message[sizeof(reply.message) - 1] = '\0';
      st = Status(static_cast<strataResult_t>(reply.status), reply.message);
    } else if (st.ok() && reply.members != static_cast<int32_t>(members.size())) {
      st = internalError("rank {} gathered {} survivors, this rank counts {}", gatherer, reply.members, members.size());
    }
    if (st.ok()) st = net::recvAll(fd, infos.data(), infos.size() * sizeof(RankInfo), answerBy, nullptr, who);
    net::closeFd(&fd);
  }
  if (!st.ok()) {
    ::close(lfd);
    return Status(st.code(), fmt::format("rank {}: shrink without {}: {}", rank_, excludeText, st.message()));
  }
  for (size_t i = 0; i < infos.size(); ++i) infos[i].rank = static_cast<int>(i);

  // A tag no other communicator of this job uses: parent tag, shrink number and the list.
  uint64_t parts[4] = {bootstrap_->commTag(), 0x5348524bu, index, digest};
  const uint64_t tag = topology::hashBytes(parts, sizeof(parts));
  std::unique_ptr<Bootstrap> bs;
  STRATA_RETURN_IF_ERROR(Bootstrap::fromInfos(lfd, newRank, std::move(infos), tag, bootstrap_->secret(),
                                              config().joinTimeoutSec, &bs));
  std::unique_ptr<Comm> c(new Comm());
  STRATA_RETURN_IF_ERROR(c->init(std::move(bs), cfg));
  if (requestedTimeout(cfg) == 0) c->timeoutSec_ = timeoutSec_;  // as a split, it keeps the parent's timeout
  if (newRank == 0)
    log::info("rank {}: shrank {} ranks to {} (without {})", rank_, nranks_, members.size(), excludeText);
  *out = std::move(c);
  return OkStatus();
}

}  // namespace strata
