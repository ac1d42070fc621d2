// waiter.h: how a rank waits for peers without burning a core. Peers ring a Doorbell (a futex
// word, in shared memory for processes) whenever they change state the owner may wait on; the
// owner spins for STRATA_SPIN_US, then sleeps on its doorbell, or polls sockets, in slices short
// enough to check liveness, aborts and deadlines.
#pragma once

#include <poll.h>

#include <atomic>
#include <cstdint>
#include <vector>

namespace strata {

struct alignas(64) Doorbell {
  std::atomic<uint32_t> seq{0};
  std::atomic<uint32_t> sleepers{0};

  /// Called by peers after publishing a state change.
  void ring();
  /// Sleeps until seq != expected or `timeoutMicros` pass. Returns immediately if seq moved.
  void sleep(uint32_t expected, int timeoutMicros);
};

/// What one wait may sleep on.
struct WaitSet {
  std::vector<Doorbell*> bells;
  std::vector<pollfd> fds;
  void clear() {
    bells.clear();
    fds.clear();
  }
};

/// Sleeps once, for at most `timeoutMicros`, on whatever `ws` holds: futex on a single doorbell
/// (after registering as a sleeper and re-checking with `recheck`), poll() on sockets, or a short
/// nanosleep when the sources are mixed. `recheck` returns true if progress became possible.
template <typename Recheck>
void sleepOn(WaitSet& ws, int timeoutMicros, Recheck&& recheck);

void sleepMicros(int micros);
int pollFds(std::vector<pollfd>& fds, int timeoutMicros);

template <typename Recheck>
void sleepOn(WaitSet& ws, int timeoutMicros, Recheck&& recheck) {
  if (ws.fds.empty() && ws.bells.size() == 1) {
    Doorbell* b = ws.bells[0];
    uint32_t seen = b->seq.load(std::memory_order_seq_cst);
    b->sleepers.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with the fence in ring()
    if (!recheck()) b->sleep(seen, timeoutMicros);
    b->sleepers.fetch_sub(1, std::memory_order_seq_cst);
    return;
  }
  if (!ws.fds.empty() && ws.bells.empty()) {
    pollFds(ws.fds, timeoutMicros);
    return;
  }
  // Mixed or several doorbells: short sleeps keep latency bounded without a futex per source.
  if (!recheck()) sleepMicros(timeoutMicros < 100 ? timeoutMicros : 100);
}

}  // namespace strata
