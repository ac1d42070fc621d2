// ib_device.h: the ports a transport uses (its rails), each with its device context, protection
// domain and registration cache, shared by the transport's connections. Opened once per transport.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>
#include <vector>

#include "transport/ib/ib_transport.h"
#include "transport/ib/ib_verbs.h"
#include "transport/ib/reg_cache.h"

namespace strata::ib {

struct Rail {
  std::string name;  ///< "mlx5_0:1"
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  uint8_t port = 1;
  bool ethernet = false;
  uint16_t lid = 0;
  int gidIndex = 0;
  ibv_gid gid{};
  ibv_mtu mtu = IBV_MTU_1024;
  int maxRdAtomic = 16;
  std::unique_ptr<RegCache> cache;
};

class Devices {
 public:
  ~Devices();
  /// Opens the usable ports; fails with a one-line reason when there is none.
  static Status open(const Verbs* v, const Options& opt, std::shared_ptr<Devices>* out);
  const Verbs* verbs() const { return v_; }
  const Options& options() const { return opt_; }
  std::vector<Rail>& rails() { return rails_; }

 private:
  const Verbs* v_ = nullptr;
  Options opt_;
  std::vector<Rail> rails_;
  std::vector<ibv_context*> contexts_;
};

/// True if device `dev`, port `port` is selected by an STRATA_IB_HCA list ("" selects all).
bool hcaMatches(const std::string& spec, const std::string& dev, int port);

}  // namespace strata::ib
