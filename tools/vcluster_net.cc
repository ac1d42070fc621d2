// vcluster_net.cc: commands (posix_spawn, so it is safe beside the bootstrap root thread), object
// names, and the scans of `ip netns list` / `ip -o link show` for them.
#include "tools/vcluster_net.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "transport/log.h"

extern char** environ;

namespace strata::launcher::vnet {
namespace {

std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

bool isGone(const CmdResult& r) {
  // What `ip` says for an object that no longer exists.
  for (const char* m : {"Cannot find device", "No such file or directory", "Cannot open network namespace",
                        "does not exist"})
    if (r.err.find(m) != std::string::npos) return true;
  return false;
}

}  // namespace

CmdResult run(const std::vector<std::string>& argv) {
  CmdResult r;
  log::debug("strata-run: running `{}`", joined(argv));
  int outP[2] = {-1, -1}, errP[2] = {-1, -1};
  if (pipe2(outP, O_CLOEXEC) != 0 || pipe2(errP, O_CLOEXEC) != 0) {
    r.err = fmt::format("pipe: {}", std::strerror(errno));
    for (int fd : {outP[0], outP[1], errP[0], errP[1]})
      if (fd >= 0) close(fd);
    return r;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, outP[1], 1);
  posix_spawn_file_actions_adddup2(&fa, errP[1], 2);
  std::vector<std::string> store = argv;
  std::vector<char*> args;
  for (auto& s : store) args.push_back(s.data());
  args.push_back(nullptr);
  pid_t pid = -1;
  int e = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(outP[1]);
  close(errP[1]);
  if (e != 0) {
    close(outP[0]);
    close(errP[0]);
    r.err = fmt::format("cannot run '{}': {}", argv[0], std::strerror(e));
    return r;
  }
  int fds[2] = {outP[0], errP[0]};
  std::string* dst[2] = {&r.out, &r.err};
  while (fds[0] >= 0 || fds[1] >= 0) {
    struct pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    if (poll(p, 2, -1) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t n = read(fds[i], buf, sizeof(buf));
      if (n > 0) {
        dst[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i]);
        fds[i] = -1;
      }
    }
  }
  for (int fd : fds)
    if (fd >= 0) close(fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.ran = true;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (r.code != 0) log::debug("strata-run: `{}` failed with {}: {}", joined(argv), r.code, trimmed(r.err));
  return r;
}

std::string describeFailure(const std::vector<std::string>& argv, const CmdResult& r) {
  if (!r.ran) return fmt::format("`{}`: {}", joined(argv), r.err);
  std::string err = trimmed(r.err);
  return fmt::format("`{}`: exit {}{}{}", joined(argv), r.code, err.empty() ? "" : ": ", err);
}

std::string nsName(long pid, int node) { return fmt::format("strata-{}-n{}", pid, node); }
std::string bridgeName(long pid, int rail) { return fmt::format("st{}r{}", pid, rail); }
std::string vethName(long pid, int node, int rail) { return fmt::format("st{}n{}r{}", pid, node, rail); }

bool listObjects(std::vector<Object>* out, std::string* err) {
  out->clear();
  const std::vector<std::string> nsCmd = {"ip", "netns", "list"};
  CmdResult ns = run(nsCmd);
  if (!ns.ok()) {
    *err = describeFailure(nsCmd, ns);
    return false;
  }
  static const std::regex nsRe(R"(^strata-(\d+)-n\d+$)");
  std::istringstream nsIn(ns.out);
  for (std::string line; std::getline(nsIn, line);) {
    std::string name = line.substr(0, line.find(' '));  // "name (id: 3)"
    std::smatch m;
    if (std::regex_match(name, m, nsRe)) out->push_back({Object::Netns, name, std::stol(m[1])});
  }
  const std::vector<std::string> linkCmd = {"ip", "-o", "link", "show"};
  CmdResult links = run(linkCmd);
  if (!links.ok()) {
    *err = describeFailure(linkCmd, links);
    return false;
  }
  static const std::regex linkRe(R"(^\d+:\s+([^:@\s]+)[@:])");
  static const std::regex bridgeRe(R"(^st(\d+)r\d+$)"), vethRe(R"(^st(\d+)n\d+r\d+$)");
  std::istringstream linkIn(links.out);
  for (std::string line; std::getline(linkIn, line);) {
    std::smatch m, n;
    if (!std::regex_search(line, m, linkRe)) continue;
    const std::string name = m[1];
    if (std::regex_match(name, n, bridgeRe)) out->push_back({Object::Bridge, name, std::stol(n[1])});
    else if (std::regex_match(name, n, vethRe)) out->push_back({Object::Veth, name, std::stol(n[1])});
  }
  return true;
}

bool removeObjects(std::vector<Object> objs, std::string* err) {
  std::stable_sort(objs.begin(), objs.end(), [](const Object& a, const Object& b) { return a.kind < b.kind; });
  bool ok = true;
  for (const Object& o : objs) {
    std::vector<std::string> cmd = o.kind == Object::Netns ? std::vector<std::string>{"ip", "netns", "delete", o.name}
                                                           : std::vector<std::string>{"ip", "link", "delete", o.name};
    CmdResult r = run(cmd);
    if (r.ok() || (r.ran && isGone(r))) continue;
    ok = false;
    *err += (err->empty() ? "" : "; ") + describeFailure(cmd, r);
  }
  return ok;
}

bool pidAlive(long pid) {
  if (pid <= 0) return false;
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string text;
  if (!std::getline(stat, text)) return false;
  size_t close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() || (text[close + 2] != 'Z' && text[close + 2] != 'X');
}

bool haveCapability(int cap) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    unsigned long long mask = std::stoull(line.substr(7), nullptr, 16);
    return cap >= 0 && cap < 64 && ((mask >> cap) & 1ull);
  }
  return false;
}

}  // namespace strata::launcher::vnet
