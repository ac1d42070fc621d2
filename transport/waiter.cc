// waiter.cc: futex-backed doorbells and the sleep primitives of waiter.h.
#include "transport/waiter.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace strata {

static long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, ts, nullptr, 0);
}

void Doorbell::ring() {
  // Dekker with the sleeper (waiter.h): we published state, then look for sleepers; a sleeper
  // registers, then re-checks state. The fences guarantee one of us sees the other, so a running
  // owner costs a plain load here (no write to its line) and a sleeping one gets woken.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleepers.load(std::memory_order_relaxed) != 0) {
    seq.fetch_add(1, std::memory_order_seq_cst);
    futex(&seq, FUTEX_WAKE, INT_MAX, nullptr);
  }
}

void Doorbell::sleep(uint32_t expected, int timeoutMicros) {
  timespec ts{timeoutMicros / 1000000, (timeoutMicros % 1000000) * 1000L};
  // Shared (not FUTEX_PRIVATE) so that rings from other processes on a shared mapping wake us.
  futex(&seq, FUTEX_WAIT, expected, &ts);
}

void sleepMicros(int micros) {
  timespec ts{micros / 1000000, (micros % 1000000) * 1000L};
  nanosleep(&ts, nullptr);
}

int pollFds(std::vector<pollfd>& fds, int timeoutMicros) {
  int ms = timeoutMicros / 1000;
  if (ms < 1) ms = 1;
  return ::poll(fds.data(), fds.size(), ms);
}

}  // namespace strata
