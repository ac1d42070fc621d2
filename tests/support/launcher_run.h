// launcher_run.h: runs a job (strata-run, possibly behind a prefix such as setpriv) for a test:
// output captured, stdin a pipe that is never written (a rank that inherited it would block), an
// optional watch called with the output so far, SIGKILL past a time limit.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace strata::testing {

using Env = std::vector<std::pair<std::string, std::string>>;

struct JobRun {
  int code = -1;         ///< exit code, or 128+signal
  bool limitHit = false; ///< the job was killed by the test's time limit
  std::string out, err;
  double seconds = 0;
  pid_t pid = -1;        ///< the job's pid (a launcher's objects carry it)
};

/// Called with the output so far; may act on the job (e.g. signal it).
using Watch = std::function<void(pid_t job, const std::string& out, const std::string& err)>;

/// Runs `cmd` (searched in PATH) with `env` added to its environment.
inline JobRun runJob(const std::vector<std::string>& cmd, double limitSec, const Env& env = {},
                     const Watch& watch = {}) {
  JobRun r;
  // stdin is a pipe the test holds open and never writes: a rank that inherited it would block.
  int outP[2], errP[2], inP[2];
  if (pipe2(outP, O_CLOEXEC) != 0 || pipe2(errP, O_CLOEXEC) != 0 || pipe2(inP, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return r;
  }
  std::vector<std::string> store = cmd;
  std::vector<char*> argv;
  for (auto& s : store) argv.push_back(s.data());
  argv.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    dup2(inP[0], 0);
    dup2(outP[1], 1);
    dup2(errP[1], 2);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    execvp(argv[0], argv.data());
    _exit(121);
  }
  r.pid = pid;
  close(outP[1]);
  close(errP[1]);
  close(inP[0]);
  int fds[2] = {outP[0], errP[0]};
  std::string* dst[2] = {&r.out, &r.err};
  const auto deadline = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(limitSec));
  while (fds[0] >= 0 || fds[1] >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0 && !r.limitHit) {
      r.limitHit = true;
      kill(pid, SIGKILL);
    }
    struct pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    int n = poll(p, 2, r.limitHit ? 2000 : static_cast<int>(std::min<long long>(left, 200)));
    if (n == 0 && r.limitHit) break;  // something still holds our pipes: give up on them
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      ssize_t k = read(fds[i], buf, sizeof(buf));
      if (k > 0) {
        dst[i]->append(buf, static_cast<size_t>(k));
      } else if (k == 0 || errno != EINTR) {
        close(fds[i]);
        fds[i] = -1;
      }
    }
    if (watch && !r.limitHit) watch(pid, r.out, r.err);
  }
  for (int fd : fds)
    if (fd >= 0) close(fd);
  int status = 0;
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (std::chrono::steady_clock::now() >= deadline && !r.limitHit) {
      r.limitHit = true;
      kill(pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  close(inP[1]);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

}  // namespace strata::testing
