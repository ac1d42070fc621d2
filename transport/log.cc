// log.cc: the stderr sink of log.h, prefixed with host, pid and level.
#include "transport/log.h"

#include <unistd.h>

#include <cstdio>

#include "topology/host_identity.h"
#include "transport/config.h"

namespace strata::log {

Level currentLevel() {
  static const Level level = [] {
    const std::string& s = config().logLevel;
    if (s == "error") return Level::Error;
    if (s == "info") return Level::Info;
    if (s == "debug") return Level::Debug;
    if (s == "trace") return Level::Trace;
    return Level::Warn;
  }();
  return level;
}

void write(Level level, const std::string& message) {
  static const char* names[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
  static const std::string host = topology::hostName();
  std::string line = fmt::format("strata {}:{} {} {}\n", host, getpid(), names[static_cast<int>(level)], message);
  ssize_t ignored = ::write(2, line.data(), line.size());
  (void)ignored;
}

}  // namespace strata::log
