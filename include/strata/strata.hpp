// strata.hpp: C++ RAII over the C API (strata.h). Failures throw strata::Error carrying the status
// code and the communicator's last-error text; the C ABI underneath never throws.
//
//   auto comm = strata::Communicator::fromEnv();          // under strata-run / torchrun / mpirun
//   std::vector<float> g(n);
//   comm.allReduce(g.data(), g.data(), g.size());         // sum, in place
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "strata/strata.h"

namespace strata {

/// A failed strata call.
class Error : public std::runtime_error {
 public:
  Error(strataResult_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  strataResult_t code() const { return code_; }

 private:
  strataResult_t code_;
};

/// Throws Error if rc is not strataSuccess.
inline void check(strataResult_t rc, strataComm_t comm = nullptr) {
  if (rc != strataSuccess)
    throw Error(rc, std::string(strataGetErrorString(rc)) + ": " + strataGetLastError(comm));
}

/// The strata dtype of a C++ element type (integers, float, double; use the C API for fp16/bf16/fp8).
template <typename T>
constexpr strataDataType_t dtypeOf() {
  if constexpr (std::is_same_v<T, int8_t>) return strataInt8;
  else if constexpr (std::is_same_v<T, uint8_t>) return strataUint8;
  else if constexpr (std::is_same_v<T, int32_t>) return strataInt32;
  else if constexpr (std::is_same_v<T, uint32_t>) return strataUint32;
  else if constexpr (std::is_same_v<T, int64_t>) return strataInt64;
  else if constexpr (std::is_same_v<T, uint64_t>) return strataUint64;
  else if constexpr (std::is_same_v<T, float>) return strataFloat32;
  else if constexpr (std::is_same_v<T, double>) return strataFloat64;
  else static_assert(sizeof(T) == 0, "no strata dtype for this type");
}

/// An owning communicator handle (move-only). Destruction frees it (not collective).
class Communicator {
 public:
  Communicator() = default;
  explicit Communicator(strataComm_t c) : comm_(c) {}
  Communicator(int nranks, const strataUniqueId& id, int rank) { check(strataCommInitRank(&comm_, nranks, id, rank)); }
  Communicator(Communicator&& o) noexcept : comm_(std::exchange(o.comm_, nullptr)), owned_(o.owned_) {}
  Communicator& operator=(Communicator&& o) noexcept {
    reset();
    comm_ = std::exchange(o.comm_, nullptr);
    owned_ = o.owned_;
    return *this;
  }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  ~Communicator() { reset(); }

  /// Joins using the launch environment (strata-run, torchrun, mpirun, srun).
  static Communicator fromEnv() {
    strataComm_t c = nullptr;
    check(strataCommInitFromEnv(&c, nullptr));
    return Communicator(c);
  }
  /// n ranks as threads of this process; drive each from its own thread.
  static std::vector<Communicator> threads(int n) {
    std::vector<strataComm_t> raw(static_cast<size_t>(n));
    check(strataCommInitAll(raw.data(), n));
    std::vector<Communicator> out;
    for (strataComm_t c : raw) out.emplace_back(c);
    return out;
  }
  static strataUniqueId newUniqueId() {
    strataUniqueId id;
    check(strataGetUniqueId(&id));
    return id;
  }

  /// A handle that uses `c` without owning it: destroying (or aborting) the handle leaves the
  /// communicator alone. For communicators owned elsewhere, e.g. by ParallelGroups.
  static Communicator borrow(strataComm_t c) {
    Communicator x(c);
    x.owned_ = false;
    return x;
  }

