// fuzz_config: the values of strata's STRATA_* variables (transport/config.cc, parseConfig: the
// registry behind config()). Input: one variable per line, its first byte choosing the variable
// (modulo the registry's size), the rest its value. Every value is accepted or refused naming the
// variable; an accepted one means what it says: a size or count written in digits (with K or M)
// is that number, not a wrapped one, nothing negative becomes a huge size, and no number of
// seconds is NaN, infinite or beyond 1e15.
#include <cmath>
#include <map>

#include "fuzz_util.h"
#include "transport/config.h"

namespace {

// Digits with an optional K/M suffix -> the number it denotes (false when not of that form).
bool plainSize(const std::string& v, unsigned __int128* out) {
  size_t i = 0;
  unsigned __int128 x = 0;
  while (i < v.size() && v[i] >= '0' && v[i] <= '9') {
    x = x * 10 + static_cast<unsigned>(v[i] - '0');
    if (x > (static_cast<unsigned __int128>(1) << 100)) x = static_cast<unsigned __int128>(1) << 100;
    ++i;
  }
  if (i == 0) return false;
  if (i < v.size() && (v[i] == 'k' || v[i] == 'K')) x <<= 10, ++i;
  else if (i < v.size() && (v[i] == 'm' || v[i] == 'M')) x <<= 20, ++i;
  *out = x;
  return i == v.size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<strata::ConfigEntry> table = strata::describeConfig(strata::Config{});
  fuzz::Reader in(data, size);
  std::map<std::string, std::string> env;
  while (in.left()) {
    const std::string line = in.line();
    if (line.empty()) continue;
    env[table[static_cast<uint8_t>(line[0]) % table.size()].name] = line.substr(1);
  }
  strata::Config cfg;
  const strata::Status st = strata::parseConfig(
      [&](const char* name) {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      &cfg);
  if (!st.ok()) {
    bool named = false;
    for (const auto& [k, v] : env) named = named || st.message().find(k) != std::string::npos;
    FUZZ_CHECK(named, "the error names no variable it was given: %s", st.message().c_str());
    return 0;
  }
  for (const strata::ConfigEntry& e : strata::describeConfig(cfg)) {
    auto it = env.find(e.name);
    if (it == env.end() || it->second.empty() || it->second.find('\0') != std::string::npos) continue;
    const std::string& given = it->second;
    if (e.type == "bytes" || e.type == "count" || e.type == "port" || (e.type == "index" && given != "-1")) {
      FUZZ_CHECK(given.find('-') == std::string::npos, "%s='%s' (negative) was taken as %s", e.name.c_str(),
                 given.c_str(), e.value.c_str());
      unsigned __int128 want = 0;
      if (plainSize(given, &want)) {
        FUZZ_CHECK(want <= ~uint64_t{0} && e.value == std::to_string(static_cast<uint64_t>(want)),
                   "%s='%s' was taken as %s", e.name.c_str(), given.c_str(), e.value.c_str());
      }
    }
    if (e.type == "seconds" || e.type == "microseconds" || e.type == "bits/s") {
      const double d = std::strtod(e.value.c_str(), nullptr);
      FUZZ_CHECK(std::isfinite(d) && d <= 1e15, "%s='%s' was taken as %s", e.name.c_str(), given.c_str(),
                 e.value.c_str());
    }
  }
  return 0;
}
