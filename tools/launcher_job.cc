// launcher_job.cc: the supervision loop. One thread, one poll() over the signalfd and every rank's
// stdout/stderr pipe, with a timeout set by the nearest deadline (job timeout, SIGKILL escalation);
// no busy waiting.
#include "tools/launcher_job.h"

#include <poll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>

#include "tools/launcher_dumps.h"
#include "tools/launcher_proc.h"
#include "tools/launcher_relay.h"

namespace strata::launcher {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

struct Rank {
  int rank = 0;
  RankProc proc;
  bool alive = false;
  std::unique_ptr<LineRelay> out, err;
};

template <typename... Args>
void say(fmt::format_string<Args...> f, Args&&... args) {
  std::string line = "strata-run: " + fmt::format(f, std::forward<Args>(args)...) + "\n";
  Sink(2).write(line);
}

class Job {
 public:
  Job(const JobOptions& opt, int signalFd) : opt_(opt), signalFd_(signalFd) {}
  int run();

 private:
  enum class Stop { None, Failure, Timeout, Signal };

  bool start(Rank& r);
  void handleSignals();
  void reapAll();
  void onExit(Rank& r, int status);
  void onLauncherSignal(int sig);
  void terminateAll(Clock::time_point now);
  /// Stops the ranks with `sig` (SIGTERM: SIGKILL after the grace), first asking them for their
  /// op-ring dumps when the job collects them: the signal then goes once they are written.
  void stopRanks(int sig, Clock::time_point now);
  void sendStop(int sig, Clock::time_point now);
  void signalAll(int sig);
  void drain(Rank& r, bool close);
  std::string running() const;
  bool anyAlive() const;

