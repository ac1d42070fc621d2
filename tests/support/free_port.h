// free_port.h: a TCP port for tests that start ranks by hand with MASTER_PORT. It is drawn at
// random below the kernel's ephemeral range (ip_local_port_range), where no outgoing connection
// or bind(0) of a concurrently running test can take it between the draw and the rank's bind; it
// is checked free on every address when drawn.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>

namespace strata::testing {

/// True when a listening socket could bind `port` on every address now.
inline bool portBindable(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(fd);
  return ok;
}

inline int freePort() {
  int lo = 32768, hi = 60999;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d %d", &lo, &hi) != 2) lo = 32768;
    std::fclose(f);
  }
  const int top = lo, bottom = lo > 11024 ? lo - 10000 : 1024;  // below the ephemeral range
  std::mt19937 rng(static_cast<unsigned>(getpid()) * 2654435761u ^
                   static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
  for (int i = 0; i < 1000; ++i) {
    const int port = bottom + static_cast<int>(rng() % static_cast<unsigned>(top - bottom));
    if (portBindable(port)) return port;
  }
  return 0;
}

}  // namespace strata::testing
