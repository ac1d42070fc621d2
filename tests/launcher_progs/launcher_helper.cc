// launcher_helper: one rank of a launcher_test job. The first argument picks what it does:
//   env                 print the STRATA_* variables, its pid, and a line on stderr
//   args A...           print its arguments
//   exit CODE           exit with CODE
//   fail RANK CODE [ignore-term]   rank RANK exits CODE after 0.3 s; the others sleep 60 s
//                                  (ignoring SIGTERM with ignore-term)
//   crash RANK SIG [S]  rank RANK kills itself with SIG after 0.3 s (no core); the others sleep
//                       (S seconds, then exit 0; default 60)
//   sleep SECONDS       print its pid and "ready", then sleep
//   partial             print a last line without newline on stdout and stderr
//   lines COUNT         print COUNT numbered lines, one write each
//   longline BYTES      print one line of BYTES 'x'
//   stdin               read stdin and report what came
//   cpus                print the CPUs it may run on: "cpus=<count> list=<c0>,<c1>,..."
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

namespace {

int rankFromEnv() {
  const char* r = std::getenv("STRATA_RANK");
  return r ? std::atoi(r) : 0;
}

void sleepSeconds(double s) {
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(s);
  ts.tv_nsec = static_cast<long>((s - static_cast<double>(ts.tv_sec)) * 1e9);
  while (nanosleep(&ts, &ts) != 0) {
  }
}

void writeAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

void ready() {
  writeAll(1, "pid=" + std::to_string(getpid()) + "\nready\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  const int rank = rankFromEnv();
  if (mode == "env") {
    for (const char* name : {"STRATA_RANK", "STRATA_WORLD_SIZE", "STRATA_LOCAL_RANK", "STRATA_LOCAL_SIZE",
                             "STRATA_UNIQUE_ID", "STRATA_NTHREADS"}) {
      const char* v = std::getenv(name);
      writeAll(1, std::string(name) + (v ? std::string("=") + v : std::string(" unset")) + "\n");
    }
    writeAll(1, "pid=" + std::to_string(getpid()) + "\n");
    writeAll(2, "stderr of rank " + std::to_string(rank) + "\n");
    return 0;
  }
  if (mode == "cpus") {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return 3;
    std::string list;
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) list += (list.empty() ? "" : ",") + std::to_string(c);
    writeAll(1, "cpus=" + std::to_string(CPU_COUNT(&set)) + " list=" + list + "\n");
    return 0;
  }
  if (mode == "args") {
    for (int i = 2; i < argc; ++i) writeAll(1, "arg[" + std::to_string(i - 2) + "]=" + argv[i] + "\n");
    return 0;
  }
  if (mode == "exit" && argc > 2) return std::atoi(argv[2]);
  if ((mode == "fail" || mode == "crash") && argc > 3) {
    const int target = std::atoi(argv[2]);
    const int value = std::atoi(argv[3]);
    if (argc > 4 && std::strcmp(argv[4], "ignore-term") == 0 && rank != target) signal(SIGTERM, SIG_IGN);
    ready();
    if (rank != target) {
      sleepSeconds(mode == "crash" && argc > 4 ? std::atof(argv[4]) : 60);
      return 0;
    }
    sleepSeconds(0.3);
    writeAll(2, "rank " + std::to_string(rank) + " failing\n");
    if (mode == "fail") return value;
    struct rlimit noCore = {0, 0};
    setrlimit(RLIMIT_CORE, &noCore);
    signal(value, SIG_DFL);
    raise(value);
    return 99;  // not reached for a deadly signal
  }
  if (mode == "sleep" && argc > 2) {
    ready();
    sleepSeconds(std::atof(argv[2]));
    return 0;
  }
  if (mode == "partial") {
    writeAll(1, "no newline");
    writeAll(2, "err partial");
    return 0;
  }
  if (mode == "lines" && argc > 2) {
    const int count = std::atoi(argv[2]);
    const std::string pad(100 + 37 * rank, 'x');
    for (int i = 0; i < count; ++i)
      writeAll(1, "rank " + std::to_string(rank) + " line " + std::to_string(i) + " " + pad + "\n");
    return 0;
  }
  if (mode == "longline" && argc > 2) {
    writeAll(1, std::string(static_cast<size_t>(std::atol(argv[2])), 'x') + "\n");
    return 0;
  }
  if (mode == "stdin") {
    char buf[256];
    ssize_t n = read(0, buf, sizeof(buf));
    writeAll(1, n == 0 ? "stdin eof\n" : "stdin gave " + std::to_string(n) + "\n");
    return 0;
  }
  std::fprintf(stderr, "launcher_helper: bad arguments\n");
  return 64;
}