  const JobOptions& opt_;
  int signalFd_;
  Sink outSink_{1}, errSink_{2};
  std::vector<Rank> ranks_;
  Stop stop_ = Stop::None;
  int failureCode_ = -1;
  bool failureBySignal_ = false;  ///< failureCode_ is a rank's death by a signal
  int exitedOk_ = 0;              ///< ranks that exited 0
  int keptGoingPast_ = -1;        ///< keepGoing: the first death's code (-1: none)
  bool stopSent_ = false;         ///< the launcher has signalled the ranks to stop
  int interruptSig_ = 0;
  std::optional<Clock::time_point> timeoutAt_, killAt_;
  bool dumpsRequested_ = false;
  std::optional<Clock::time_point> stopAt_;  ///< the deferred stop signal goes then at the latest
  int stopSig_ = SIGTERM;
};

constexpr double kDumpWaitSec = 2;  ///< how long ranks asked for dumps get to write them

bool Job::start(Rank& r) {
  const std::string n = std::to_string(opt_.nranks);
  RankSpec spec;
  spec.path = opt_.path;
  spec.argv = opt_.argv;
  spec.setEnv = {{"STRATA_WORLD_SIZE", n}, {"STRATA_LOCAL_SIZE", n}, {"STRATA_UNIQUE_ID", opt_.uniqueIdHex}};
  if (opt_.dumps) spec.setEnv.push_back({"STRATA_DUMP_DIR", opt_.dumps->dir()});
  if (opt_.threads) {
    spec.setEnv.push_back({"STRATA_NTHREADS", n});
    spec.unsetEnv = {"STRATA_RANK", "STRATA_LOCAL_RANK"};
  } else {
    spec.setEnv.push_back({"STRATA_RANK", std::to_string(r.rank)});
    spec.setEnv.push_back({"STRATA_LOCAL_RANK", std::to_string(r.rank)});
    spec.unsetEnv = {"STRATA_NTHREADS"};
    if (!opt_.cpus.empty()) spec.cpu = opt_.cpus[r.rank];
    if (opt_.placeRank) opt_.placeRank(r.rank, &spec);
  }
  int err = 0;
  std::string what;
  if (!spawnRank(spec, &r.proc, &err, &what)) {
    if (what == "execve")
      say("rank {}: cannot execute '{}': {}", r.rank, opt_.path, std::strerror(err));
    else
      say("rank {}: cannot start: {}: {}", r.rank, what, std::strerror(err));
    failureCode_ = what == "execve" ? execFailureCode(err) : 1;
    return false;
  }
  r.alive = true;
  std::string prefix = opt_.prefix ? fmt::format("[{}] ", r.rank) : std::string();
  r.out = std::make_unique<LineRelay>(&outSink_, prefix);
  r.err = std::make_unique<LineRelay>(&errSink_, prefix);
  return true;
}

int Job::run() {
  const int nprocs = opt_.threads ? 1 : opt_.nranks;
  const auto t0 = Clock::now();
  if (opt_.timeoutSec > 0)
    timeoutAt_ = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt_.timeoutSec));
  ranks_.resize(nprocs);
  for (int i = 0; i < nprocs; ++i) {
    ranks_[i].rank = i;
    if (!start(ranks_[i])) {
      stop_ = Stop::Failure;
      terminateAll(Clock::now());
      break;
    }
  }

  std::vector<struct pollfd> fds;
  std::vector<std::pair<Rank*, bool>> owners;  // per pipe entry: rank, is-stderr
  while (anyAlive()) {
    fds.assign(1, {signalFd_, POLLIN, 0});
    owners.assign(1, {nullptr, false});
    for (Rank& r : ranks_) {
      if (r.proc.outFd >= 0) fds.push_back({r.proc.outFd, POLLIN, 0}), owners.push_back({&r, false});
      if (r.proc.errFd >= 0) fds.push_back({r.proc.errFd, POLLIN, 0}), owners.push_back({&r, true});
    }
    int waitMs = -1;
    const auto now = Clock::now();
    for (const auto& at : {timeoutAt_, killAt_, stopAt_}) {
      if (!at) continue;
      auto ms = std::chrono::ceil<std::chrono::milliseconds>(*at - now).count();
      ms = std::max<decltype(ms)>(0, std::min<decltype(ms)>(ms, 1 << 30));
      waitMs = waitMs < 0 ? static_cast<int>(ms) : std::min(waitMs, static_cast<int>(ms));
    }
    if (stopAt_) waitMs = std::min(waitMs, 20);  // watch for the dumps to appear
    int n = poll(fds.data(), fds.size(), waitMs);
    if (n < 0 && errno != EINTR) {  // cannot watch the ranks any more: end them and wait
      say("poll failed: {}; killing the ranks", std::strerror(errno));
      if (stop_ == Stop::None) stop_ = Stop::Failure, failureCode_ = 1;
      signalAll(SIGKILL);
      for (Rank& r : ranks_) {
        int status = 0;
        if (r.alive && waitpid(r.proc.pid, &status, 0) == r.proc.pid) onExit(r, status);
        r.alive = false;
      }
      break;
    }
    for (size_t i = 1; n > 0 && i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto [r, isErr] = owners[i];
      int& fd = isErr ? r->proc.errFd : r->proc.outFd;
      if (!(isErr ? r->err : r->out)->readOnce(fd)) {
        (isErr ? r->err : r->out)->flush();
        close(fd);
        fd = -1;
      }
    }
    if (n > 0 && (fds[0].revents & POLLIN)) handleSignals();

    const auto after = Clock::now();
    if (stopAt_ && (after >= *stopAt_ || opt_.dumps->complete())) {
      stopAt_.reset();
      if (anyAlive()) sendStop(stopSig_, after);
    }
    if (timeoutAt_ && after >= *timeoutAt_) {
      timeoutAt_.reset();
      if (stop_ != Stop::Failure && stop_ != Stop::Timeout && anyAlive()) {
        say("timeout after {:g} s; ranks still running: {}", opt_.timeoutSec, running());
        stop_ = Stop::Timeout;
        terminateAll(after);
      }
    }
    if (killAt_ && after >= *killAt_) {
      killAt_.reset();
      if (anyAlive()) {
        say("ranks still running {:g} s after SIGTERM: {}; sending SIGKILL", opt_.killGraceSec, running());
        signalAll(SIGKILL);
      }
    }
  }
  for (Rank& r : ranks_) drain(r, /*close=*/true);

  if (stop_ == Stop::Timeout) return 124;
  if (failureCode_ >= 0) return failureCode_;
  if (keptGoingPast_ >= 0 && exitedOk_ == 0) return keptGoingPast_;
  if (stop_ == Stop::Signal) return 128 + interruptSig_;
  return 0;
}

void Job::handleSignals() {
  struct signalfd_siginfo si;
  bool child = false;
  while (read(signalFd_, &si, sizeof(si)) == static_cast<ssize_t>(sizeof(si))) {
    if (si.ssi_signo == SIGCHLD) child = true;
    else onLauncherSignal(static_cast<int>(si.ssi_signo));
  }
  if (child) reapAll();
}

void Job::reapAll() {
  // Ranks killed by a signal first: when a rank is killed, its peers fail and may exit before we
  // get to reap it, and the job's verdict must name the killed rank, not the first peer in rank order.
  std::vector<std::pair<Rank*, int>> exited;
  for (Rank& r : ranks_) {
    if (!r.alive) continue;
    int status = 0;
    pid_t p;
    do p = waitpid(r.proc.pid, &status, WNOHANG);
    while (p < 0 && errno == EINTR);
    if (p == r.proc.pid) exited.push_back({&r, status});
    else if (p < 0 && errno == ECHILD) r.alive = false;  // cannot happen unless someone reaped it
  }
  std::stable_partition(exited.begin(), exited.end(), [](const auto& e) { return WIFSIGNALED(e.second); });
  for (auto& [r, status] : exited) onExit(*r, status);
}

