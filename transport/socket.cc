// socket.cc: TCP helpers (see socket.h). All waits use poll() with short slices so that abort
// flags and deadlines are honoured; nothing spins.
#include "transport/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>

#include "transport/config.h"

namespace strata::net {

double nowSec() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

void closeFd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

void setNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

Status listenAny(uint16_t port, int* fd, uint16_t* bound) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return systemError("socket(): {}", strerror(errno));
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = port;
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    int e = errno;
    ::close(s);
    return systemError("bind(port {}): {}", ntohs(port), strerror(e));
  }
  if (::listen(s, 4096) != 0) {  // the kernel caps it at net.core.somaxconn
    int e = errno;
    ::close(s);
    return systemError("listen(): {}", strerror(e));
  }
  socklen_t len = sizeof(a);
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  *fd = s;
  *bound = a.sin_port;
  return OkStatus();
}

bool interfaceMatches(const std::string& spec, const std::string& ifname) {
  std::string list = spec;
  bool exclude = false, exact = false;
  if (!list.empty() && list[0] == '^') exclude = true, list.erase(0, 1);
  if (!list.empty() && list[0] == '=') exact = true, list.erase(0, 1);
  bool hit = false;
  size_t pos = 0;
  while (pos <= list.size() && !hit) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    const std::string item = list.substr(pos, comma - pos);
    if (!item.empty()) hit = exact ? ifname == item : ifname.compare(0, item.size(), item) == 0;
    pos = comma + 1;
  }
  return exclude ? !hit : hit;
}

// strata-run --nodes names its rail bridges st<pid>r<k> in the launcher's namespace: they come and
// go with other jobs, so ranks must not take them for rails of their own.
static bool isVirtualClusterBridge(const std::string& name) {
  size_t i = 2;
  if (name.compare(0, 2, "st") != 0) return false;
  const size_t pidStart = i;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  if (i == pidStart || i >= name.size() || name[i] != 'r') return false;
  const size_t railStart = ++i;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  return i > railStart && i == name.size();
}

std::vector<Interface> usableInterfaces() {
  const Config& cfg = config();
  const std::string& spec = !cfg.socketIfname.empty() ? cfg.socketIfname : cfg.ncclSocketIfname;
  std::vector<Interface> all, chosen;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* i = list; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
      Interface f;
      f.name = i->ifa_name;
      f.addr = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
      f.mask = i->ifa_netmask ? reinterpret_cast<sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr : 0;
      if (std::any_of(all.begin(), all.end(), [&](const Interface& g) { return g.name == f.name; })) continue;
      all.push_back(f);
    }
    freeifaddrs(list);
  }
  std::sort(all.begin(), all.end(), [](const Interface& a, const Interface& b) { return a.name < b.name; });
  for (const Interface& f : all)
    if (spec.empty() ? interfaceMatches("^lo,docker", f.name) && !isVirtualClusterBridge(f.name)
                     : interfaceMatches(spec, f.name))
      chosen.push_back(f);
  if (chosen.empty() && spec.empty())
    for (const Interface& f : all)
      if (f.name.compare(0, 2, "lo") == 0) chosen.push_back(f);
  return chosen;
}

uint32_t advertisedAddr() {
  const std::string& forced = config().socketAddr;
  if (!forced.empty()) {
    uint32_t a = 0;
    if (resolveHost(forced, &a).ok()) return a;
  }
  const std::vector<Interface> ifs = usableInterfaces();
  return ifs.empty() ? htonl(INADDR_LOOPBACK) : ifs.front().addr;
}

Status resolveHost(const std::string& host, uint32_t* addr) {
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) == 1) {
    *addr = a.s_addr;
    return OkStatus();
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) return invalidArgument("cannot resolve host '{}': {}", host, gai_strerror(rc));
  *addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr.s_addr;
  freeaddrinfo(res);
  return OkStatus();
}

std::string addrToString(uint32_t addr, uint16_t port) {
  char buf[INET_ADDRSTRLEN] = {};
  in_addr a{};
  a.s_addr = addr;
  inet_ntop(AF_INET, &a, buf, sizeof(buf));
  return fmt::format("{}:{}", buf, ntohs(port));
}

