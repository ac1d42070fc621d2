// ucx_context.h: one UCX context and worker per communicator (per NetTransport), shared by that
// communicator's connections. Measured here (UCX 1.13, tcp, 2-core VM): a context costs 0.5-5 ms and
// a worker ~1.1 ms, together ~0.3 MB of RSS (1.8 MB for the first, with library start-up); so
// isolation is cheap and bought outright: tags never cross communicators, a communicator's failure
// or teardown (force-closed endpoints) cannot disturb another's, and ranks that are threads of one
// process never share a worker. The worker is UCS_THREAD_MODE_SERIALIZED (a communicator may be
// driven from different threads, one at a time); the context needs no lock between workers.
//
// Rails: when the process has several usable interfaces (net::usableInterfaces, the rails in rail
// order) and the user did not choose UCX_NET_DEVICES / STRATA_UCX_NET_DEVICES, the transport makes
// one context and worker per rail (at most kMaxRails), each restricted through ucp_config_modify to
// its rail's interface plus the RDMA ports bound to it (sysfs), and stripes large transfers over
// them itself (ucx_connection.h): UCX's own multi-rail lanes (UCX_MAX_RNDV_RAILS) did not stripe
// over tcp here. Where some interfaces have RDMA ports, only those are rails (a slow management
// Ethernet would hold every stripe back). A user list of several devices ("mlx5_0:1,mlx5_1:1",
// "rail0,rail1") makes one rail per listed device; one device, "all", or a single usable
// interface keep one context with UCX's own setting, as before. See planRails.
//
// UCX settings are read with the env prefix "STRATA" (STRATA_UCX_<NAME>, else UCX_<NAME>). Unless
// UCX_TLS or STRATA_UCX_TLS is set, shared-memory transports are excluded (kNetworkTls) and the
// worker address is packed network-only either way: UCX's shared-memory transports cannot report a
// dead peer, and strata's own shared memory serves ranks inside a node. Before UCX starts, strata
// keeps it from changing the host program (unless STRATA_UCX_HOST_HOOKS=1): UCX's error-signal
// handlers, installed when libucs loads, are removed (the previous handlers come back) unless
// UCX_ERROR_SIGNALS changed the list, and UCM's memory hooks are turned off through
// ucm_set_global_opts. ucp_config_modify cannot do either in 1.13: ERROR_SIGNALS and MEM_* are not
// context settings (UCX warns "invalid configurations" and ignores them), hence the direct calls.
#pragma once

#include <ucp/api/ucp.h>

#include <memory>
#include <string>
#include <vector>

#include "transport/status.h"
#include "transport/ucx/ucx_regcache.h"
#include "transport/waiter.h"

namespace strata::ucx {

/// One rail's devices: the UCX_NET_DEVICES value of its context and its interface's subnet.
struct RailSpec {
  std::string devices;          ///< empty: UCX's own setting (the single-context case)
  uint32_t net = 0, mask = 0;   ///< IPv4 subnet, network order (0/0: unknown)
};

/// The rails of this process (see the file comment); empty: one context with UCX's own settings.
std::vector<RailSpec> planRails(int rank);

class UcxContext final : public Registrar {
 public:
  /// A context and worker restricted to `rail.devices` (unless empty).
  static Status create(int rank, const RailSpec& rail, std::shared_ptr<UcxContext>* out);
  ~UcxContext() override;

  int rank() const { return rank_; }
  const RailSpec& rail() const { return rail_; }
  ucp_context_h context() const { return context_; }
  ucp_worker_h worker() const { return worker_; }
  /// This worker's network-only address, for the peer's endpoint.
  const std::vector<char>& address() const { return address_; }
  /// Runs ucp_worker_progress until it reports nothing more (bounded); true if anything happened.
  bool progress();
  /// The worker's event fd after arming it, or an always-ready fd when events are already pending
  /// (arm returned UCS_ERR_BUSY): the wait then returns at once instead of sleeping.
  void addWaitSources(WaitSet* ws);
  /// The registration cache, or null when STRATA_UCX_REG_CACHE_BYTES=0.
  RegCache* regCache() { return regCache_.get(); }

  Status map(void* addr, size_t bytes, void** handle) override;
  void unmap(void* handle) override;

 private:
  UcxContext() = default;
  int rank_ = -1;
  RailSpec rail_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int eventFd_ = -1;   ///< the worker's (owned by UCX)
  int readyFd_ = -1;   ///< an eventfd that is always readable
  std::vector<char> address_;
  std::unique_ptr<RegCache> regCache_;
};

/// The transport list used unless the user chose UCX_TLS / STRATA_UCX_TLS: everything but shared
/// memory ("sm": posix, sysv, cma, knem, xpmem) and loopback-to-self. An exclusion list, because
/// naming rc/ud/dc (or knem/xpmem) outright makes UCX warn on machines without them; GPU IPC
/// transports that remain never reach a peer, the worker address being packed network-only.
constexpr const char* kNetworkTls = "^sm,self";

}  // namespace strata::ucx
