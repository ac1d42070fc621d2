// shared_buffers.h: host memory that other processes on this machine can map. strataMemAlloc's
// host branch allocates from here (a memfd per allocation, mapped MAP_SHARED); the local
// transport then sends chunks of such buffers single-copy: the descriptor names the sender's fd,
// offset and inode, and the receiver maps /proc/<pid>/fd/<fd> once and copies or reduces straight
// from that mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "transport/status.h"

namespace strata {

/// A page-aligned, zero-filled region of `bytes` (at least one page) backed by a memfd.
Status allocShared(void** p, size_t bytes);
/// Unmaps and closes a region from allocShared; false (and nothing done) if `p` is not one.
bool freeShared(void* p);

/// Host memory for collective buffers (strataMemAlloc without CUDA, strataHostMemAlloc): a
/// shareable region, else (no memfd to be had, e.g. out of file descriptors) page-aligned pages,
/// which then go through the staging slots.
Status allocHostBuffer(void** p, size_t bytes);
/// Frees memory from allocHostBuffer.
void freeHostBuffer(void* p);

/// Where [p, p + bytes) lies in a shared region: its fd, the offset of p and the fd's inode.
/// Cheap (one lock and a binary search over the live regions); false if not covered.
bool findShared(const void* p, size_t bytes, int* fd, uint64_t* offset, uint64_t* inode);

/// The receiving side: process `pid`'s region `fd` mapped read-only here (cached per (pid, fd);
/// remapped when the inode differs, i.e. the fd number was reused). Null on failure (`why` says).
/// `minBytes`: the region must be at least this long; *size gets its length.
const char* mapPeerRegion(int pid, int fd, uint64_t inode, uint64_t minBytes, size_t* size, std::string* why);

/// True if this process may open other files of process `pid` through /proc/<pid>/fd (same user,
/// no ptrace restriction): the probe the transport runs once per peer at setup.
bool canMapPeerRegions(int pid);

/// Number of live regions allocated by this process (tests).
size_t sharedRegionCount();

}  // namespace strata
