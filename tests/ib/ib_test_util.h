// ib_test_util.h: helpers of the ibverbs transport tests: two connected ranks (threads) over a
// transport, a driver that progresses a connection and sleeps on its wait sources when idle, and
// verifiable data patterns.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transport/connection.h"
#include "transport/net_transport.h"
#include "transport/socket.h"
#include "transport/waiter.h"

namespace strata::ib::testutil {

inline uint8_t patternByte(int rank, size_t tag, size_t i) {
  return static_cast<uint8_t>((i * 131 + tag * 31 + static_cast<size_t>(rank) * 17 + (i >> 13)) & 0xff);
}
inline std::vector<uint8_t> pattern(int rank, size_t tag, size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = patternByte(rank, tag, i);
  return v;
}

/// Progresses `c` until every transfer in `ts` completes, an error, or `timeoutSec`. When
/// `sleepWhenIdle`, idle rounds sleep on addWaitSources (completion channels, oob socket).
inline Status drive(Connection* c, const std::vector<Transfer*>& ts, double timeoutSec = 30,
                    bool sleepWhenIdle = true) {
  const double deadline = net::nowSec() + timeoutSec;
  int idle = 0;
  double lastCheck = net::nowSec();
  while (true) {
    bool all = true;
    for (Transfer* t : ts) all = all && t->complete;
    if (all) return OkStatus();
    bool p = false;
    STRATA_RETURN_IF_ERROR(c->progress(&p));
    if (p) {
      idle = 0;
      continue;
    }
    const double now = net::nowSec();
    if (now > deadline) return makeError(strataTimeout, "test driver: no completion within {} s", timeoutSec);
    if (now - lastCheck > 0.1) {
      lastCheck = now;
      STRATA_RETURN_IF_ERROR(c->checkPeer());
    }
    if (sleepWhenIdle && ++idle > 20) {
      WaitSet ws;
      c->addWaitSources(&ws);
      sleepOn(ws, 100000, [] { return false; });
    }
  }
}

/// A connected pair of oob sockets (non-blocking), as the bootstrap would hand them over.
inline void oobPair(int fds[2]) {
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) fds[0] = fds[1] = -1;
}

/// Runs f(0) and f(1) on two threads.
inline void twoRanks(const std::function<void(int)>& f) {
  std::thread t1([&] { f(1); });
  f(0);
  t1.join();
}

}  // namespace strata::ib::testutil