// A TCP socket (with `flags`, e.g. SOCK_NONBLOCK) bound to `fromAddr` when not 0 (to leave
// through that interface, a rail; routing by destination still applies), connect() called on it.
// Returns connect's errno (0: connected), or socket()'s with *fd = -1 when there is no socket.
static int socketTo(uint32_t addr, uint16_t port, uint32_t fromAddr, int flags, int* fd) {
  *fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
  if (*fd < 0) return errno;
  if (fromAddr != 0) {
    sockaddr_in src{};
    src.sin_family = AF_INET;
    src.sin_addr.s_addr = fromAddr;
    (void)::bind(*fd, reinterpret_cast<sockaddr*>(&src), sizeof(src));
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = addr;
  a.sin_port = port;
  return ::connect(*fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 ? 0 : errno;
}

Status connectTo(uint32_t addr, uint16_t port, double deadline, int* fd, uint32_t fromAddr) {
  double backoff = 0.01;
  while (true) {
    int s = -1;
    const int e = socketTo(addr, port, fromAddr, 0, &s);
    if (s < 0) return systemError("socket(): {}", strerror(e));
    if (e == 0) {
      setNoDelay(s);
      *fd = s;
      return OkStatus();
    }
    ::close(s);
    if ((e != ECONNREFUSED && e != ETIMEDOUT && e != ECONNRESET && e != EAGAIN && e != ENETUNREACH) ||
        nowSec() + backoff > deadline)
      return systemError("connect to {}: {}", addrToString(addr, port), strerror(e));
    usleep(static_cast<useconds_t>(backoff * 1e6));
    backoff = std::min(backoff * 2, 0.2);
  }
}

Status startConnect(uint32_t addr, uint16_t port, uint32_t fromAddr, int* fd) {
  int s = -1;
  const int e = socketTo(addr, port, fromAddr, SOCK_NONBLOCK, &s);
  if (s < 0) return systemError("socket(): {}", strerror(e));
  if (e != 0 && e != EINPROGRESS) {
    ::close(s);
    return systemError("connect to {}: {}", addrToString(addr, port), strerror(e));
  }
  setNoDelay(s);
  *fd = s;
  return OkStatus();
}

Status finishConnect(int fd, bool* done) {
  *done = false;
  pollfd p{fd, POLLOUT, 0};
  int rc = ::poll(&p, 1, 0);
  if (rc < 0 && errno != EINTR) return systemError("poll(): {}", strerror(errno));
  if (rc <= 0) return OkStatus();
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) return systemError("connect: {}", strerror(err));
  *done = true;
  return OkStatus();
}

static Status waitFd(int fd, short events, double deadline, const std::atomic<bool>* abort,
                     const std::string& what, const char* verb) {
  while (true) {
    if (abort && abort->load(std::memory_order_relaxed)) return Status(strataAborted, "aborted");
    double left = deadline - nowSec();
    if (left <= 0) return makeError(strataTimeout, "timed out waiting to {} {}", verb, what);
    pollfd p{fd, events, 0};
    int ms = static_cast<int>(std::min(left, 0.1) * 1000) + 1;
    int rc = ::poll(&p, 1, ms);
    if (rc > 0) return OkStatus();
    if (rc < 0 && errno != EINTR) return systemError("poll(): {}", strerror(errno));
  }
}

Status acceptOne(int listenFd, double deadline, const std::atomic<bool>* abort, int* fd) {
  STRATA_RETURN_IF_ERROR(waitFd(listenFd, POLLIN, deadline, abort, "a connection", "accept"));
  int s = ::accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
  if (s < 0) return systemError("accept(): {}", strerror(errno));
  setNoDelay(s);
  *fd = s;
  return OkStatus();
}

Status sendAll(int fd, const void* p, size_t n, double deadline, const std::atomic<bool>* abort,
               const std::string& what) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::send(fd, c, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      c += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      STRATA_RETURN_IF_ERROR(waitFd(fd, POLLOUT, deadline, abort, what, "send to"));
      continue;
    }
    return remoteError("connection to {} broke while sending: {}", what, strerror(errno));
  }
  return OkStatus();
}

Status recvAll(int fd, void* p, size_t n, double deadline, const std::atomic<bool>* abort,
               const std::string& what) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = ::recv(fd, c, n, MSG_DONTWAIT);
    if (r > 0) {
      c += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return remoteError("{} closed the connection (peer exited or failed)", what);
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      STRATA_RETURN_IF_ERROR(waitFd(fd, POLLIN, deadline, abort, what, "receive from"));
      continue;
    }
    return remoteError("connection to {} broke while receiving: {}", what, strerror(errno));
  }
  return OkStatus();
}

}  // namespace strata::net
