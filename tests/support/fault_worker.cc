// fault_worker.cc: one rank of the fault matrix (tests/fault_matrix_test.cc). Every rank loops one
// collective on int32 inputs it can check exactly; the victim rank injects a fault at a random
// point inside one of its operations, and every other rank (a survivor) must get an error.
//
//   strata-run -n 4 -- fault_worker --coll all_reduce --fault sigkill [options]
//   strata-run --nodes 2 --ppn 2 -- fault_worker --fault link_down [options]
//   fault_worker --fork 4 [--repeat R] --coll reduce --fault sigstop [options]   (local exploration)
//
// --coll C     all_reduce (default), reduce_scatter, all_gather, all_to_all, broadcast, reduce,
//              sendrecv (grouped ring: send to r+1, receive from r-1), grouped (one group holding an
//              all-reduce, an all-gather and the send/recv ring)
// --fault F    none, sigkill, sigstop (raised by the victim at a random point inside operation K),
//              never_join (the victim never joins), leave (the victim completes operation K-1, waits
//              a random time while the others are in operation K, destroys its communicator and
//              stays alive), link_down (`ip link set IF down` in the victim's network namespace, at
//              a random point inside operation K), link_slow (`tc qdisc replace dev IF root tbf
//              rate RATE ...`, likewise); the two link faults need root and a virtual cluster
// --victim V   the rank that injects the fault (default: the last rank)
// --at-op K    the victim's fault lands inside its K-th operation, counted from 0 (default 4); the
//              random delay is uniform in [0, 0.8 x the median duration of operations 1..K-1]
// --seed S     seed of that delay (default 1)
// --count N    int32 elements of each rank's buffer (default 1M, ~4 MiB: an operation takes ms)
// --max-seconds T  a survivor that saw no error after T s exits 4 (default 30)
// --ifname IF, --link-rate RATE  for link_down / link_slow (default rail0, 100kbit)
// --fork N     start N ranks as forked processes (fresh unique id) instead of joining from the
//              launch environment, wait for them and print the time from the fault to each
//              survivor's error; --repeat R does that R times with seeds S..S+R-1
//
// Output (stdout, one line each, flushed):
//   fault-worker start rank=R pid=P
//   fault-worker fault rank=V kind=F op=C#K delay_ms=D t=MONO
//   fault-worker error rank=R op=C#K t=MONO msg=MESSAGE        (a survivor's failed call)
//   fault-worker done rank=R ops=N                             (every operation passed)
//   fault-worker wrong rank=R op=C#K: WHAT                     (a result differed)
// MONO is CLOCK_MONOTONIC in seconds (shared by every process of the machine, namespaces too).
// Exit codes: 0 done; 3 a call failed (the line above says which and why); 2 wrong data; 4 no
// error within --max-seconds; 5 usage; 6 the fault could not be injected. Survivors ignore SIGTERM,
// so that strata-run's SIGTERM after the first failure does not end them before they report (it
// sends SIGKILL 3 s later); the victim keeps the default action.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "strata/strata.h"

