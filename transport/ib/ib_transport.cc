// ib_transport.cc: opening the rails (device ports, GID choice), the NetTransport and its factory.
#include "transport/ib/ib_transport.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "transport/config.h"
#include "transport/ib/ib_connection.h"
#include "transport/ib/ib_device.h"
#include "transport/ib/ib_verbs.h"
#include "transport/log.h"

namespace strata {
namespace ib {
namespace {

class IbTransport final : public NetTransport {
 public:
  IbTransport(std::shared_ptr<Devices> dev, int rank) : dev_(std::move(dev)), rank_(rank) {}
  const char* name() const override { return "ib"; }
  Status connect(int me, int peer, int oobFd, int rails, std::unique_ptr<Connection>* out) override {
    *out = std::make_unique<IbConnection>(dev_, me, peer, oobFd, rails);
    return OkStatus();
  }

 private:
  std::shared_ptr<Devices> dev_;
  int rank_;
};

// The reason the transport is off, logged once per process (every communicator asks).
Status unavailable(Status st, bool loud) {
  static std::atomic<bool> logged{false};
  if (!logged.exchange(true)) {
    if (loud) log::warn("{}; the ib transport stays off", st.message());
    else log::info("{}; the ib transport stays off", st.message());
  }
  return st;
}

std::string gidString(const uint8_t* g) {
  std::string s;
  for (int i = 0; i < 16; i += 2) s += fmt::format("{}{:02x}{:02x}", i ? ":" : "", g[i], g[i + 1]);
  return s;
}

}  // namespace

Counters& counters() {
  static Counters c;
  return c;
}

bool hcaMatches(const std::string& specIn, const std::string& dev, int port) {
  if (specIn.empty()) return true;
  std::string spec = specIn;
  bool exclude = false, exact = false;
  if (!spec.empty() && spec[0] == '^') exclude = true, spec.erase(0, 1);
  if (!spec.empty() && spec[0] == '=') exact = true, spec.erase(0, 1);
  bool hit = false;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    int wantPort = -1;
    if (size_t colon = item.find(':'); colon != std::string::npos) {
      wantPort = atoi(item.c_str() + colon + 1);
      item.resize(colon);
    }
    const bool nameOk = exact ? dev == item : dev.compare(0, item.size(), item) == 0;
    if (nameOk && (wantPort < 0 || wantPort == port)) hit = true;
  }
  return exclude ? !hit : hit;
}

Devices::~Devices() {
  for (Rail& r : rails_) {
    r.cache.reset();
    if (r.pd) v_->deallocPd(r.pd);
  }
  for (ibv_context* c : contexts_) v_->closeDevice(c);
}

Status Devices::open(const Verbs* v, const Options& opt, std::shared_ptr<Devices>* out) {
  auto d = std::make_shared<Devices>();
  d->v_ = v;
  d->opt_ = opt;
  int n = 0;
  ibv_device** list = v->getDeviceList(&n);
  if (!list || n == 0) {
    if (list) v->freeDeviceList(list);
    return unavailable(systemError("ibverbs: no RDMA device (libibverbs loaded, 0 devices)"), !opt.hca.empty());
  }
  std::string seen;
  for (int i = 0; i < n && d->rails_.size() < static_cast<size_t>(kMaxRails); ++i) {
    const std::string dname = v->getDeviceName(list[i]);
    seen += (seen.empty() ? "" : ", ") + dname;
    ibv_context* ctx = v->openDevice(list[i]);
    if (!ctx) {
      log::debug("ibverbs: cannot open {}: {}", dname, strerror(errno));
      continue;
    }
    ibv_device_attr da{};
    if (v->queryDevice(ctx, &da) != 0) {
      v->closeDevice(ctx);
      continue;
    }
    bool used = false;
    for (int port = 1; port <= da.phys_port_cnt && d->rails_.size() < static_cast<size_t>(kMaxRails); ++port) {
      if (!hcaMatches(opt.hca, dname, port)) continue;
      ibv_port_attr pa{};
      if (v->queryPort(ctx, static_cast<uint8_t>(port), &pa) != 0 || pa.state != IBV_PORT_ACTIVE) continue;
      Rail r;
      r.name = fmt::format("{}:{}", dname, port);
      r.ctx = ctx;
      r.port = static_cast<uint8_t>(port);
      r.ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
      r.lid = pa.lid;
      r.mtu = pa.active_mtu;
      r.maxRdAtomic = std::clamp(std::min(da.max_qp_rd_atom, da.max_qp_init_rd_atom), 1, 16);
      std::vector<GidEntry> table;
      for (int g = 0; g < std::min(pa.gid_tbl_len, 256); ++g) {
        ibv_gid gid{};
        if (v->queryGid(ctx, static_cast<uint8_t>(port), g, &gid) != 0) continue;
        GidEntry e{g, {}, -1};
        memcpy(e.raw, gid.raw, 16);
        uint32_t type = 0;
        if (v->queryGidType(ctx, static_cast<uint8_t>(port), g, &type) == 0) e.type = static_cast<int>(type);
        table.push_back(e);
      }
      r.gidIndex = chooseGid(table, r.ethernet, opt.gidIndex);
      if (r.gidIndex < 0) {
        log::warn("ibverbs: {}: no usable GID{}; port skipped", r.name,
                  opt.gidIndex >= 0 ? fmt::format(" at STRATA_IB_GID_INDEX={}", opt.gidIndex) : std::string());
        continue;
      }
      for (const GidEntry& e : table)
        if (e.index == r.gidIndex) memcpy(r.gid.raw, e.raw, 16);
      if (!r.ethernet && r.lid == 0) continue;
      r.pd = v->allocPd(ctx);
      if (!r.pd) {
        log::warn("ibverbs: {}: ibv_alloc_pd failed; port skipped", r.name);
        continue;
      }
      ibv_pd* pd = r.pd;
      r.cache = std::make_unique<RegCache>(
          opt.regCacheEntries,
          [v, pd, name = r.name](void* addr, size_t len, void** mr, uint32_t* lkey, uint32_t* rkey) {
            counters().registrations.fetch_add(1, std::memory_order_relaxed);
            ibv_mr* m = v->regMr(pd, addr, len,
                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
            if (!m) return systemError("ibverbs: ibv_reg_mr of {} bytes at {} failed on {}: {}", len, addr, name,
                                       strerror(errno));
            *mr = m;
            *lkey = m->lkey;
            *rkey = m->rkey;
            return OkStatus();
          },
          [v](void* mr) { v->deregMr(static_cast<ibv_mr*>(mr)); });
      log::debug("ibverbs: rail {}: {} link, lid {}, gid[{}] {}", r.name, r.ethernet ? "Ethernet (RoCE)" : "InfiniBand",
                 r.lid, r.gidIndex, gidString(r.gid.raw));
      d->rails_.push_back(std::move(r));
      used = true;
    }
    if (used) d->contexts_.push_back(ctx);
    else v->closeDevice(ctx);
  }
  v->freeDeviceList(list);
  if (d->rails_.empty()) {
    if (!opt.hca.empty())
      return unavailable(systemError("ibverbs: no active port on the RDMA devices selected by STRATA_IB_HCA='{}' "
                                     "(devices: {})", opt.hca, seen), true);
    return unavailable(systemError("ibverbs: no active port on {} RDMA device(s) ({})", n, seen), false);
  }
  *out = std::move(d);
  return OkStatus();
}

Options optionsFromConfig() {
  const Config& c = config();
  Options o;
  o.hca = c.ibHca;
  o.gidIndex = c.ibGidIndex;
  o.qpsPerRail = c.ibQpsPerConn;
  o.slots = static_cast<uint32_t>(c.ibSlots);
  o.slotBytes = c.ibSlotBytes;
  o.singleCopyMinBytes = c.ibSingleCopyMinBytes;
  o.regCacheEntries = c.ibRegCacheEntries;
  o.timeout = c.ibTimeout;
  o.retryCnt = c.ibRetryCnt;
  return o;
}

Status createTransport(const Verbs* verbs, const Options& opt, int rank, std::unique_ptr<NetTransport>* out) {
  std::shared_ptr<Devices> dev;
  STRATA_RETURN_IF_ERROR(Devices::open(verbs, opt, &dev));
  *out = std::make_unique<IbTransport>(std::move(dev), rank);
  return OkStatus();
}

}  // namespace ib

Status createIbTransport(int rank, std::unique_ptr<NetTransport>* out) {
  const ib::Options opt = ib::optionsFromConfig();
  const ib::Verbs* v = nullptr;
  if (Status st = ib::loadVerbs(&v); !st.ok()) return ib::unavailable(st, !opt.hca.empty());
  return ib::createTransport(v, opt, rank, out);
}

}  // namespace strata