  strataComm_t get() const { return comm_; }
  /// False for a borrowed handle (see borrow()).
  bool owned() const { return owned_; }
  int rank() const {
    int r = -1;
    check(strataCommUserRank(comm_, &r), comm_);
    return r;
  }
  int size() const {
    int n = 0;
    check(strataCommCount(comm_, &n), comm_);
    return n;
  }
  /// Collective: ranks with the same colour form a new communicator ordered by key. Returns an
  /// empty Communicator for STRATA_SPLIT_NOCOLOR.
  Communicator split(int color, int key) const {
    strataComm_t c = nullptr;
    check(strataCommSplit(comm_, color, key, &c, nullptr), comm_);
    return Communicator(c);
  }
  /// Collective over the survivors: the communicator of this one's ranks not in `exclude`
  /// (strataCommShrink; flags e.g. STRATA_SHRINK_ABORT | STRATA_SHRINK_DETECT). This one stays
  /// as it was and is still destroyed with its handle.
  Communicator shrink(const std::vector<int>& exclude, int flags) const {
    strataComm_t c = nullptr;
    check(strataCommShrink(comm_, exclude.data(), static_cast<int>(exclude.size()), &c, nullptr, flags), comm_);
    return Communicator(c);
  }
  /// Stops this rank's calls in the communicator and tells its peers (strataCommRevoke).
  void revoke() { check(strataCommRevoke(comm_, STRATA_REVOKE_DEFAULT), comm_); }
  /// Stops pending work (it fails with strataAborted) and frees the communicator. A borrowed
  /// handle only lets go of it (abort through the owner).
  void abort() {
    if (comm_ && owned_) strataCommAbort(comm_);
    comm_ = nullptr;
  }

  template <typename T>
  void allReduce(const T* send, T* recv, size_t count, strataRedOp_t op = strataSum) {
    check(strataAllReduce(send, recv, count, dtypeOf<T>(), op, comm_), comm_);
  }
  template <typename T>
  void reduceScatter(const T* send, T* recv, size_t recvCount, strataRedOp_t op = strataSum) {
    check(strataReduceScatter(send, recv, recvCount, dtypeOf<T>(), op, comm_), comm_);
  }
  template <typename T>
  void allGather(const T* send, T* recv, size_t sendCount) {
    check(strataAllGather(send, recv, sendCount, dtypeOf<T>(), comm_), comm_);
  }
  template <typename T>
  void broadcast(const T* send, T* recv, size_t count, int root) {
    check(strataBroadcast(send, recv, count, dtypeOf<T>(), root, comm_), comm_);
  }
  template <typename T>
  void reduce(const T* send, T* recv, size_t count, int root, strataRedOp_t op = strataSum) {
    check(strataReduce(send, recv, count, dtypeOf<T>(), op, root, comm_), comm_);
  }
  template <typename T>
  void allToAll(const T* send, T* recv, size_t countPerPeer) {
    check(strataAllToAll(send, recv, countPerPeer, dtypeOf<T>(), comm_), comm_);
  }
  template <typename T>
  void send(const T* buf, size_t count, int peer) {
    check(strataSend(buf, count, dtypeOf<T>(), peer, comm_), comm_);
  }
  template <typename T>
  void recv(T* buf, size_t count, int peer) {
    check(strataRecv(buf, count, dtypeOf<T>(), peer, comm_), comm_);
  }
  void barrier() { check(strataBarrier(comm_), comm_); }

 private:
  void reset() {
    if (comm_ && owned_) strataCommDestroy(comm_);
    comm_ = nullptr;
  }
  strataComm_t comm_ = nullptr;
  bool owned_ = true;
};

/// Scoped group: operations issued while it lives run together at end() (or destruction, where
/// an error cannot be thrown and is left in strataGetLastError).
class Group {
 public:
  Group() { check(strataGroupStart()); }
  ~Group() {
    if (open_) strataGroupEnd();
  }
  void end() {
    open_ = false;
    check(strataGroupEnd());
  }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

