// device_proxy_layout.h: where the network proxy's shadows live (device_proxy.h). A shadow entry
// per proxied (channel, peer) that the kernels can use: every proxied peer on channel 0 (send/recv
// entries run on channel 0) and the proxied ring and tree peers of every channel (collectives,
// dev_peers.h). An entry is a control block (the counters on their own 128-byte lines, then the
// per-step sizes), the send shadow slots and the receive slots, kSteps x slotBytes each.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/device/dev_peers.h"
#include "kernels/device/dev_work.h"

namespace strata {

struct ProxyGeometry {
  int rank = 0, nranks = 1, nch = 1;
  uint64_t slotBytes = 0;
};

struct ProxyLayout {
  static constexpr uint64_t kCtrlBytes = 640;
  /// Counter words (uint64_t units) of a control block; the step sizes follow at kSizes.
  enum Word { kSendHead = 0, kSendTail = 16, kRecvHead = 32, kRecvTail = 48, kSizes = 64 };

  ProxyGeometry g;
  std::vector<int32_t> entry;  ///< [c * nranks + p]: the shadow entry, -1 when none
  uint64_t entries = 0;

  uint64_t entryBytes() const { return kCtrlBytes + 2 * uint64_t(dev::kSteps) * g.slotBytes; }
  uint64_t totalBytes() const { return entries * entryBytes(); }
  int32_t at(int c, int p) const { return entry[size_t(c) * size_t(g.nranks) + size_t(p)]; }
  uint64_t ctrlOffset(uint64_t e) const { return e * entryBytes(); }
  uint64_t sendSlotsOffset(uint64_t e) const { return e * entryBytes() + kCtrlBytes; }
  uint64_t recvSlotsOffset(uint64_t e) const { return sendSlotsOffset(e) + uint64_t(dev::kSteps) * g.slotBytes; }

  static ProxyLayout build(const ProxyGeometry& g, const std::vector<uint8_t>& proxied) {
    ProxyLayout l;
    l.g = g;
    const int n = g.nranks, r = g.rank;
    l.entry.assign(size_t(g.nch) * size_t(n), -1);
    auto add = [&](int c, int p) {
      if (p < 0 || p == r || !proxied[size_t(p)]) return;
      int32_t& e = l.entry[size_t(c) * size_t(n) + size_t(p)];
      if (e < 0) e = int32_t(l.entries++);
    };
    for (int c = 0; c < g.nch; ++c) {
      if (c == 0)
        for (int p = 0; p < n; ++p) add(c, p);
      int parent, kid0, kid1;
      dev::treeLinks(r, n, c, &parent, &kid0, &kid1);
      for (int p : {dev::mod(r - 1, n), dev::mod(r + 1, n), parent, kid0, kid1}) add(c, p);
    }
    return l;
  }
};

}  // namespace strata
