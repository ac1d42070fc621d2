// arg_check.cc: compares collective signatures across ranks (see arg_check.h).
#include "collectives/arg_check.h"

#include <cstring>

#include "collectives/comm.h"
#include "kernels/host_reduce.h"

namespace strata {
namespace {

struct Signature {
  uint64_t ncalls;
  uint64_t hash;      ///< over every call's fields, in order
  int32_t coll, dtype, op, root;  ///< the first call, for the message
  uint64_t count;
};

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

std::string describe(const Signature& s) {
  if (s.ncalls == 0) return "no collective";
  return fmt::format("{}(count {}, {}, op {}, root {}){}", collName(static_cast<CollType>(s.coll)), s.count,
                     kernels::dtypeName(static_cast<strataDataType_t>(s.dtype)), s.op, s.root,
                     s.ncalls > 1 ? fmt::format(" and {} more", s.ncalls - 1) : "");
}

}  // namespace

Status checkSameCollectives(Comm& comm, const std::vector<const CollCall*>& calls) {
  Signature mine;
  std::memset(&mine, 0, sizeof(mine));
  mine.ncalls = calls.size();
  for (const CollCall* c : calls) {
    const bool rooted = c->coll == CollType::Broadcast || c->coll == CollType::Reduce ||
                        c->coll == CollType::Gather || c->coll == CollType::Scatter;
    const int op = c->op >= strataNumOps ? strataNumOps : c->op;  // custom ops differ in id only
    mine.hash = mix(mine.hash, static_cast<uint64_t>(c->coll));
    mine.hash = mix(mine.hash, c->count);
    mine.hash = mix(mine.hash, static_cast<uint64_t>(c->dtype));
    mine.hash = mix(mine.hash, static_cast<uint64_t>(op));
    mine.hash = mix(mine.hash, static_cast<uint64_t>(rooted ? c->root : 0));
  }
  if (!calls.empty()) {
    mine.coll = static_cast<int32_t>(calls[0]->coll);
    mine.dtype = calls[0]->dtype;
    mine.op = calls[0]->op;
    mine.root = calls[0]->root;
    mine.count = calls[0]->count;
  }
  std::vector<Signature> all(static_cast<size_t>(comm.nranks()));
  STRATA_RETURN_IF_ERROR(comm.bootstrap().allGather(&mine, all.data(), sizeof(Signature)));
  for (int r = 1; r < comm.nranks(); ++r)
    if (all[r].hash != all[0].hash || all[r].ncalls != all[0].ncalls)
      return invalidUsage("STRATA_CHECK_ARGS: rank {} called {} but rank 0 called {}", r, describe(all[r]),
                          describe(all[0]));
  return OkStatus();
}

}  // namespace strata
