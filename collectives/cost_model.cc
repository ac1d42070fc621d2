// cost_model.cc: link costs per rank pair and schedule timing (see cost_model.h).
#include "collectives/cost_model.h"

#include <algorithm>

namespace strata {

using topology::LinkClass;

CostModel::CostModel(const topology::CommLayout& layout, const Costs& costs) : layout_(layout), costs_(costs) {
  for (int r = 0; r < layout.nranks(); ++r) rails_ = std::max(rails_, layout.rail(r) + 1);
  // Resources: per node and rail, egress and ingress; then one receive path per rank (a rank's
  // copies out of shared memory are done by its own core, one after the other).
  resources_ = layout.nnodes() * rails_ * 2 + layout.nranks();
}

double CostModel::latency(int a, int b) const {
  return costs_[static_cast<int>(layout_.link(a, b))].latencyUs * 1e-6;
}

double CostModel::secondsPerByte(int a, int b) const {
  const double gbps = costs_[static_cast<int>(layout_.link(a, b))].bandwidthGBps;
  return gbps > 0 ? 1.0 / (gbps * 1e9) : 0.0;
}

int CostModel::resources(int a, int b, int out[2]) const {
  if (!topology::isNetwork(layout_.link(a, b))) {
    out[0] = layout_.nnodes() * rails_ * 2 + b;
    return 1;
  }
  const int rail = layout_.messageRail(a, b);
  out[0] = (layout_.node(a) * rails_ + rail) * 2;
  out[1] = (layout_.node(b) * rails_ + rail) * 2 + 1;
  return 2;
}

double CostModel::localSecondsPerByte(int) const {
  const double gbps = costs_[static_cast<int>(LinkClass::SharedMemory)].bandwidthGBps;
  return gbps > 0 ? 1.0 / (gbps * 1e9) : 0.0;
}

double CostModel::predict(Algo algo, CollType coll, size_t count, size_t elemBytes, int root) const {
  if (!algoSupports(algo, coll)) return -1;
  CollArgs a;
  a.coll = coll;
  a.nranks = layout_.nranks();
  a.root = root;
  a.count = count;
  a.layout = &layout_;
  SimOptions opt;
  opt.values = false;
  opt.links = this;
  opt.elemBytes = elemBytes;
  const SimResult r = simulate(algo, a, false, opt);
  return r.ok ? r.seconds : -1;
}

}  // namespace strata