 private:
  bool open_ = true;
};

/// Sizes of the training mesh (strataParallelSizes_t with an owned order string).
struct ParallelSizes {
  int tp = 1, cp = 1, ep = 1, dp = 1, pp = 1;
  std::string order;  ///< fastest first, e.g. "tp-cp-ep-dp-pp"; empty: that default
  /// The C struct; it points into `order`, so it lives as long as this object is unchanged.
  strataParallelSizes_t c() const { return {tp, cp, ep, dp, pp, order.empty() ? nullptr : order.c_str()}; }
};

/// Every group communicator of a (tp, cp, ep, dp, pp) mesh for this rank (strataParallelGroups*;
/// the kinds and their dimensions are described in strata.h). Move-only; destruction frees the
/// groups (not collective).
///
///   strata::ParallelGroups g(world, {.tp = 2, .dp = 2, .pp = 2});   // collective over world
///   g.comm(strataGroupTp).allReduce(x, x, n);
///   if (world.rank() == 0) std::fputs(g.report().c_str(), stdout);
class ParallelGroups {
 public:
  ParallelGroups() = default;
  /// Collective over `world`: one split per group kind. Throws Error (strataInvalidArgument with
  /// the reason: bad sizes or order, or STRATA_STRICT_PLACEMENT=1 and tp across nodes).
  ParallelGroups(const Communicator& world, const ParallelSizes& sizes) : world_(world.get()) {
    const strataParallelSizes_t s = sizes.c();
    check(strataParallelGroupsCreate(world_, &s, &g_), world_);
    views_.reset(new std::array<Communicator, strataNumGroups>);
    for (int k = 0; k < strataNumGroups; ++k) {
      strataComm_t c = nullptr;
      const strataResult_t rc = strataParallelGroupsComm(g_, static_cast<strataGroupKind_t>(k), &c);
      if (rc != strataSuccess) {
        strataParallelGroupsDestroy(std::exchange(g_, nullptr));
        check(rc, world_);
      }
      (*views_)[static_cast<size_t>(k)] = Communicator::borrow(c);
    }
  }
  ParallelGroups(ParallelGroups&& o) noexcept
      : g_(std::exchange(o.g_, nullptr)), world_(o.world_), views_(std::move(o.views_)) {}
  ParallelGroups& operator=(ParallelGroups&& o) noexcept {
    reset();
    g_ = std::exchange(o.g_, nullptr);
    world_ = o.world_;
    views_ = std::move(o.views_);
    return *this;
  }
  ParallelGroups(const ParallelGroups&) = delete;
  ParallelGroups& operator=(const ParallelGroups&) = delete;
  ~ParallelGroups() { reset(); }

  strataParallelGroups_t get() const { return g_; }
  /// This rank's communicator of `kind`, borrowed: valid while this object lives (also after it
  /// is moved: the reference stays good until the groups are destroyed).
  Communicator& comm(strataGroupKind_t kind) const {
    if (!g_ || kind < 0 || kind >= strataNumGroups)
      throw Error(strataInvalidArgument, g_ ? "ParallelGroups::comm: invalid group kind " + std::to_string(int(kind))
                                            : std::string("ParallelGroups::comm: no groups"));
    return (*views_)[static_cast<size_t>(kind)];
  }
  /// This rank's coordinates, indexed by strataGroupTp .. strataGroupPp (tp, cp, ep, dp, pp).
  std::array<int, STRATA_PARALLEL_DIMS> coords() const {
    std::array<int, STRATA_PARALLEL_DIMS> c{};
    check(strataParallelGroupsCoord(g_, c.data()), world_);
    return c;
  }
  /// The placement report (the same text on every rank; see strataParallelGroupsReport).
  std::string report() const {
    size_t need = 0;
    check(strataParallelGroupsReport(g_, nullptr, 0, &need), world_);
    std::string s(need, '\0');
    check(strataParallelGroupsReport(g_, s.data(), s.size(), nullptr), world_);
    s.resize(need - 1);
    return s;
  }
  /// An order that keeps tp (then cp) inside nodes of world's layout (strataProposeRankOrder);
  /// empty when none exists. `note` (optional) receives what it achieves or why nothing does.
  /// Throws Error for bad sizes.
  static std::string proposeOrder(const Communicator& world, const ParallelSizes& sizes, std::string* note = nullptr) {
    const strataParallelSizes_t s = sizes.c();
    char order[STRATA_RANK_ORDER_BYTES] = {};
    char why[512] = {};
    const strataResult_t rc = strataProposeRankOrder(world.get(), &s, order, sizeof(order), why, sizeof(why));
    if (note) *note = why;
    if (rc == strataInvalidArgument && why[0] != '\0') return std::string();  // no order keeps tp inside
    check(rc, world.get());
    return order;
  }

 private:
  void reset() {
    if (g_) strataParallelGroupsDestroy(std::exchange(g_, nullptr));
    views_.reset();
  }
  strataParallelGroups_t g_ = nullptr;
  strataComm_t world_ = nullptr;  ///< where error texts are
  std::unique_ptr<std::array<Communicator, strataNumGroups>> views_;
};

}  // namespace strata
