// subprocess.h: runs a shell command for a test and captures its exit code and output (stdout and
// stderr together).
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace strata::testing {

struct RunResult {
  int code = -1;    ///< exit status, or -1 when killed by a signal or not started
  std::string out;  ///< stdout and stderr, interleaved
};

inline RunResult runCommand(const std::string& cmd) {
  RunResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  while (fgets(buf.data(), buf.size(), p)) r.out += buf.data();
  int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

}  // namespace strata::testing
