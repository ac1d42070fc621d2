// launcher_proc.cc: fork/exec of one rank. Everything the child runs between fork and exec is
// async-signal-safe (the launcher has a bootstrap root thread running), so argv and the
// environment are built before fork.
#include "tools/launcher_proc.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

extern char** environ;

namespace strata::launcher {
namespace {

sigset_t gOrigMask;
struct sigaction gOrigPipe;
struct rlimit gOrigNoFile;
int gDevNull = -1;

bool isExecutableFile(const std::string& p, int* err) {
  struct stat st;
  if (stat(p.c_str(), &st) != 0) {
    *err = errno;
    return false;
  }
  if (S_ISDIR(st.st_mode) || access(p.c_str(), X_OK) != 0) {
    *err = EACCES;
    return false;
  }
  return true;
}

void closeFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// What the child reports on its exec pipe when a step before exec fails: {step, errno}.
enum ChildStep : int { kExecve = 0, kSetns, kUnshare, kSethostname };
const char* const kStepNames[] = {"execve", "setns", "unshare", "sethostname"};

[[noreturn]] void childFail(int fd, ChildStep step) {
  int msg[2] = {step, errno};
  ssize_t w = write(fd, msg, sizeof(msg));
  (void)w;
  _exit(127);
}

// Child side, async-signal-safe: a warning line on `fd` (the rank's stderr pipe).
void childWarn(int fd, const char* what) {
  const char head[] = "strata-run: warning: cannot remount /sys in the virtual node (";
  const char tail[] = " failed); /sys/class/net shows the host's interfaces\n";
  ssize_t w = write(fd, head, sizeof(head) - 1);
  w = write(fd, what, strlen(what));
  w = write(fd, tail, sizeof(tail) - 1);
  (void)w;
}

// Child side, async-signal-safe: a mount namespace of its own (not propagating back), with sysfs
// mounted over /sys by the new network namespace and the old /sys/fs/cgroup bound back in.
void childRemountSys(unsigned long sysFlags, int warnFd) {
  if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) return childWarn(warnFd, "making / a slave");
  int cg = open("/sys/fs/cgroup", O_PATH | O_DIRECTORY | O_CLOEXEC);
  struct stat sysSt, cgSt;
  bool cgMounted = cg >= 0 && stat("/sys", &sysSt) == 0 && fstat(cg, &cgSt) == 0 && sysSt.st_dev != cgSt.st_dev;
  if (mount("sysfs", "/sys", "sysfs", sysFlags, nullptr) != 0) {
    childWarn(warnFd, "mounting sysfs");
  } else if (cgMounted) {
    char path[32] = "/proc/self/fd/";
    char digits[12];
    int n = 0;
    for (unsigned v = static_cast<unsigned>(cg); n == 0 || v > 0; v /= 10)
      digits[n++] = static_cast<char>('0' + v % 10);
    size_t len = strlen(path);
    while (n > 0) path[len++] = digits[--n];
    path[len] = '\0';
    if (mount(path, "/sys/fs/cgroup", nullptr, MS_BIND | MS_REC, nullptr) != 0)
      childWarn(warnFd, "binding /sys/fs/cgroup");
  }
  if (cg >= 0) close(cg);
}

}  // namespace

std::string resolveProgram(const std::string& prog, int* err) {
  *err = ENOENT;
  if (prog.empty()) return "";
  if (prog.find('/') != std::string::npos) return isExecutableFile(prog, err) ? prog : "";
  const char* pathEnv = std::getenv("PATH");
  std::string path = pathEnv ? pathEnv : "/usr/local/bin:/usr/bin:/bin";
  bool sawNonExecutable = false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    std::string cand = (dir.empty() ? std::string(".") : dir) + "/" + prog;
    int e = 0;
    if (isExecutableFile(cand, &e)) return cand;
    if (e == EACCES) sawNonExecutable = true;
    start = end + 1;
  }
  *err = sawNonExecutable ? EACCES : ENOENT;
  return "";
}

std::string signalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  if (abbrev) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(sig);
}

void setRankEnv(RankSpec* spec, const std::string& name, const std::string& value) {
  for (auto& kv : spec->setEnv)
    if (kv.first == name) {
      kv.second = value;
      return;
    }
  spec->setEnv.emplace_back(name, value);
}

void initChildState() {
  // Descriptors 0-2 must exist, or the pipes made below could land on them.
  for (int fd = 0; fd <= 2; ++fd)
    if (fcntl(fd, F_GETFD) < 0) {
      int nf = open("/dev/null", O_RDWR);
      if (nf >= 0 && nf != fd) {
        dup2(nf, fd);
        close(nf);
      }
    }
  pthread_sigmask(SIG_SETMASK, nullptr, &gOrigMask);
  sigaction(SIGPIPE, nullptr, &gOrigPipe);
  getrlimit(RLIMIT_NOFILE, &gOrigNoFile);
  gDevNull = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

void ensureFdLimit(size_t needed) {
  struct rlimit lim;
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= needed) return;
  lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? needed : std::min<rlim_t>(lim.rlim_max, needed);
  setrlimit(RLIMIT_NOFILE, &lim);
}

