// strata.hpp: C++ RAII over the C API (strata.h). Failures throw strata::Error carrying the status
// code and the communicator's last-error text; the C ABI underneath never throws.
//
//   auto comm = strata::Communicator::fromEnv();          // under strata-run / torchrun / mpirun
//   std::vector<float> g(n);
//   comm.allReduce(g.data(), g.data(), g.size());         // sum, in place
#pragma once

#include <cstdint>
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
  Communicator(Communicator&& o) noexcept : comm_(std::exchange(o.comm_, nullptr)) {}
  Communicator& operator=(Communicator&& o) noexcept {
    reset();
    comm_ = std::exchange(o.comm_, nullptr);
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

  strataComm_t get() const { return comm_; }
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
  /// Stops pending work (it fails with strataAborted) and frees the communicator.
  void abort() {
    if (comm_) strataCommAbort(std::exchange(comm_, nullptr));
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
    if (comm_) strataCommDestroy(std::exchange(comm_, nullptr));
  }
  strataComm_t comm_ = nullptr;
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

}  // namespace strata
