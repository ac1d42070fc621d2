// fake_verbs.h: a TEST-ONLY verbs provider (never selectable outside tests: it is only compiled
// into test binaries, and the transport takes it only through ib::createTransport's table
// argument). It implements the ib::Verbs table with RC semantics over shared memory between the
// threads of one process, so the transport's protocol runs unchanged in unit tests.
//
// What it models: devices with ports (InfiniBand: LID; Ethernet/RoCE: GID tables with types),
// protection domains, memory regions with distinct lkey/rkey checked on every access (range, PD,
// access flags: a violation gives an error completion and moves the queue pair to ERR, as RC
// does), queue pairs with RESET -> INIT -> RTR -> RTS transitions (required attribute masks are
// checked; posting a send outside RTS, or a receive in RESET, fails with EINVAL), send-queue and
// receive-queue depth limits, RDMA write, write with immediate (consumes a receive at the target
// and completes it with the immediate), send with immediate, RDMA read, completion queues with
// overflow accounting, completion channels (an eventfd per channel; req_notify_cq arms for the
// next completion only), and address checks (the RTR address vector must name the peer's LID, or
// one of its GIDs on RoCE, and the peer must be connected back to this queue pair).
//
// Simplifications: one background "wire" thread executes posted work requests in order per queue
// pair, one at a time under a global lock (no packets, MTU or PSN modelling); a write with
// immediate or a send that finds no receive posted waits for one (infinite RNR retry); a target
// that is gone or in error gives the initiator IBV_WC_RETRY_EXC_ERR at once instead of after the
// timeout; error completions of flushed work requests are generated for all of them; no SRQ,
// atomics, inline data, memory windows, async events or multicast.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <vector>

#include "transport/ib/ib_verbs.h"

namespace strata::ib::fake {

struct GidSpec {
  uint8_t raw[16];
  int type;  ///< IBV_GID_TYPE_*
};
struct PortSpec {
  bool active = true;
  bool ethernet = false;
  uint16_t lid = 0;
  std::vector<GidSpec> gids;
  ibv_mtu mtu = IBV_MTU_4096;
};
struct DeviceSpec {
  std::string name;
  std::vector<PortSpec> ports;
};

/// An InfiniBand device with one active port.
DeviceSpec ibDevice(const std::string& name, uint16_t lid);
/// A RoCE device with one active port whose GID table holds, in order: a link-local RoCE v1, a
/// link-local RoCE v2, an IPv4-mapped RoCE v1 and an IPv4-mapped RoCE v2 GID (for 10.0.0.`host`).
DeviceSpec roceDevice(const std::string& name, uint8_t host);

class Fabric {
 public:
  /// Installs itself as the process's fabric (one at a time) and starts the wire thread.
  explicit Fabric(std::vector<DeviceSpec> devices);
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  const Verbs* verbs() const;
  /// Moves every queue pair of the `ordinal`-th opened device context (0-based) to ERR: its
  /// queued work is flushed with error completions and peers writing to it get errors.
  void killContext(int ordinal);
  int contextsOpened() const;
  /// Payload bytes moved by work requests posted on device `name`.
  uint64_t bytesOn(const std::string& name) const;
  /// Payload bytes moved by RDMA reads (the single-copy path), over all devices.
  uint64_t bytesRead() const;
  uint64_t cqOverflows() const;
  int liveQps() const;
  int liveMrs() const;
  /// The first misuse seen (a post in a wrong state, a bad transition), or "".
  std::string firstMisuse() const;
};

}  // namespace strata::ib::fake