bool spawnRank(const RankSpec& spec, RankProc* out, int* err, std::string* what) {
  // Everything the child needs, built before fork.
  std::vector<std::string> envStore;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    std::string name = kv.substr(0, kv.find('='));
    bool drop = false;
    for (const auto& [k, v] : spec.setEnv) drop = drop || k == name;
    for (const auto& k : spec.unsetEnv) drop = drop || k == name;
    if (!drop) envStore.push_back(std::move(kv));
  }
  for (const auto& [k, v] : spec.setEnv) envStore.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : envStore) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argStore = spec.argv;
  for (auto& s : argStore) argv.push_back(s.data());
  argv.push_back(nullptr);

  int outPipe[2] = {-1, -1}, errPipe[2] = {-1, -1}, execPipe[2] = {-1, -1};
  auto fail = [&](const char* step) {
    *err = errno;
    *what = step;
    for (int* p : {outPipe, errPipe, execPipe}) {
      closeFd(p[0]);
      closeFd(p[1]);
    }
    return false;
  };
  if (pipe2(outPipe, O_CLOEXEC) != 0 || pipe2(errPipe, O_CLOEXEC) != 0 ||
      pipe2(execPipe, O_CLOEXEC) != 0)
    return fail("pipe");

  cpu_set_t cpuMask;
  CPU_ZERO(&cpuMask);
  if (spec.cpu >= 0) CPU_SET(spec.cpu, &cpuMask);
  unsigned long sysFlags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
  struct statvfs sysVfs;
  if (spec.netnsFd >= 0 && statvfs("/sys", &sysVfs) == 0 && (sysVfs.f_flag & ST_RDONLY)) sysFlags |= MS_RDONLY;
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return fail("fork");
  if (pid == 0) {
    // Child: async-signal-safe calls only.
    sigaction(SIGPIPE, &gOrigPipe, nullptr);  // the launcher ignores SIGPIPE; the rank must not
    sigprocmask(SIG_SETMASK, &gOrigMask, nullptr);
    setrlimit(RLIMIT_NOFILE, &gOrigNoFile);
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the launcher died before prctl took effect
    if (spec.cpu >= 0) sched_setaffinity(0, sizeof(cpuMask), &cpuMask);  // a plain system call
    if (spec.netnsFd >= 0) {  // before the dup2s below, which could land on the namespace's fd
      if (setns(spec.netnsFd, CLONE_NEWNET) != 0) childFail(execPipe[1], kSetns);
      if (unshare(CLONE_NEWUTS | CLONE_NEWNS) != 0) childFail(execPipe[1], kUnshare);
      if (sethostname(spec.hostname.data(), spec.hostname.size()) != 0) childFail(execPipe[1], kSethostname);
      childRemountSys(sysFlags, errPipe[1]);
    }
    if (gDevNull >= 0) dup2(gDevNull, 0);
    dup2(outPipe[1], 1);
    dup2(errPipe[1], 2);
    if (execPipe[1] != 3) {
      dup2(execPipe[1], 3);
      fcntl(3, F_SETFD, FD_CLOEXEC);
    }
    if (close_range(4, ~0U, 0) != 0) {
      for (int fd = 4; fd < 65536; ++fd) close(fd);
    }
    execve(spec.path.c_str(), argv.data(), envp.data());
    childFail(3, kExecve);
  }

  // Parent. Also set the group here, so signals to -pid work as soon as we return.
  setpgid(pid, pid);
  closeFd(outPipe[1]);
  closeFd(errPipe[1]);
  closeFd(execPipe[1]);
  int childErr[2] = {0, 0};  // {step, errno}
  ssize_t n;
  do n = read(execPipe[0], childErr, sizeof(childErr));
  while (n < 0 && errno == EINTR);
  closeFd(execPipe[0]);
  if (n == static_cast<ssize_t>(sizeof(childErr))) {
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    errno = childErr[1];
    const int step = childErr[0] >= 0 && childErr[0] <= kSethostname ? childErr[0] : kExecve;
    return fail(kStepNames[step]);
  }
  fcntl(outPipe[0], F_SETFL, fcntl(outPipe[0], F_GETFL) | O_NONBLOCK);
  fcntl(errPipe[0], F_SETFL, fcntl(errPipe[0], F_GETFL) | O_NONBLOCK);
  out->pid = pid;
  out->outFd = outPipe[0];
  out->errFd = errPipe[0];
  return true;
}

}  // namespace strata::launcher
