// c_api_groups.cc: the parallel-groups part of the C API (strata.h: strataParallelGroups*,
// strataProposeRankOrder). Creation validates everything before the first split, so a bad
// argument fails on every rank alike and leaves the world usable; then one strataCommSplit per
// group kind, in kind order. The mesh arithmetic and the placement report are parallel_groups.h.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>

#include "collectives/comm.h"
#include "collectives/parallel_groups.h"
#include "strata/strata.h"
#include "transport/config.h"
#include "transport/log.h"

#define STRATA_API extern "C" __attribute__((visibility("default")))

struct strataParallelGroups {
  uint32_t magic = 0;
};

namespace strata {
namespace {

struct Groups : strataParallelGroups {
  static constexpr uint32_t kMagic = 0x50475250;  // "PGRP"
  Comm* world = nullptr;  ///< errors are reported here while it lives
  ParallelSpec spec;
  std::array<int, kParallelDims> coords{};
  std::array<strataComm_t, kGroupKinds> comms{};
  topology::CommLayout layout;  ///< the world's, for the report
  std::once_flag reportOnce;
  std::string report;
};

// Live handles, so that a destroyed or foreign handle is an error instead of a crash.
std::mutex gLiveMu;
std::unordered_set<const void*>& liveSet() {
  static auto* s = new std::unordered_set<const void*>;  // never destroyed: usable at exit
  return *s;
}

Groups* liveGroups(strataParallelGroups_t handle) {
  if (!handle) return nullptr;
  std::lock_guard<std::mutex> lock(gLiveMu);
  if (!liveSet().count(handle)) return nullptr;
  return static_cast<Groups*>(handle);
}

/// Records a failure on `world` (when it still lives) and returns its code.
strataResult_t fail(Comm* world, const Status& st) {
  if (world && isLiveComm(world)) world->setLastError(st.message());
  return st.code();
}

/// The C API's own check of a communicator handle: a NULL, destroyed or failed `world` gets
/// exactly strataCommSplit's error (code and thread last-error text). Nothing is split: the
/// check fails before any collective work. Returns nullptr in that case.
Comm* checkWorld(strataComm_t world, strataResult_t* rc) {
  if (world && isLiveComm(world) && !static_cast<Comm*>(world)->failed()) return static_cast<Comm*>(world);
  strataComm_t none = nullptr;
  *rc = strataCommSplit(world, 0, 0, &none, nullptr);
  if (*rc == strataSuccess) *rc = strataInvalidArgument;  // not reached: the handle check fails
  return nullptr;
}

void destroyGroups(Groups* g) {
  for (strataComm_t& c : g->comms)
    if (c) strataCommDestroy(c), c = nullptr;
  g->magic = 0;
  delete g;
}

}  // namespace
}  // namespace strata

using namespace strata;

STRATA_API void strataParallelSizesInit(strataParallelSizes_t* sizes) {
  if (!sizes) return;
  sizes->tp = sizes->cp = sizes->ep = sizes->dp = sizes->pp = 1;
  sizes->order = nullptr;
}

STRATA_API const char* strataGroupKindName(strataGroupKind_t kind) { return groupKindName(static_cast<int>(kind)); }

STRATA_API strataResult_t strataParallelGroupsCreate(strataComm_t world, const strataParallelSizes_t* sizes,
                                                     strataParallelGroups_t* groups) {
  strataResult_t rc = strataSuccess;
  if (groups) *groups = nullptr;
  Comm* c = checkWorld(world, &rc);
  if (!c) return rc;
  if (!groups) return fail(c, invalidArgument("ParallelGroupsCreate: groups is NULL"));
  if (!sizes) return fail(c, invalidArgument("ParallelGroupsCreate: sizes is NULL"));
  ParallelSpec spec;
  Status st = makeParallelSpec(*sizes, c->nranks(), &spec);
  if (!st.ok()) return fail(c, invalidArgument("ParallelGroupsCreate: {}", st.message()));
  // Placement: decided from the layout alone, so every rank warns or fails alike.
  const std::string problem = placementProblem(c->layout(), spec);
  if (!problem.empty()) {
    if (config().strictPlacement)
      return fail(c, invalidArgument("ParallelGroupsCreate: {} (STRATA_STRICT_PLACEMENT=1)", problem));
    if (c->rank() == 0)
      log::warn("parallel groups {}: {} (STRATA_STRICT_PLACEMENT=1 makes this an error)", spec.describe(), problem);
  }
  auto* g = new Groups();
  g->magic = Groups::kMagic;
  g->world = c;
  g->spec = spec;
  g->coords = spec.coords(c->rank());
  g->layout = c->layout();
  for (int k = 0; k < kGroupKinds; ++k) {
    const std::string name = (c->name().empty() ? "" : c->name() + ".") + groupKindName(k);
    strataConfig_t cfg;
    strataConfigInit(&cfg);
    cfg.commName = name.c_str();
    rc = strataCommSplit(world, groupColor(spec, k, c->rank()), c->rank(), &g->comms[static_cast<size_t>(k)], &cfg);
    if (rc != strataSuccess) {
      // The split left its message on the world; keep it, and free what was made.
      const std::string why = c->lastError();
      destroyGroups(g);
      return fail(c, Status(rc, fmt::format("ParallelGroupsCreate: splitting the {} groups failed: {}", groupKindName(k), why)));
    }
  }
  {
    std::lock_guard<std::mutex> lock(gLiveMu);
    liveSet().insert(static_cast<strataParallelGroups*>(g));
  }
  *groups = g;
  return strataSuccess;
}

