// device_proxy.h: the network proxy of the CUDA path. Ranks of one node map each other's device
// FIFO arenas (pointers, CUDA IPC); a peer on another node cannot be mapped, so for each proxied
// (channel, peer) a rank keeps shadows of that connection in GPU-visible host memory: a send
// shadow (slots, head, per-step sizes, and the tail that credits come back to) which the kernel
// writes exactly as it would write a local peer's receive entry, and a receive shadow (slots,
// head, and the tail through which the kernel returns credits). One thread per communicator moves
// whole steps: a head advance becomes a data message (channel, step, bytes, then the bytes)
// received straight into the peer's receive shadow slot, after which the peer's proxy publishes
// its head; consumed counts go back as credit messages. Simple protocol only (see device_plan.h).
// The wire is a network-only set of transports (tcp, UCX or verbs, as the host path chooses for
// the pair) over a bootstrap of the proxy's own, so proxy traffic never mixes with host
// collectives. Memory comes from a ProxyMemory: pinned, device-mapped host memory on the GPU;
// plain host memory in the host emulation (tests/support/device_proxy_emulation.h), which runs
// this very code. Layout of the shadows: device_proxy_layout.h.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "collectives/device_proxy_layout.h"
#include "kernels/device/dev_work.h"
#include "topology/layout.h"
#include "transport/bootstrap.h"
#include "transport/status.h"
#include "transport/transport_setup.h"

namespace strata {

/// Memory the kernels and the proxy thread both reach.
class ProxyMemory {
 public:
  virtual ~ProxyMemory() = default;
  /// `bytes` of zeroed memory, 128-byte aligned: *host is the proxy's address, *device the kernels'.
  virtual Status alloc(size_t bytes, char** host, char** device) = 0;
  virtual void free(char* host) = 0;
};
/// Plain host memory (device address = host address): the host emulation.
std::unique_ptr<ProxyMemory> hostProxyMemory();

/// The peers whose device arenas this rank cannot map and reaches through the proxy: those the
/// host transports reach over the network (another node, a virtual node of a topology file, or
/// every peer under STRATA_TRANSPORT=tcp), so the device path goes where the host path goes.
std::vector<uint8_t> proxiedPeers(CommTransports& transports, int nranks);

struct ProxyHooks {
  /// Raised by the owner (abort, failure, timeout): the proxy stops moving data and tells its peers.
  const volatile uint32_t* abortFlag = nullptr;
  /// A failure the proxy found (peer gone, broken connection, protocol error); called once, from
  /// the proxy thread. The owner fails the communicator and raises the abort flag.
  std::function<void(const Status&)> onError;
  /// Whether device work is pending: a peer that went away without a goodbye is an error only
  /// then (or when this rank still has data for it). Null: always.
  std::function<bool()> busy;
};

/// What a proxy moved so far (steps and payload bytes, both directions).
struct ProxyStats {
  uint64_t stepsSent = 0, bytesSent = 0, stepsReceived = 0, bytesReceived = 0;
};

class DeviceProxy {
 public:
  /// Collective over `bs` (every rank calls it when any rank has a proxied peer): a listener and
  /// bootstrap of the proxy's own, network-only transports over it, the shadows, and the thread.
  /// `proxied[p]`: p's arena is not mapped; its connections go through the proxy.
  static Status create(Bootstrap& bs, const topology::CommLayout& layout, const ProxyGeometry& geometry,
                       std::vector<uint8_t> proxied, std::unique_ptr<ProxyMemory> mem, ProxyHooks hooks,
                       std::unique_ptr<DeviceProxy>* out);
  /// Sends what the kernels posted and a goodbye (bounded by STRATA_TIMEOUT), then stops. Call
  /// only once no kernel of this rank runs.
  ~DeviceProxy();

  /// Points conns[c * nranks + p] of every shadowed (c, p) at the shadows (device addresses); the
  /// step counters stay where buildConns put them.
  void wire(dev::PeerConn* conns) const;
  /// Connects `peer` (thread-safe): ring and tree peers are wanted from the start; send/recv
  /// launches, and deterministic mode's collectives (every peer), want theirs before they are
  /// enqueued (wantLaunch).
  void want(int peer);
  void wantLaunch(const dev::DevWork& w);
  /// Device work was enqueued: wake the thread if it sleeps long.
  void kick();
  /// Fault tests: stops the thread at once, as if the process had died; the destruction then
  /// closes the connections without sending what is queued, a goodbye or a failure notice.
  void simulateDeath();
  bool proxied(int peer) const { return proxied_[static_cast<size_t>(peer)] != 0; }
  /// The failure the proxy found, if any.
  Status status();
  ProxyStats stats() const;
  const ProxyLayout& layout() const { return layout_; }

 private:
  struct Chan;
  struct Link;
  DeviceProxy() = default;
  void run();
  void pass(bool* progressed);
  bool drained();
  void fail(const Status& st);
  void tellPeers(const std::string& why);
  Status pumpLink(Link& l, bool* progressed);
  Status handleMessage(Link& l);
  void sleep(int micros);

  ProxyGeometry g_;
  std::vector<uint8_t> proxied_;
  ProxyLayout layout_;
  std::unique_ptr<ProxyMemory> mem_;
  char* host_ = nullptr;
  char* device_ = nullptr;
  ProxyHooks hooks_;
  std::unique_ptr<Bootstrap> bs_;  ///< the proxy's own (listener, tag)
  std::vector<std::unique_ptr<Chan>> chans_;
  std::vector<std::unique_ptr<Link>> links_;  ///< indexed by peer (null: not proxied)
  std::vector<Link*> active_;                 ///< wanted links, in the order they were wanted
  /// Network-only, used by the proxy thread alone; declared after what its connections point
  /// into (posted transfers), so that it goes first.
  CommTransports transports_;
  WaitSet ws_;

  std::unique_ptr<std::atomic<uint8_t>[]> wanted_;  ///< by peer: asked for (any thread)
  std::atomic<uint64_t> wantSeq_{0}, seenWant_{0};
  std::atomic<uint64_t> kickSeq_{0};
  std::atomic<bool> sleeping_{false}, stop_{false}, dead_{false};
  int wakeFd_ = -1;  ///< eventfd: kick() and the destructor wake a sleeping thread

  std::atomic<uint64_t> stepsSent_{0}, bytesSent_{0}, stepsReceived_{0}, bytesReceived_{0};
  std::mutex mu_;
  Status failed_;  ///< guarded by mu_
  bool stopped_ = false;  ///< the proxy thread's: no more data moves (failed or aborted)
  std::thread thread_;
};

}  // namespace strata
