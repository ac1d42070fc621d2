// secret.cc: SHA-256 / HMAC-SHA256 (FIPS 180-4, RFC 2104) and the user secret's sources.
#include "transport/secret.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "transport/config.h"

namespace strata {
namespace {

constexpr uint32_t kK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void block(uint32_t h[8], const uint8_t* p) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = (uint32_t{p[4 * i]} << 24) | (uint32_t{p[4 * i + 1]} << 16) | (uint32_t{p[4 * i + 2]} << 8) | p[4 * i + 3];
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int i = 0; i < 64; ++i) {
    uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kK[i] + w[i];
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

Status readSecretFd(int fd, const std::string& path, std::string* secret) {
  struct stat sb {};
  if (fstat(fd, &sb) != 0) return systemError("STRATA_SECRET_FILE {}: {}", path, strerror(errno));
  if (!S_ISREG(sb.st_mode)) return invalidArgument("STRATA_SECRET_FILE {} is not a regular file", path);
  if (sb.st_uid != geteuid())
    return invalidArgument("STRATA_SECRET_FILE {} belongs to another user (uid {})", path, sb.st_uid);
  if (sb.st_mode & 077)
    return invalidArgument("STRATA_SECRET_FILE {} can be read by other users (mode {:o}): chmod 600 it", path,
                           sb.st_mode & 0777);
  std::string s;
  char buf[4096];
  while (s.size() < (1 << 20)) {
    ssize_t r = ::read(fd, buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return systemError("STRATA_SECRET_FILE {}: {}", path, strerror(errno));
    if (r == 0) break;
    s.append(buf, static_cast<size_t>(r));
  }
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  if (s.empty()) return invalidArgument("STRATA_SECRET_FILE {} is empty", path);
  *secret = std::move(s);
  return OkStatus();
}

}  // namespace

void sha256(const void* data, size_t n, uint8_t out[32]) {
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  const uint8_t* p = static_cast<const uint8_t*>(data);
  size_t left = n;
  for (; left >= 64; left -= 64, p += 64) block(h, p);
  uint8_t tail[128] = {};
  memcpy(tail, p, left);
  tail[left] = 0x80;
  const size_t tailLen = left + 9 <= 64 ? 64 : 128;
  const uint64_t bits = static_cast<uint64_t>(n) * 8;
  for (int i = 0; i < 8; ++i) tail[tailLen - 1 - i] = static_cast<uint8_t>(bits >> (8 * i));
  block(h, tail);
  if (tailLen == 128) block(h, tail + 64);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<uint8_t>(h[i] >> (24 - 8 * j));
}

void hmacSha256(const std::string& key, const std::string& msg, uint8_t out[32]) {
  uint8_t k[64] = {};
  if (key.size() > 64) sha256(key.data(), key.size(), k);
  else memcpy(k, key.data(), key.size());
  std::string inner(64, '\0'), outer(64, '\0');
  for (int i = 0; i < 64; ++i) {
    inner[i] = static_cast<char>(k[i] ^ 0x36);
    outer[i] = static_cast<char>(k[i] ^ 0x5c);
  }
  inner += msg;
  uint8_t ih[32];
  sha256(inner.data(), inner.size(), ih);
  outer.append(reinterpret_cast<const char*>(ih), 32);
  sha256(outer.data(), outer.size(), out);
}

void secureRandom(void* p, size_t n) {
  uint8_t* c = static_cast<uint8_t*>(p);
  while (n > 0) {
    ssize_t r = getrandom(c, n, 0);
    if (r > 0) {
      c += r;
      n -= static_cast<size_t>(r);
    }
  }
}

bool equalConstantTime(const void* a, const void* b, size_t n) {
  const volatile uint8_t* x = static_cast<const volatile uint8_t*>(a);
  const volatile uint8_t* y = static_cast<const volatile uint8_t*>(b);
  uint8_t d = 0;
  for (size_t i = 0; i < n; ++i) d |= static_cast<uint8_t>(x[i] ^ y[i]);
  return d == 0;
}

Status readOrCreateSecretFile(const std::string& path, std::string* secret) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
      Status st = readSecretFd(fd, path, secret);
      ::close(fd);
      return st;
    }
    if (errno != ENOENT) return systemError("STRATA_SECRET_FILE {}: {}", path, strerror(errno));
    // Create it: write a complete file under a private temporary name, then link() it into place.
    // link() never replaces an existing file, so when several ranks race, exactly one file wins
    // and every rank reads that one (rename() would let a late rank replace what others read).
    uint8_t raw[32];
    secureRandom(raw, sizeof(raw));
    static const char* hex = "0123456789abcdef";
    std::string content;
    for (uint8_t c : raw) {
      content += hex[c >> 4];
      content += hex[c & 15];
    }
    content += '\n';
    uint64_t salt = 0;
    secureRandom(&salt, sizeof(salt));
    const std::string tmp = fmt::format("{}.tmp.{}.{:016x}", path, getpid(), salt);
    int tfd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (tfd < 0) return systemError("cannot create STRATA_SECRET_FILE {}: {}", path, strerror(errno));
    (void)fchmod(tfd, 0600);  // whatever the umask
    bool ok = ::write(tfd, content.data(), content.size()) == static_cast<ssize_t>(content.size()) && fsync(tfd) == 0;
    ::close(tfd);
    int linked = ok ? ::link(tmp.c_str(), path.c_str()) : -1;
    int e = errno;
    ::unlink(tmp.c_str());
    if (!ok) return systemError("cannot write STRATA_SECRET_FILE {}", path);
    if (linked != 0 && e != EEXIST) return systemError("cannot create STRATA_SECRET_FILE {}: {}", path, strerror(e));
    // Created, or another rank won the race: read what is there.
  }
  return systemError("STRATA_SECRET_FILE {} keeps disappearing", path);
}

Status userSecret(std::string* secret, bool* found) {
  const Config& cfg = config();
  *found = false;
  if (!cfg.secret.empty()) {
    *secret = cfg.secret;
    *found = true;
    return OkStatus();
  }
  if (cfg.secretFile.empty()) return OkStatus();
  STRATA_RETURN_IF_ERROR(readOrCreateSecretFile(cfg.secretFile, secret));
  *found = true;
  return OkStatus();
}

}  // namespace strata