STRATA_API strataResult_t strataParallelGroupsComm(strataParallelGroups_t groups, strataGroupKind_t kind,
                                                   strataComm_t* comm) {
  Groups* g = liveGroups(groups);
  if (!g) return strataInvalidArgument;
  if (!comm) return fail(g->world, invalidArgument("ParallelGroupsComm: comm is NULL"));
  if (kind < 0 || kind >= strataNumGroups)
    return fail(g->world, invalidArgument("ParallelGroupsComm: invalid group kind {} (0 .. {})", static_cast<int>(kind),
                                          kGroupKinds - 1));
  *comm = g->comms[static_cast<size_t>(kind)];
  return strataSuccess;
}

STRATA_API strataResult_t strataParallelGroupsCoord(strataParallelGroups_t groups, int coords[STRATA_PARALLEL_DIMS]) {
  Groups* g = liveGroups(groups);
  if (!g) return strataInvalidArgument;
  if (!coords) return fail(g->world, invalidArgument("ParallelGroupsCoord: coords is NULL"));
  for (int d = 0; d < kParallelDims; ++d) coords[d] = g->coords[static_cast<size_t>(d)];
  return strataSuccess;
}

STRATA_API strataResult_t strataParallelGroupsReport(strataParallelGroups_t groups, char* buf, size_t len,
                                                     size_t* needed) {
  Groups* g = liveGroups(groups);
  if (!g) return strataInvalidArgument;
  std::call_once(g->reportOnce, [g] { g->report = placementReport(g->layout, g->spec); });
  const size_t need = g->report.size() + 1;
  if (needed) *needed = need;
  if (!buf) {
    if (len == 0 && needed) return strataSuccess;
    return fail(g->world, invalidArgument("ParallelGroupsReport: buf is NULL with len {}", len));
  }
  if (len == 0) return fail(g->world, invalidArgument("ParallelGroupsReport: len is 0 (the report needs {} bytes)", need));
  const size_t n = std::min(len - 1, g->report.size());
  std::memcpy(buf, g->report.data(), n);
  buf[n] = '\0';
  if (n < g->report.size())
    return fail(g->world, invalidArgument("ParallelGroupsReport: a buffer of {} bytes is too small: the report needs {}",
                                          len, need));
  return strataSuccess;
}

STRATA_API strataResult_t strataParallelGroupsDestroy(strataParallelGroups_t groups) {
  {
    std::lock_guard<std::mutex> lock(gLiveMu);
    if (!groups || !liveSet().erase(groups)) return strataInvalidArgument;
  }
  destroyGroups(static_cast<Groups*>(groups));
  return strataSuccess;
}

STRATA_API strataResult_t strataProposeRankOrder(strataComm_t world, const strataParallelSizes_t* sizes, char* order,
                                                 size_t orderLen, char* note, size_t noteLen) {
  strataResult_t rc = strataSuccess;
  Comm* c = checkWorld(world, &rc);
  if (!c) return rc;
  if (!sizes) return fail(c, invalidArgument("ProposeRankOrder: sizes is NULL"));
  if (!order || orderLen < STRATA_RANK_ORDER_BYTES)
    return fail(c, invalidArgument("ProposeRankOrder: order must hold STRATA_RANK_ORDER_BYTES ({}) bytes",
                                   STRATA_RANK_ORDER_BYTES));
  if (!note && noteLen > 0) return fail(c, invalidArgument("ProposeRankOrder: note is NULL with noteLen {}", noteLen));
  ParallelSpec spec;
  Status st = makeParallelSpec(*sizes, c->nranks(), &spec);
  if (!st.ok()) return fail(c, invalidArgument("ProposeRankOrder: {}", st.message()));
  const OrderProposal p = proposeRankOrder(c->layout(), spec);
  std::snprintf(order, orderLen, "%s", p.order.c_str());
  if (note && noteLen > 0) std::snprintf(note, noteLen, "%s", p.note.c_str());
  if (!p.found) return fail(c, invalidArgument("ProposeRankOrder: {}", p.note));
  return strataSuccess;
}
