// secret.h: the user's rendezvous secret (STRATA_SECRET / STRATA_SECRET_FILE) and the keyed hash
// that turns it, with a job's public values, into the 128-bit secret of the rendezvous. Launchers
// that cannot hand their ranks a random secret (torchrun, mpirun, srun variables) derive the
// rendezvous secret from values any local user can know; mixed with a user secret through
// HMAC-SHA256, strangers can no longer compute it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "transport/status.h"

namespace strata {

/// SHA-256 of `n` bytes.
void sha256(const void* data, size_t n, uint8_t out[32]);
/// HMAC-SHA256(key, msg).
void hmacSha256(const std::string& key, const std::string& msg, uint8_t out[32]);

/// The user's secret: STRATA_SECRET, else the contents of STRATA_SECRET_FILE (created with mode
/// 0600 and random contents when it does not exist; ranks racing to create it all end up reading
/// the one that won). *found is false when neither is set. A file that others can read or that
/// another user owns is an error.
Status userSecret(std::string* secret, bool* found);
/// Reads or creates the secret file at `path` (userSecret's file half; exposed for tests).
Status readOrCreateSecretFile(const std::string& path, std::string* secret);

/// Random bytes from the kernel.
void secureRandom(void* p, size_t n);
/// Compares n bytes in time independent of where they differ.
bool equalConstantTime(const void* a, const void* b, size_t n);

}  // namespace strata
