// host_identity.cc: host and process hashes from the hostname, boot id, pid and start time.
#include "topology/host_identity.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

namespace strata::topology {

uint64_t hashBytes(const void* data, size_t n, uint64_t seed) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

static std::string readFirstLine(const char* path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

uint64_t hostHash() {
  static const uint64_t h = [] {
    std::string id = hostName() + "|" + readFirstLine("/proc/sys/kernel/random/boot_id");
    return hashBytes(id.data(), id.size());
  }();
  return h;
}

uint64_t processHash() {
  // Field 22 of /proc/self/stat is the start time; with the pid it names this process uniquely.
  std::string stat = readFirstLine("/proc/self/stat");
  std::string startTime;
  size_t close = stat.rfind(')');
  if (close != std::string::npos) {
    std::istringstream rest(stat.substr(close + 2));
    std::string field;
    for (int i = 3; i <= 22 && (rest >> field); ++i)
      if (i == 22) startTime = field;
  }
  std::string id = std::to_string(hostHash()) + "|" + std::to_string(getpid()) + "|" + startTime;
  return hashBytes(id.data(), id.size());
}

}  // namespace strata::topology
