// host_identity.h: who shares what with whom. Two ranks are on one machine when their host hashes
// match (hostname plus kernel boot id, so containers on one kernel with different hostnames are
// told apart only by name), and in one process when their process hashes match.
#pragma once

#include <cstdint>
#include <string>

namespace strata::topology {

std::string hostName();
/// Stable for the life of the machine's boot; equal for processes on one machine.
uint64_t hostHash();
/// Unique per process (host hash, pid and process start time).
uint64_t processHash();
/// FNV-1a 64-bit hash of bytes.
uint64_t hashBytes(const void* data, size_t n, uint64_t seed = 1469598103934665603ull);

}  // namespace strata::topology