namespace {

double monoNow() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

void say(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

struct Options {
  std::string coll = "all_reduce", fault = "none", ifname = "rail0", linkRate = "100kbit";
  int victim = -1, atOp = 4, forkN = 0, repeat = 1;
  uint64_t seed = 1;
  size_t count = size_t{1} << 20;
  double maxSeconds = 30;
};

const char* const kColls[] = {"all_reduce", "reduce_scatter", "all_gather", "all_to_all",
                              "broadcast",  "reduce",         "sendrecv",   "grouped"};
const char* const kFaults[] = {"none", "sigkill", "sigstop", "never_join", "leave", "link_down", "link_slow"};

template <size_t N>
bool oneOf(const std::string& v, const char* const (&set)[N]) {
  for (const char* s : set)
    if (v == s) return true;
  return false;
}

/// Rank r's input element j in operation i: distinct per (rank, op, element), small enough that
/// sums over 64 ranks stay exact in int32.
int32_t value(int r, long i, size_t j) {
  return static_cast<int32_t>((static_cast<uint64_t>(j) * 2654435761u + static_cast<uint64_t>(r) * 40503u +
                               static_cast<uint64_t>(i) * 97u) &
                              0xFFFFF);
}

/// One rank's loop over the chosen collective: buffers, inputs, the call and its check.
class Loop {
 public:
  Loop(strataComm_t comm, int rank, int n, const Options& o) : comm_(comm), r_(rank), n_(n), o_(o) {
    block_ = std::max<size_t>(1, o.count / static_cast<size_t>(n));
    full_ = block_ * static_cast<size_t>(n);
    send_.resize(full_);
    recv_.resize(full_);
    send2_.resize(block_);
    recv2_.resize(full_);
    ring_.resize(block_);
    ringIn_.resize(block_);
  }

  /// Fills this rank's inputs for operation i.
  void fill(long i) {
    for (size_t j = 0; j < full_; ++j) send_[j] = value(r_, i, j);
    std::fill(recv_.begin(), recv_.end(), -1);
    if (o_.coll == "grouped") {
      for (size_t j = 0; j < block_; ++j) send2_[j] = value(r_, i + 1000, j), ring_[j] = value(r_, i + 2000, j);
      std::fill(recv2_.begin(), recv2_.end(), -1);
      std::fill(ringIn_.begin(), ringIn_.end(), -1);
    }
  }

  /// Runs operation i; returns the call's result.
  strataResult_t run(long i) {
    const int root = static_cast<int>(i % n_);
    const int next = (r_ + 1) % n_, prev = (r_ + n_ - 1) % n_;
    const std::string& c = o_.coll;
    if (c == "all_reduce") return strataAllReduce(send_.data(), recv_.data(), full_, strataInt32, strataSum, comm_);
    if (c == "reduce_scatter")
      return strataReduceScatter(send_.data(), recv_.data(), block_, strataInt32, strataSum, comm_);
    if (c == "all_gather") return strataAllGather(send_.data(), recv_.data(), block_, strataInt32, comm_);
    if (c == "all_to_all") return strataAllToAll(send_.data(), recv_.data(), block_, strataInt32, comm_);
    if (c == "broadcast") return strataBroadcast(send_.data(), recv_.data(), full_, strataInt32, root, comm_);
    if (c == "reduce")
      return strataReduce(send_.data(), recv_.data(), full_, strataInt32, strataSum, root, comm_);
    strataGroupStart();
    if (c == "grouped") {
      strataAllReduce(send_.data(), recv_.data(), full_, strataInt32, strataSum, comm_);
      strataAllGather(send2_.data(), recv2_.data(), block_, strataInt32, comm_);
      strataSend(ring_.data(), block_, strataInt32, next, comm_);
      strataRecv(ringIn_.data(), block_, strataInt32, prev, comm_);
    } else {  // sendrecv: the whole buffer around the ring
      strataSend(send_.data(), full_, strataInt32, next, comm_);
      strataRecv(recv_.data(), full_, strataInt32, prev, comm_);
    }
    return strataGroupEnd();
  }

  /// Checks operation i's results; "" when they are right.
  std::string check(long i) const {
    const int root = static_cast<int>(i % n_);
    const int prev = (r_ + n_ - 1) % n_;
    const std::string& c = o_.coll;
    auto sum = [&](long op, size_t j) {
      int64_t s = 0;
      for (int p = 0; p < n_; ++p) s += value(p, op, j);
      return static_cast<int32_t>(s);
    };
    auto expectAt = [&](size_t j) -> int32_t {
      if (c == "all_reduce" || c == "grouped") return sum(i, j);
      if (c == "reduce_scatter") return sum(i, static_cast<size_t>(r_) * block_ + j);
      if (c == "all_gather") return value(static_cast<int>(j / block_), i, j % block_);
      if (c == "all_to_all") return value(static_cast<int>(j / block_), i, static_cast<size_t>(r_) * block_ + j % block_);
      if (c == "broadcast") return value(root, i, j);
      if (c == "reduce") return sum(i, j);
      return value(prev, i, j);  // sendrecv
    };
    const size_t len = c == "reduce_scatter" ? block_ : full_;
    if (!(c == "reduce" && r_ != root))
      for (size_t j = 0; j < len; ++j)
        if (recv_[j] != expectAt(j))
          return "element " + std::to_string(j) + " is " + std::to_string(recv_[j]) + ", expected " +
                 std::to_string(expectAt(j));
    if (c == "grouped") {
      for (size_t j = 0; j < full_; ++j)
        if (recv2_[j] != value(static_cast<int>(j / block_), i + 1000, j % block_))
          return "all-gather element " + std::to_string(j) + " differs";
      for (size_t j = 0; j < block_; ++j)
        if (ringIn_[j] != value(prev, i + 2000, j)) return "ring element " + std::to_string(j) + " differs";
    }
    return "";
  }

 private:
  strataComm_t comm_;
  int r_, n_;
  const Options& o_;
  size_t block_ = 0, full_ = 0;
  std::vector<int32_t> send_, recv_, send2_, recv2_, ring_, ringIn_;
};

std::string oneLine(std::string s) {
  for (char& ch : s)
    if (ch == '\n' || ch == '\r') ch = ' ';
  return s;
}

int runCommand(const std::string& cmd) {
  const int st = std::system((cmd + " 2>&1").c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/// Injects a fault that happens inside an operation (signals, links), from its own thread.
void injectFault(const Options& o, int rank, long op, double delayMs) {
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delayMs));
  char line[256];
  std::snprintf(line, sizeof(line), "fault-worker fault rank=%d kind=%s op=%s#%ld delay_ms=%.1f t=%.6f", rank,
                o.fault.c_str(), o.coll.c_str(), op, delayMs, monoNow());
  say(line);
  if (o.fault == "sigkill") raise(SIGKILL);
  if (o.fault == "sigstop") raise(SIGSTOP);
  std::string cmd;
  if (o.fault == "link_down") cmd = "ip link set dev " + o.ifname + " down";
  // A burst of one MTU and a short queue: the link crawls at RATE, excess packets are dropped.
  if (o.fault == "link_slow")
    cmd = "tc qdisc replace dev " + o.ifname + " root tbf rate " + o.linkRate + " burst 1600 latency 50ms";
  if (!cmd.empty() && runCommand(cmd) != 0) {
    say("fault-worker cannot inject: `" + cmd + "` failed");
    std::fflush(nullptr);
    _exit(6);
  }
}

int rankMain(const Options& o, int forkRank, int forkN, const strataUniqueId* forkId) {
  alarm(static_cast<unsigned>(o.maxSeconds + 30));  // never outlive a lost test
  const bool forked = forkId != nullptr;
  int rank = forkRank, n = forkN;
  if (!forked) {
    const char* r = std::getenv("STRATA_RANK");
    const char* w = std::getenv("STRATA_WORLD_SIZE");
    if (!r || !w) {
      std::fprintf(stderr, "fault-worker: STRATA_RANK / STRATA_WORLD_SIZE not set (run under strata-run or --fork)\n");
      return 5;
    }
    rank = std::atoi(r), n = std::atoi(w);
  }
  const int victim = o.victim >= 0 ? o.victim : n - 1;
  const bool isVictim = rank == victim && o.fault != "none";
  const bool linkFault = o.fault == "link_down" || o.fault == "link_slow";
  // The victim of a link fault is a survivor too: its node loses the link, not the rank.
  if (!isVictim || linkFault) signal(SIGTERM, SIG_IGN);
  say("fault-worker start rank=" + std::to_string(rank) + " pid=" + std::to_string(getpid()));

  if (isVictim && o.fault == "never_join") {
    char line[160];
    std::snprintf(line, sizeof(line), "fault-worker fault rank=%d kind=never_join op=init#0 delay_ms=0 t=%.6f", rank,
                  monoNow());
    say(line);
    const double until = monoNow() + o.maxSeconds;
    while (monoNow() < until) sleep(1);  // a signal cuts sleep() short
    return 0;
  }

  const double t0 = monoNow();
  strataComm_t comm = nullptr;
  strataResult_t rc = forked ? strataCommInitRank(&comm, n, *forkId, rank) : strataCommInitFromEnv(&comm, nullptr);
  if (rc != strataSuccess) {
    char line[96];
    std::snprintf(line, sizeof(line), "fault-worker error rank=%d op=init#0 t=%.6f msg=", rank, monoNow());
    say(line + oneLine(strataGetLastError(nullptr)));
    return 3;
  }

  Loop loop(comm, rank, n, o);
  std::mt19937_64 rng(o.seed * 1000003u + 17);
  std::vector<double> durations;
  std::thread faultThread;
  for (long i = 0;; ++i) {
    if (monoNow() - t0 > o.maxSeconds) {
      say("fault-worker noerror rank=" + std::to_string(rank) + " ops=" + std::to_string(i));
      return 4;
    }
    loop.fill(i);
    const bool faultNow = isVictim && i == o.atOp;
    double delayMs = 0;
    if (faultNow) {
      std::vector<double> d(durations.begin() + std::min<size_t>(1, durations.size()), durations.end());
      std::sort(d.begin(), d.end());
      const double median = d.empty() ? 0.01 : d[d.size() / 2];
      delayMs = std::uniform_real_distribution<double>(0, 0.8 * median * 1e3)(rng);
    }
    if (faultNow && o.fault == "leave") {
      // Everyone else is in operation i by now, waiting on us: leave in the middle of it.
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delayMs));
      const double at = monoNow();
      strataCommDestroy(comm);
      char line[200];
      std::snprintf(line, sizeof(line), "fault-worker fault rank=%d kind=leave op=%s#%ld delay_ms=%.1f t=%.6f", rank,
                    o.coll.c_str(), i, delayMs, at);
      say(line);
      const double until = monoNow() + o.maxSeconds;
      while (monoNow() < until) sleep(1);
      return 0;
    }
    if (faultNow) faultThread = std::thread(injectFault, std::cref(o), rank, i, delayMs);
    const double start = monoNow();
    rc = loop.run(i);
    const double end = monoNow();
    if (rc != strataSuccess) {
      char line[128];
      std::snprintf(line, sizeof(line), "fault-worker error rank=%d op=%s#%ld t=%.6f msg=", rank, o.coll.c_str(), i,
                    end);
      say(line + oneLine(strataGetLastError(comm)));
      if (faultThread.joinable()) faultThread.join();
      std::fflush(nullptr);
      _exit(3);  // the communicator is failed; a destroy would only wait on dead peers
    }
    durations.push_back(end - start);
    const std::string wrong = loop.check(i);
    if (!wrong.empty()) {
      say("fault-worker wrong rank=" + std::to_string(rank) + " op=" + o.coll + "#" + std::to_string(i) + ": " + wrong);
      return 2;
    }
    if (o.fault == "none" && i + 1 >= o.atOp + 4) break;
  }
  if (faultThread.joinable()) faultThread.join();
  strataCommDestroy(comm);
  say("fault-worker done rank=" + std::to_string(rank));
  return 0;
}

