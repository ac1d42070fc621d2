// memory.cc: parses RssAnon and RssShmem from /proc/self/status.
#include "perf/common/memory.h"

#include <cstdio>
#include <cstring>

namespace strata::perf {

MemoryUse readMemoryUse() {
  MemoryUse m;
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return m;
  char line[256];
  while (std::fgets(line, sizeof line, f)) {
    long kb = 0;
    if (std::sscanf(line, "RssAnon: %ld kB", &kb) == 1) m.anonMiB = kb / 1024.0;
    if (std::sscanf(line, "RssShmem: %ld kB", &kb) == 1) m.shmemMiB = kb / 1024.0;
  }
  std::fclose(f);
  return m;
}

}  // namespace strata::perf
