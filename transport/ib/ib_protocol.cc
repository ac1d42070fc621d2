// ib_protocol.cc: slot arrival bookkeeping and GID choice.
#include "transport/ib/ib_protocol.h"

#include <infiniband/verbs.h>

namespace strata::ib {

bool SlotArrivals::arrive(uint32_t slot) {
  if (slot >= arrived_.size() || arrived_[slot]) return false;
  arrived_[slot] = 1;
  return true;
}

void SlotArrivals::consume() {
  arrived_[next_ % arrived_.size()] = 0;
  ++next_;
  ++owed_;
}

namespace {
bool isZero(const uint8_t* g) {
  for (int i = 0; i < 16; ++i)
    if (g[i]) return false;
  return true;
}
bool isV4Mapped(const uint8_t* g) {
  for (int i = 0; i < 10; ++i)
    if (g[i]) return false;
  return g[10] == 0xff && g[11] == 0xff;
}
bool isLinkLocal(const uint8_t* g) { return g[0] == 0xfe && (g[1] & 0xc0) == 0x80; }
}  // namespace

int chooseGid(const std::vector<GidEntry>& table, bool ethernet, int forced) {
  if (forced >= 0) {
    for (const GidEntry& e : table)
      if (e.index == forced && !isZero(e.raw)) return forced;
    return -1;
  }
  if (!ethernet) {
    for (const GidEntry& e : table)
      if (e.index == 0) return 0;
    return -1;
  }
  auto pick = [&](auto&& pred) {
    for (const GidEntry& e : table)
      if (!isZero(e.raw) && pred(e)) return e.index;
    return -1;
  };
  const int v2 = IBV_GID_TYPE_ROCE_V2;
  int i = pick([&](const GidEntry& e) { return e.type == v2 && isV4Mapped(e.raw); });
  if (i < 0) i = pick([&](const GidEntry& e) { return e.type == v2 && !isLinkLocal(e.raw); });
  if (i < 0) i = pick([&](const GidEntry& e) { return e.type == v2; });
  if (i < 0) i = pick([&](const GidEntry&) { return true; });
  return i;
}

}  // namespace strata::ib
