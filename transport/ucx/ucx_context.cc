// ucx_context.cc: UCX start-up (configuration, host protection), worker creation and waiting.
#include "transport/ucx/ucx_context.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <ucm/api/ucm.h>
#include <ucs/config/global_opts.h>
#include <ucs/debug/debug.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>

#include "transport/config.h"
#include "transport/log.h"
#include "transport/socket.h"
#include "transport/ucx/ucx_wire.h"

namespace strata::ucx {
namespace {

/// Keeps UCX from changing the host program: see the file comment of ucx_context.h.
void protectHostProgram() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (config().ucxHostHooks) return;
    ucm_global_config_t m = ucm_global_opts;
    // Only the switches: changing mmap_hook_mode at run time breaks UCM's call-through to the
    // original mmap (measured: endless ucm_mmap recursion in 1.13).
    m.enable_events = 0;
    m.enable_malloc_hooks = 0;
    ucm_set_global_opts(&m);
    // UCX's default list is ILL,SEGV,BUS,FPE; a different list is the user's choice (UCX_ERROR_SIGNALS).
    const int defaults[] = {SIGILL, SIGSEGV, SIGBUS, SIGFPE};
    const auto& sig = ucs_global_opts.error_signals;
    bool isDefault = sig.count == 4;
    for (unsigned i = 0; isDefault && i < sig.count; ++i) isDefault = sig.signals[i] == defaults[i];
    if (!isDefault) return;
    for (int s : defaults) ucs_debug_disable_signal(s);
  });
}

/// The value UCX parsed for `name` (e.g. "UCX_TLS"), from its printed configuration.
std::string parsedValue(const ucp_config_t* cfg, const char* name) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  if (f == nullptr) return {};
  ucp_config_print(cfg, f, nullptr, UCS_CONFIG_PRINT_CONFIG);
  fclose(f);
  std::string text(buf, len), key = std::string(name) + "=", out;
  free(buf);
  size_t at = text.rfind("\n" + key);
  if (at != std::string::npos) ++at;
  else if (text.rfind(key, 0) == 0) at = 0;
  if (at != std::string::npos) {
    size_t end = text.find('\n', at);
    out = text.substr(at + key.size(), end == std::string::npos ? std::string::npos : end - at - key.size());
  }
  return out;
}

std::vector<std::string> dirEntries(const std::string& path) {
  std::vector<std::string> out;
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.emplace_back(e->d_name);
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// The RDMA ports bound to network interface `ifname`, as UCX names them ("mlx5_0:1"): the IB
/// devices under the interface's PCI device; of a multi-port device, the port of the interface
/// (dev_port + 1).
std::vector<std::string> rdmaPortsOf(const std::string& ifname) {
  std::vector<std::string> out;
  for (const std::string& dev : dirEntries("/sys/class/net/" + ifname + "/device/infiniband")) {
    const std::vector<std::string> ports = dirEntries("/sys/class/infiniband/" + dev + "/ports");
    if (ports.empty()) continue;
    std::string port = ports.front();
    if (ports.size() > 1) {
      int devPort = 0;
      std::ifstream f("/sys/class/net/" + ifname + "/dev_port");
      if (f >> devPort) port = std::to_string(devPort + 1);
    }
    out.push_back(dev + ":" + port);
  }
  return out;
}

Status ucxError(int rank, const char* what, ucs_status_t st) {
  return systemError("rank {}: UCX {} failed: {} (check STRATA_UCX_TLS / UCX_TLS and UCX_NET_DEVICES)", rank,
                     what, ucs_status_string(st));
}

}  // namespace

std::vector<RailSpec> planRails(int rank) {
  std::vector<RailSpec> rails;
  ucp_config_t* cfg = nullptr;
  if (ucp_config_read("STRATA", nullptr, &cfg) != UCS_OK) return rails;  // create() reports it
  const std::string userDevices = parsedValue(cfg, "UCX_NET_DEVICES");
  ucp_config_release(cfg);
  if (!userDevices.empty() && userDevices != "all") {
    // The user's list: one rail per device named, in the order given.
    size_t pos = 0;
    while (pos <= userDevices.size()) {
      size_t comma = userDevices.find(',', pos);
      if (comma == std::string::npos) comma = userDevices.size();
      std::string item = userDevices.substr(pos, comma - pos);
      if (item == "all" || item.find('^') != std::string::npos) return {};  // not a plain list
      if (!item.empty()) rails.push_back(RailSpec{item, 0, 0});
      pos = comma + 1;
    }
    // A device that is a rail interface brings its subnet, for pairing with the peer's rails.
    for (const net::Interface& f : net::usableInterfaces())
      for (RailSpec& r : rails)
        if (r.devices == f.name) r.net = f.addr & f.mask, r.mask = f.mask;
  } else {
    std::vector<RailSpec> eth, rdma;
    for (const net::Interface& f : net::usableInterfaces()) {
      RailSpec r{f.name, f.addr & f.mask, f.mask};
      const std::vector<std::string> ports = rdmaPortsOf(f.name);
      for (const std::string& p : ports) r.devices += "," + p;
      (ports.empty() ? eth : rdma).push_back(r);
    }
    rails = rdma.empty() ? eth : rdma;
  }
  if (rails.size() > static_cast<size_t>(kMaxRails)) {
    log::debug("ucx: rank {}: {} rails, striping over the first {}", rank, rails.size(), kMaxRails);
    rails.resize(kMaxRails);
  }
  if (rails.size() < 2) rails.clear();
  return rails;
}

