// launcher_dumps.cc: the job's dump directory, dump requests and the diagnosis (see launcher_dumps.h).
#include "tools/launcher_dumps.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "collectives/hang_report.h"

namespace strata::launcher {
namespace {

double realNow() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

/// The process group of `pid` (field 5 of /proc/<pid>/stat), or -1.
pid_t processGroup(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t close = text.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(text.substr(close + 1));
  std::string state;
  long ppid = 0, pgrp = -1;
  rest >> state >> ppid >> pgrp;
  return static_cast<pid_t>(pgrp);
}

/// Newest modification time (realtime seconds) of "<dir>/*-<pid>.dump", or 0.
double dumpTime(const std::string& dir, pid_t pid) {
  const std::string suffix = "-" + std::to_string(pid) + ".dump";
  double newest = 0;
  DIR* dp = opendir(dir.c_str());
  if (!dp) return 0;
  while (dirent* e = readdir(dp)) {
    std::string n = e->d_name;
    if (n.size() <= suffix.size() || n.compare(n.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    struct stat st;
    if (stat((dir + "/" + n).c_str(), &st) == 0)
      newest = std::max(newest, static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec * 1e-9);
  }
  closedir(dp);
  return newest;
}

}  // namespace

bool catchesSignal(pid_t pid, int sig) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("SigCgt:", 0) == 0) {
      unsigned long long mask = std::strtoull(line.c_str() + 7, nullptr, 16);
      return (mask >> (sig - 1)) & 1;
    }
  return false;
}

bool DumpCollector::init(const std::string& userDir, std::string* err) {
  if (!userDir.empty()) {
    dir_ = userDir;
    if (mkdir(dir_.c_str(), 0755) != 0 && errno != EEXIST) {
      *err = "cannot create STRATA_DUMP_DIR " + dir_ + ": " + std::strerror(errno);
      return false;
    }
    return true;
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/strata-run-dumps-XXXXXX";
  if (!mkdtemp(templ.data())) {
    *err = "cannot create a dump directory: " + std::string(std::strerror(errno));
    return false;
  }
  dir_ = templ;
  owned_ = true;
  return true;
}

DumpCollector::~DumpCollector() {
  if (!owned_) return;
  if (DIR* dp = opendir(dir_.c_str())) {
    while (dirent* e = readdir(dp)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") unlink((dir_ + "/" + n).c_str());
    }
    closedir(dp);
  }
  rmdir(dir_.c_str());
}

size_t DumpCollector::request(const std::vector<pid_t>& groups) {
  asked_.clear();
  askedAt_ = realNow();
  if (DIR* dp = opendir("/proc")) {
    while (dirent* e = readdir(dp)) {
      char* end = nullptr;
      long pid = std::strtol(e->d_name, &end, 10);
      if (*end != '\0' || pid <= 0) continue;
      const pid_t pg = processGroup(static_cast<pid_t>(pid));
      bool member = false;
      for (pid_t g : groups) member = member || (g > 0 && g == pg);
      if (member && catchesSignal(static_cast<pid_t>(pid), SIGUSR1) && kill(static_cast<pid_t>(pid), SIGUSR1) == 0)
        asked_.push_back(static_cast<pid_t>(pid));
    }
    closedir(dp);
  }
  return asked_.size();
}

bool DumpCollector::complete() const {
  for (pid_t p : asked_) {
    // A dump written just before the request counts too (file times are coarse).
    if (dumpTime(dir_, p) < askedAt_ - 0.05 && kill(p, 0) == 0) return false;
  }
  return true;
}

std::string DumpCollector::diagnosis(size_t* ndumps) const {
  std::vector<hang::ProcessDump> dumps;
  std::string notes;
  (void)hang::readDumpDir(dir_, &dumps, &notes);
  *ndumps = dumps.size();
  if (dumps.empty()) return "";
  hang::Diagnosis d = hang::diagnose(dumps);
  return d.problem ? notes + d.text : "";
}

}  // namespace strata::launcher
