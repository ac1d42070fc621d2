// memory.h: this process's resident memory split as /proc/self/status reports it, for the perf
// tools' memory footer (what a communicator costs a rank: private and shared).
#pragma once

#include <cstddef>

namespace strata::perf {

struct MemoryUse {
  double anonMiB = 0;    ///< RssAnon: private memory (heap, stacks, test buffers)
  double shmemMiB = 0;   ///< RssShmem: shared-memory segments mapped and touched
};

MemoryUse readMemoryUse();

}  // namespace strata::perf