void Job::onExit(Rank& r, int status) {
  r.alive = false;
  drain(r, /*close=*/false);  // its last words come before our verdict
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    ++exitedOk_;
    return;
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (opt_.keepGoing && stop_ == Stop::None && WIFSIGNALED(status)) {
    say("rank {} killed by signal {}{}; the others go on (--keep-going)", r.rank, signalName(WTERMSIG(status)),
        WCOREDUMP(status) ? " (core dumped)" : "");
    if (keptGoingPast_ < 0) keptGoingPast_ = code;
    if (!anyAlive()) stop_ = Stop::Failure, failureCode_ = code;
    return;
  }
  if (stop_ == Stop::None) {
    if (WIFEXITED(status))
      say("rank {} exited with code {}", r.rank, code);
    else
      say("rank {} killed by signal {}{}", r.rank, signalName(WTERMSIG(status)),
          WCOREDUMP(status) ? " (core dumped)" : "");
    failureCode_ = code;
    failureBySignal_ = WIFSIGNALED(status);
    stop_ = Stop::Failure;
    terminateAll(Clock::now());
  } else if (stop_ == Stop::Failure && !stopSent_ && WIFSIGNALED(status)) {
    // Killed before we stopped anyone (we only asked for dumps): a cause, even if a peer that
    // failed because of it was reaped first. Its code becomes the job's unless one already is.
    say("rank {} killed by signal {}{}", r.rank, signalName(WTERMSIG(status)), WCOREDUMP(status) ? " (core dumped)" : "");
    if (!failureBySignal_) failureCode_ = code, failureBySignal_ = true;
  } else if (stop_ == Stop::Signal && !killAt_) {
    terminateAll(Clock::now());  // interrupted and ranks are going down: do not wait forever
  }
}

void Job::onLauncherSignal(int sig) {
  if (stop_ == Stop::None) {
    say("received {}; forwarding it to the ranks (send it again to kill them)", signalName(sig));
    stop_ = Stop::Signal;
    interruptSig_ = sig;
    stopRanks(sig, Clock::now());
  } else {
    say("received {} while stopping; killing the ranks", signalName(sig));
    signalAll(SIGKILL);
    killAt_.reset();
    stopAt_.reset();
  }
}

void Job::terminateAll(Clock::time_point now) {
  if (stopAt_) return;  // a stop is already on its way, once the dumps are written
  stopRanks(SIGTERM, now);
}

void Job::stopRanks(int sig, Clock::time_point now) {
  if (opt_.dumps && !dumpsRequested_) {
    dumpsRequested_ = true;
    std::vector<pid_t> groups;
    for (const Rank& r : ranks_)
      if (r.alive) groups.push_back(r.proc.pid);
    if (opt_.dumps->request(groups) > 0) {
      stopSig_ = sig;
      stopAt_ = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kDumpWaitSec));
      return;
    }
  }
  sendStop(sig, now);
}

void Job::sendStop(int sig, Clock::time_point now) {
  signalAll(sig);
  if (sig == SIGTERM)
    killAt_ = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt_.killGraceSec));
}

void Job::signalAll(int sig) {
  stopSent_ = true;
  for (Rank& r : ranks_) {
    if (r.proc.pid <= 0) continue;
    if (r.alive) kill(r.proc.pid, sig);  // even if it left its process group
    kill(-r.proc.pid, sig);              // its group: children it started
  }
}

void Job::drain(Rank& r, bool close) {
  for (auto [fd, relay] : {std::pair{&r.proc.outFd, r.out.get()}, std::pair{&r.proc.errFd, r.err.get()}}) {
    if (*fd < 0) continue;
    bool open = relay->drain(*fd);
    if (close || !open) {
      relay->flush();
      ::close(*fd);
      *fd = -1;
    }
  }
}

std::string Job::running() const {
  std::string s;
  for (const Rank& r : ranks_)
    if (r.alive) s += (s.empty() ? "" : " ") + std::to_string(r.rank);
  return s;
}

bool Job::anyAlive() const {
  for (const Rank& r : ranks_)
    if (r.alive) return true;
  return false;
}

}  // namespace

int blockLauncherSignals() {
  struct sigaction ign;
  std::memset(&ign, 0, sizeof(ign));
  ign.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ign, nullptr);  // a closed stdout must not kill the launcher (and orphan ranks)
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  for (int s : kForwarded) sigaddset(&set, s);
  if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) return -1;
  return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

int runJob(const JobOptions& opt, int signalFd) { return Job(opt, signalFd).run(); }

}  // namespace strata::launcher
