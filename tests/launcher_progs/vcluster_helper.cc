// vcluster_helper: one rank of a vcluster_test job on a strata-run virtual cluster (--nodes).
//   info          print "host=<hostname>", "node=<STRATA_NODE>", "local=<rank>/<size>",
//                 "rate=<STRATA_VCLUSTER_RAIL_RATE>", "ifname=<STRATA_SOCKET_IFNAME>", one
//                 "if <name> <addr>/<prefix>" per rail interface and "sysnet=<a,b,..>" (/sys/class/net)
//   connect PORT  local rank 0 of each node listens on PORT; every rank connects to every other
//                 node on each rail's address (198.18.<r>.<node+1>), sends its rank and expects the
//                 peer's node back, from a local address on the same rail; prints "connect ok"
// Exits 1 on any failure (reason on stderr).
#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

int envInt(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}

std::string envStr(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "unset";
}

int info() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::printf("host=%s\nnode=%s\nlocal=%s/%s\nrate=%s\nifname=%s\n", host, envStr("STRATA_NODE").c_str(),
              envStr("STRATA_LOCAL_RANK").c_str(), envStr("STRATA_LOCAL_SIZE").c_str(),
              envStr("STRATA_VCLUSTER_RAIL_RATE").c_str(), envStr("STRATA_SOCKET_IFNAME").c_str());
  std::vector<std::string> ifs;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return 1;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || std::strncmp(i->ifa_name, "rail", 4) != 0) continue;
    char a[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, a, sizeof(a));
    uint32_t mask = i->ifa_netmask ? ntohl(reinterpret_cast<sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr) : 0;
    ifs.push_back(std::string("if ") + i->ifa_name + " " + a + "/" + std::to_string(__builtin_popcount(mask)));
  }
  freeifaddrs(list);
  std::sort(ifs.begin(), ifs.end());
  for (const auto& s : ifs) std::printf("%s\n", s.c_str());
  std::vector<std::string> sys;
  if (DIR* d = opendir("/sys/class/net")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') sys.push_back(e->d_name);
    closedir(d);
  }
  std::sort(sys.begin(), sys.end());
  std::string joined;
  for (const auto& s : sys) joined += (joined.empty() ? "" : ",") + s;
  std::printf("sysnet=%s\n", joined.c_str());
  return 0;
}

bool ioAll(int fd, void* buf, size_t n, bool send) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t k = send ? write(fd, p, n) : read(fd, p, n);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// Accepts `expected` connections: reads a rank, answers with `node`.
bool serve(int lfd, int expected, int node, Clock::time_point deadline) {
  for (int got = 0; got < expected;) {
    struct pollfd p = {lfd, POLLIN, 0};
    int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (ms <= 0 || poll(&p, 1, ms) <= 0) {
      std::fprintf(stderr, "server of node %d: only %d of %d connections came\n", node, got, expected);
      return false;
    }
    int c = accept(lfd, nullptr, nullptr);
    if (c < 0) continue;
    int32_t rank = -1, n = node;
    bool ok = ioAll(c, &rank, sizeof(rank), false) && ioAll(c, &n, sizeof(n), true);
    close(c);
    if (ok) ++got;
  }
  return true;
}

bool connectOnce(int myRank, int myNode, int peer, int rail, int port, Clock::time_point deadline) {
  const std::string addr = "198.18." + std::to_string(rail) + "." + std::to_string(peer + 1);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
  for (;;) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) {
      sockaddr_in local{};
      socklen_t len = sizeof(local);
      getsockname(s, reinterpret_cast<sockaddr*>(&local), &len);
      char la[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &local.sin_addr, la, sizeof(la));
      int32_t r = myRank, node = -1;
      bool ok = ioAll(s, &r, sizeof(r), true) && ioAll(s, &node, sizeof(node), false);
      close(s);
      const std::string want = "198.18." + std::to_string(rail) + "." + std::to_string(myNode + 1);
      if (!ok || node != peer || want != la) {
        std::fprintf(stderr, "rank %d: %s answered node %d from local address %s (want node %d from %s)\n", myRank,
                     addr.c_str(), node, la, peer, want.c_str());
        return false;
      }
      std::printf("rank %d -> node %d rail %d ok\n", myRank, peer, rail);
      return true;
    }
    int e = errno;
    close(s);
    if (Clock::now() >= deadline) {
      std::fprintf(stderr, "rank %d: cannot connect to %s:%d: %s\n", myRank, addr.c_str(), port, std::strerror(e));
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int connectAll(int port) {
  const int rank = envInt("STRATA_RANK", 0), node = envInt("STRATA_NODE", -1);
  const int nodes = envInt("STRATA_VCLUSTER_NODES", 0), rails = envInt("STRATA_VCLUSTER_RAILS", 0);
  const int ppn = envInt("STRATA_LOCAL_SIZE", 1), local = envInt("STRATA_LOCAL_RANK", 0);
  if (node < 0 || nodes < 1 || rails < 1) {
    std::fprintf(stderr, "not on a virtual cluster (STRATA_NODE / STRATA_VCLUSTER_* unset)\n");
    return 1;
  }
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  bool ok = true;
  std::thread server;
  if (local == 0) {
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    if (bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || listen(lfd, 128) != 0) {
      std::fprintf(stderr, "rank %d: cannot listen on port %d: %s\n", rank, port, std::strerror(errno));
      return 1;
    }
    server = std::thread([&, lfd] {
      if (!serve(lfd, (nodes - 1) * ppn * rails, node, deadline)) ok = false;
      close(lfd);
    });
  }
  bool clientsOk = true;
  for (int peer = 0; peer < nodes; ++peer)
    for (int rail = 0; rail < rails && peer != node; ++rail)
      clientsOk = connectOnce(rank, node, peer, rail, port, deadline) && clientsOk;
  if (server.joinable()) server.join();
  if (!ok || !clientsOk) return 1;
  std::printf("connect ok\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "info") return info();
  if (mode == "connect" && argc > 2) return connectAll(std::atoi(argv[2]));
  std::fprintf(stderr, "vcluster_helper: bad arguments\n");
  return 64;
}