Status UcxContext::create(int rank, const RailSpec& rail, std::shared_ptr<UcxContext>* out) {
  protectHostProgram();
  std::shared_ptr<UcxContext> c(new UcxContext());
  c->rank_ = rank;
  c->rail_ = rail;
  ucp_config_t* cfg = nullptr;
  ucs_status_t st = ucp_config_read("STRATA", nullptr, &cfg);
  if (st != UCS_OK) return ucxError(rank, "ucp_config_read", st);
  if (!rail.devices.empty()) {
    st = ucp_config_modify(cfg, "NET_DEVICES", rail.devices.c_str());
    if (st != UCS_OK) {
      ucp_config_release(cfg);
      return ucxError(rank, "ucp_config_modify(NET_DEVICES)", st);
    }
  }
  const std::string tls = parsedValue(cfg, "UCX_TLS");
  if (config().ucxTls.empty() && (tls.empty() || tls == "all")) {
    st = ucp_config_modify(cfg, "TLS", kNetworkTls);
    if (st != UCS_OK) {
      ucp_config_release(cfg);
      return ucxError(rank, "ucp_config_modify(TLS)", st);
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;  // one worker per context
  params.name = "strata";
  st = ucp_init(&params, cfg, &c->context_);
  ucp_config_release(cfg);
  if (st != UCS_OK) return ucxError(rank, "ucp_init", st);

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  st = ucp_worker_create(c->context_, &wp, &c->worker_);
  if (st != UCS_OK) return ucxError(rank, "ucp_worker_create", st);

  ucp_worker_attr_t attr{};
  attr.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE | UCP_WORKER_ATTR_FIELD_ADDRESS |
                    UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS;
  attr.address_flags = UCP_WORKER_ADDRESS_FLAG_NET_ONLY;
  st = ucp_worker_query(c->worker_, &attr);
  if (st != UCS_OK) return ucxError(rank, "ucp_worker_query", st);
  c->address_.assign(reinterpret_cast<const char*>(attr.address),
                     reinterpret_cast<const char*>(attr.address) + attr.address_length);
  ucp_worker_release_address(c->worker_, attr.address);
  if (attr.thread_mode != UCS_THREAD_MODE_SERIALIZED && attr.thread_mode != UCS_THREAD_MODE_MULTI)
    return systemError("rank {}: UCX worker does not support serialized thread mode", rank);

  st = ucp_worker_get_efd(c->worker_, &c->eventFd_);
  if (st != UCS_OK) return ucxError(rank, "ucp_worker_get_efd", st);
  c->readyFd_ = eventfd(1, EFD_NONBLOCK | EFD_CLOEXEC);  // counter 1, never read: always readable
  if (c->readyFd_ < 0) return systemError("rank {}: eventfd failed: {}", rank, strerror(errno));
  if (config().ucxRegCacheBytes > 0)
    c->regCache_ = std::make_unique<RegCache>(c.get(), config().ucxRegCacheBytes, 1024);
  log::debug("ucx: rank {} worker up on {}, address {} bytes", rank,
             rail.devices.empty() ? "UCX's devices" : rail.devices, c->address_.size());
  *out = std::move(c);
  return OkStatus();
}

UcxContext::~UcxContext() {
  if (worker_) ucp_worker_destroy(worker_);  // ends whatever still uses a registration
  regCache_.reset();                         // unmaps through the context
  if (context_) ucp_cleanup(context_);
  if (readyFd_ >= 0) close(readyFd_);
}

bool UcxContext::progress() {
  bool any = false;
  for (int i = 0; i < 64 && ucp_worker_progress(worker_) != 0; ++i) any = true;
  return any;
}

void UcxContext::addWaitSources(WaitSet* ws) {
  ucs_status_t st = ucp_worker_arm(worker_);
  ws->fds.push_back(pollfd{st == UCS_OK ? eventFd_ : readyFd_, POLLIN, 0});
}

Status UcxContext::map(void* addr, size_t bytes, void** handle) {
  ucp_mem_map_params_t p{};
  p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  p.address = addr;
  p.length = bytes;
  ucp_mem_h memh = nullptr;
  ucs_status_t st = ucp_mem_map(context_, &p, &memh);
  if (st != UCS_OK) return ucxError(rank_, "ucp_mem_map", st);
  *handle = memh;
  return OkStatus();
}

void UcxContext::unmap(void* handle) { ucp_mem_unmap(context_, static_cast<ucp_mem_h>(handle)); }

}  // namespace strata::ucx