/// Parses "key=value" fields of a worker line.
std::map<std::string, std::string> fields(const std::string& line) {
  std::map<std::string, std::string> f;
  size_t msg = line.find(" msg=");
  std::string head = msg == std::string::npos ? line : line.substr(0, msg);
  if (msg != std::string::npos) f["msg"] = line.substr(msg + 5);
  size_t p = 0;
  while (p < head.size()) {
    size_t e = head.find(' ', p);
    if (e == std::string::npos) e = head.size();
    std::string w = head.substr(p, e - p);
    size_t eq = w.find('=');
    if (eq != std::string::npos) f[w.substr(0, eq)] = w.substr(eq + 1);
    p = e + 1;
  }
  return f;
}

/// --fork: runs the job as forked ranks `repeat` times and prints the time from the fault to each
/// survivor's error.
int forkMain(Options o) {
  const int n = o.forkN;
  int worst = 0;
  std::vector<double> lastErrors;
  for (int rep = 0; rep < o.repeat; ++rep) {
    Options run = o;
    run.seed = o.seed + static_cast<uint64_t>(rep);
    strataUniqueId id;
    if (strataGetUniqueId(&id) != strataSuccess) {
      std::fprintf(stderr, "fault-worker: strataGetUniqueId: %s\n", strataGetLastError(nullptr));
      return 5;
    }
    int pipeFd[2];
    if (pipe(pipeFd) != 0) return 5;
    std::fflush(nullptr);
    std::vector<pid_t> pids;
    for (int r = 0; r < n; ++r) {
      pid_t pid = fork();
      if (pid == 0) {
        close(pipeFd[0]);
        dup2(pipeFd[1], 1);
        const int code = rankMain(run, r, n, &id);
        std::fflush(nullptr);
        _exit(code);
      }
      pids.push_back(pid);
    }
    close(pipeFd[1]);
    // Read until every survivor has exited, then end what is left (a stopped or lingering victim).
    const bool survivingVictim = o.fault == "none" || o.fault == "link_down" || o.fault == "link_slow";
    const int victimRank = survivingVictim ? -1 : o.victim >= 0 ? o.victim : n - 1;
    std::string out;
    std::vector<int> codes(static_cast<size_t>(n), -1);
    auto reap = [&](int r, int flags) {
      int st = 0;
      if (codes[r] >= 0 || waitpid(pids[r], &st, flags) != pids[r]) return;
      codes[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    };
    bool killed = false;
    for (;;) {
      pollfd pfd{pipeFd[0], POLLIN, 0};
      if (poll(&pfd, 1, 100) > 0) {
        char buf[4096];
        const ssize_t k = read(pipeFd[0], buf, sizeof(buf));
        if (k > 0) out.append(buf, static_cast<size_t>(k));
        if (k == 0) break;
      }
      bool survivorsDone = true;
      for (int r = 0; r < n; ++r) {
        reap(r, WNOHANG);
        if (r != victimRank && codes[r] < 0) survivorsDone = false;
      }
      if (survivorsDone && !killed) {
        killed = true;
        for (int r = 0; r < n; ++r)
          if (codes[r] < 0) kill(pids[r], SIGKILL);
      }
    }
    close(pipeFd[0]);
    for (int r = 0; r < n; ++r) reap(r, 0);
    double faultAt = -1, last = -1;
    std::string lines;
    for (size_t p = 0, e; (e = out.find('\n', p)) != std::string::npos; p = e + 1) {
      std::string line = out.substr(p, e - p);
      auto f = fields(line);
      if (line.rfind("fault-worker fault ", 0) == 0) faultAt = std::atof(f["t"].c_str());
      if (line.rfind("fault-worker error ", 0) == 0) {
        last = std::max(last, std::atof(f["t"].c_str()));
        lines += "  rank " + f["rank"] + " in " + f["op"] + ": " + f["msg"] + "\n";
      }
    }
    std::printf("run %d (seed %llu) exit codes:", rep, static_cast<unsigned long long>(run.seed));
    for (int c : codes) std::printf(" %d", c);
    if (faultAt >= 0 && last >= 0) std::printf("; last survivor's error %.3f s after the fault", last - faultAt), lastErrors.push_back(last - faultAt);
    std::printf("\n%s", lines.c_str());
    for (int r = 0; r < n; ++r)
      if (r != victimRank && codes[r] != (o.fault == "none" ? 0 : 3)) worst = 1;
  }
  if (!lastErrors.empty()) {
    std::sort(lastErrors.begin(), lastErrors.end());
    std::printf("time to the last survivor's error over %zu runs: median %.3f s, max %.3f s\n", lastErrors.size(),
                lastErrors[lastErrors.size() / 2], lastErrors.back());
  }
  return worst;
}

int usage(const std::string& why) {
  std::fprintf(stderr, "fault-worker: %s (see the comment at the top of tests/support/fault_worker.cc)\n", why.c_str());
  return 5;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : std::string(); };
    if (a == "--coll") o.coll = next();
    else if (a == "--fault") o.fault = next();
    else if (a == "--victim") o.victim = std::atoi(next().c_str());
    else if (a == "--at-op") o.atOp = std::atoi(next().c_str());
    else if (a == "--seed") o.seed = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--count") o.count = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--max-seconds") o.maxSeconds = std::atof(next().c_str());
    else if (a == "--ifname") o.ifname = next();
    else if (a == "--link-rate") o.linkRate = next();
    else if (a == "--fork") o.forkN = std::atoi(next().c_str());
    else if (a == "--repeat") o.repeat = std::atoi(next().c_str());
    else return usage("unknown argument '" + a + "'");
  }
  if (!oneOf(o.coll, kColls)) return usage("unknown collective '" + o.coll + "'");
  if (!oneOf(o.fault, kFaults)) return usage("unknown fault '" + o.fault + "'");
  if (o.atOp < 2 || o.count < 1 || o.maxSeconds <= 0 || o.repeat < 1) return usage("bad --at-op, --count, --max-seconds or --repeat");
  if (o.forkN > 0) return forkMain(o);
  return rankMain(o, -1, 0, nullptr);
}
