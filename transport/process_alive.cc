// process_alive.cc: kill(pid, 0), then the state letter of /proc/PID/stat (Z or X: gone).
#include "transport/process_alive.h"

#include <errno.h>
#include <signal.h>

#include <cstdio>
#include <cstring>

namespace strata {

bool processAlive(int pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (!f) return errno != ENOENT;
  char buf[512] = {};
  size_t got = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  const char* close = strrchr(buf, ')');
  if (got == 0 || !close || close[1] == '\0') return true;
  return close[2] != 'Z' && close[2] != 'X';
}

}  // namespace strata
