// device_checks.cc: device-buffer collectives (stream forms) on verifiable inputs, checked exactly.
#include "gpu/device_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/host_reduce.h"
#include "support/coll_checks.h"
#include "support/typed_values.h"

namespace strata::testing {
namespace {

constexpr size_t kCanary = 64;
constexpr unsigned char kFill = 0xA5;  // canaries and never-written output bytes

double roundTrip(strataDataType_t t, double v) {
  unsigned char tmp[8];
  storeValue(t, tmp, 0, v);
  return loadValue(t, tmp, 0);
}

const char* opLabel(int op) {
  static const char* const names[] = {"sum", "prod", "max", "min", "avg"};
  return op == kPreMulSum ? "premulsum(2)" : (op >= 0 && op < 5 ? names[op] : "?");
}

std::string cudaWhat(cudaError_t e) { return fmt::format("{} ({})", cudaGetErrorName(e), cudaGetErrorString(e)); }

// Counts and reports mismatching elements (first one named); true when all match.
struct ElementCheck {
  strataDataType_t t;
  bool tolerant;  // avg of floating types: within rounding
  size_t bad = 0, first = 0;
  double firstGot = 0, firstWant = 0;
  void at(const void* base, size_t i, double want) {
    double got = loadValue(t, base, i);
    double exact = roundTrip(t, want);
    bool ok = tolerant ? std::fabs(got - want) <= typeEpsilon(t) * std::fabs(want) * 2 + 1e-12 : got == exact;
    if (!ok && bad++ == 0) first = i, firstGot = got, firstWant = tolerant ? want : exact;
  }
  bool report(CheckReport* rep, const std::string& label, size_t total) const {
    if (bad) rep->fail(fmt::format("{}: {} of {} elements wrong, first: element {} is {} but should be {}", label, bad,
                                   total, first, firstGot, firstWant));
    return bad == 0;
  }
};

bool canaryIntact(const std::vector<unsigned char>& img) {
  return img.size() < kCanary || std::all_of(img.end() - kCanary, img.end(), [](unsigned char c) { return c == kFill; });
}

// Uploads (H2D) or downloads (D2H) an image on `stream`; returns an error text or "".
std::string copyImage(std::vector<unsigned char>& img, unsigned char* dev, bool up, cudaStream_t stream) {
  if (img.empty() || !dev) return "";
  cudaError_t e = up ? cudaMemcpyAsync(dev, img.data(), img.size(), cudaMemcpyHostToDevice, stream)
                     : cudaMemcpyAsync(img.data(), dev, img.size(), cudaMemcpyDeviceToHost, stream);
  return e == cudaSuccess ? "" : std::string(up ? "upload" : "download") + " failed: " + cudaWhat(e);
}

}  // namespace

std::string noCudaDeviceReason() {
  static const std::string reason = [] {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) return fmt::format("cudaGetDeviceCount failed: {}", cudaWhat(e));
    if (n <= 0) return std::string("cudaGetDeviceCount reports 0 devices");
    return std::string();
  }();
  return reason;
}

size_t sweepArenaBytes(int n) {
  const size_t big = static_cast<size_t>(n) * kBigCount * 4 + kCanary + 256;  // largest fp32 bulk buffer
  const size_t mid = static_cast<size_t>(n) * kMidCount * 8 + kCanary + 256;  // largest 8-byte buffer
  return 2 * std::max(big, mid) + (size_t{16} << 20);
}

bool openDeviceRank(DeviceRank* d, strataComm_t comm, size_t arenaBytes, std::string* why) {
  d->comm = comm;
  strataCommUserRank(comm, &d->rank);
  strataCommCount(comm, &d->n);
  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  if (e == cudaSuccess && devices > 0) d->device = d->rank % devices, e = cudaSetDevice(d->device);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaMalloc(reinterpret_cast<void**>(&d->arena), arenaBytes);
  if (e == cudaSuccess) e = cudaMemset(d->arena, kFill, arenaBytes);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    *why = fmt::format("rank {}: device setup failed: {}", d->rank, cudaWhat(e));
    return false;
  }
  d->arenaBytes = arenaBytes;
  return true;
}

void closeDeviceRank(DeviceRank* d) {
  if (d->stream) cudaStreamSynchronize(d->stream), cudaStreamDestroy(d->stream);
  if (d->arena) cudaFree(d->arena);
  d->stream = nullptr;
  d->arena = nullptr;
}

unsigned char* ArenaCursor::take(size_t bytes) {
  size_t start = (used + 255) / 256 * 256;
  if (start + bytes > d->arenaBytes) return nullptr;
  used = start + bytes;
  return d->arena + start;
}

DeviceCheck::DeviceCheck(DeviceRank& d, ArenaCursor& cursor, CollType coll, strataDataType_t t, int op, size_t count,
                         int root, bool inPlace)
    : d_(d), coll_(coll), t_(t), op_(op), count_(count), root_(root), inPlace_(inPlace) {
  const int n = d.n, r = d.rank;
  const size_t es = kernels::dtypeSize(t), cn = count * static_cast<size_t>(n), rc = static_cast<size_t>(r) * count;
  const bool reduction = coll == CollType::AllReduce || coll == CollType::ReduceScatter || coll == CollType::Reduce;
  const bool isRoot = r == root;
  label_ = fmt::format("device {} {} {} count {} root {} {} (rank {} of {})", collName(coll), kernels::dtypeName(t),
                       reduction ? opLabel(op) : "-", count, root, inPlace ? "in-place" : "out-of-place", r, n);
  auto input = [&](int rank, size_t i) { return reduction ? reduceInput(op, rank, i, t) : moveValue(t, rank, i); };
  enum Where { None, InA, InB };
  Where sw = None, rw = None;  // where send and recv point: image a or b, at element so / ro
  size_t so = 0, ro = 0;
  bool useA = false, useB = false;
  auto initA = [&](size_t e) { aElems_ = e, useA = true, a_.assign(e * es + kCanary, kFill); };
  auto initB = [&](size_t e) { bElems_ = e, useB = true, b_.assign(e * es + kCanary, kFill); };
  auto fill = [&](std::vector<unsigned char>& img, size_t at, size_t cnt, int rank, size_t from) {
    for (size_t i = 0; i < cnt; ++i) storeValue(t, img.data(), at + i, input(rank, from + i));
  };
  switch (coll) {
    case CollType::AllReduce:
    case CollType::Reduce:
      initA(count), fill(a_, 0, count, r, 0), sw = InA;
      if (inPlace) rw = InA;
      else if (coll == CollType::AllReduce || isRoot) initB(count), rw = InB;
      break;
    case CollType::ReduceScatter:
      initA(cn), fill(a_, 0, cn, r, 0), sw = InA;
      if (inPlace) rw = InA, ro = rc;
      else initB(count), rw = InB;
      break;
    case CollType::AllGather:
      if (inPlace) initA(cn), fill(a_, rc, count, r, 0), sw = InA, so = rc, rw = InA;
      else initA(count), fill(a_, 0, count, r, 0), initB(cn), sw = InA, rw = InB;
      break;
    case CollType::Broadcast:
      initB(count), rw = InB;
      if (isRoot && inPlace) fill(b_, 0, count, r, 0), sw = InB;
      else if (isRoot) initA(count), fill(a_, 0, count, r, 0), sw = InA;
      break;
    case CollType::AllToAll:
      initA(cn), fill(a_, 0, cn, r, 0), sw = InA;
      if (inPlace) rw = InA;
      else initB(cn), rw = InB;
      break;
    case CollType::Gather:
      if (isRoot) initB(cn), rw = InB;
      if (isRoot && inPlace) fill(b_, rc, count, r, 0), sw = InB, so = rc;
      else initA(count), fill(a_, 0, count, r, 0), sw = InA;
      break;
    case CollType::Scatter:
      if (isRoot) initA(cn), fill(a_, 0, cn, r, 0), sw = InA;
      if (isRoot && inPlace) rw = InA, ro = rc;
      else initB(count), rw = InB;
      break;
  }
  if (useA && !(da_ = cursor.take(a_.size()))) prepError_ = "device arena exhausted";
  if (useB && !(db_ = cursor.take(b_.size()))) prepError_ = "device arena exhausted";
  auto dev = [&](Where w, size_t off) -> unsigned char* {
    return w == InA ? da_ + off * es : w == InB ? db_ + off * es : nullptr;
  };
  if (prepError_.empty()) send_ = dev(sw, so), recv_ = dev(rw, ro);
  a0_ = a_;
  if (prepError_.empty()) prepError_ = copyImage(a_, da_, true, d.stream);
  if (prepError_.empty()) prepError_ = copyImage(b_, db_, true, d.stream);
  recvWhere_ = rw, recvOff_ = ro;
  if (reduction && op == kPreMulSum) {
    unsigned char scalar[8];
    storeValue(t, scalar, 0, 2.0);
    if (strataRedOpCreatePreMulSum(&rop_, scalar, t, d.comm) == strataSuccess) opCreated_ = true;
    else if (prepError_.empty()) prepError_ = std::string("RedOpCreatePreMulSum failed: ") + strataGetLastError(d.comm);
  } else {
    rop_ = static_cast<strataRedOp_t>(op);
  }
}

DeviceCheck::~DeviceCheck() { releaseOp(); }

void DeviceCheck::releaseOp() {
  if (opCreated_) strataRedOpDestroy(rop_, d_.comm);
  opCreated_ = false;
}

strataResult_t DeviceCheck::issue(strataStream_t stream) {
  stream_ = static_cast<cudaStream_t>(stream);
  const size_t c = count_;
  switch (coll_) {
    case CollType::AllReduce: rc_ = strataAllReduceStream(send_, recv_, c, t_, rop_, d_.comm, stream); break;
    case CollType::ReduceScatter: rc_ = strataReduceScatterStream(send_, recv_, c, t_, rop_, d_.comm, stream); break;
    case CollType::AllGather: rc_ = strataAllGatherStream(send_, recv_, c, t_, d_.comm, stream); break;
    case CollType::Broadcast: rc_ = strataBroadcastStream(send_, recv_, c, t_, root_, d_.comm, stream); break;
    case CollType::Reduce: rc_ = strataReduceStream(send_, recv_, c, t_, rop_, root_, d_.comm, stream); break;
    case CollType::AllToAll: rc_ = strataAllToAllStream(send_, recv_, c, t_, d_.comm, stream); break;
    case CollType::Gather: rc_ = strataGatherStream(send_, recv_, c, t_, root_, d_.comm, stream); break;
    case CollType::Scatter: rc_ = strataScatterStream(send_, recv_, c, t_, root_, d_.comm, stream); break;
  }
  if (rc_ != strataSuccess) lastError_ = strataGetLastError(d_.comm);
  return rc_;
}

strataResult_t DeviceCheck::issuePlain() {
  stream_ = nullptr;  // the legacy default stream
  const size_t c = count_;
  switch (coll_) {
    case CollType::AllReduce: rc_ = strataAllReduce(send_, recv_, c, t_, rop_, d_.comm); break;
    case CollType::ReduceScatter: rc_ = strataReduceScatter(send_, recv_, c, t_, rop_, d_.comm); break;
    case CollType::AllGather: rc_ = strataAllGather(send_, recv_, c, t_, d_.comm); break;
    case CollType::Broadcast: rc_ = strataBroadcast(send_, recv_, c, t_, root_, d_.comm); break;
    case CollType::Reduce: rc_ = strataReduce(send_, recv_, c, t_, rop_, root_, d_.comm); break;
    case CollType::AllToAll: rc_ = strataAllToAll(send_, recv_, c, t_, d_.comm); break;
    case CollType::Gather: rc_ = strataGather(send_, recv_, c, t_, root_, d_.comm); break;
    case CollType::Scatter: rc_ = strataScatter(send_, recv_, c, t_, root_, d_.comm); break;
  }
  if (rc_ != strataSuccess) lastError_ = strataGetLastError(d_.comm);
  return rc_;
}

void DeviceCheck::verify(CheckReport* rep) {
  d_.checks++;
  releaseOp();
  if (!prepError_.empty()) return rep->fail(label_ + ": " + prepError_);
  if (rc_ != strataSuccess) return rep->fail(fmt::format("{}: returned {} ({})", label_, static_cast<int>(rc_), lastError_));
  std::string err = copyImage(a_, da_, false, stream_);
  if (err.empty()) err = copyImage(b_, db_, false, stream_);
  cudaError_t e = cudaStreamSynchronize(stream_);
  if (err.empty() && e != cudaSuccess) err = "stream synchronize failed: " + cudaWhat(e);
  if (!err.empty()) return rep->fail(label_ + ": " + err);
  if (!canaryIntact(a_) || !canaryIntact(b_)) return rep->fail(label_ + ": wrote past the end of a buffer");
  if (!inPlace_ && a_ != a0_) {
    size_t at = static_cast<size_t>(std::mismatch(a_.begin(), a_.end(), a0_.begin()).first - a_.begin());
    return rep->fail(fmt::format("{}: modified its input buffer (byte {})", label_, at));
  }
  const int n = d_.n, r = d_.rank;
  const size_t count = count_, cn = count * static_cast<size_t>(n), rc = static_cast<size_t>(r) * count;
  const bool reduction = coll_ == CollType::AllReduce || coll_ == CollType::ReduceScatter || coll_ == CollType::Reduce;
  auto input = [&](int rank, size_t i) { return reduction ? reduceInput(op_, rank, i, t_) : moveValue(t_, rank, i); };
  const unsigned char* out = recvWhere_ == 1 ? a_.data() : b_.data();
  out += recvOff_ * kernels::dtypeSize(t_);
  ElementCheck ec{t_, reduction && op_ == strataAvg && kernels::dtypeIsFloat(t_)};
  const bool isRoot = r == root_;
  size_t total = 0;
  switch (coll_) {
    case CollType::AllReduce:
      for (size_t i = 0; i < count; ++i) ec.at(out, i, reduceExpect(op_, n, i, t_));
      total = count;
      break;
    case CollType::Reduce:
      if (isRoot)
        for (size_t i = 0; i < count; ++i) ec.at(out, i, reduceExpect(op_, n, i, t_));
      total = isRoot ? count : 0;
      break;
    case CollType::ReduceScatter:
      for (size_t i = 0; i < count; ++i) ec.at(out, i, reduceExpect(op_, n, rc + i, t_));
      total = count;
      break;
    case CollType::AllGather:
      for (size_t i = 0; i < cn; ++i) ec.at(out, i, input(static_cast<int>(i / count), i % count));
      total = cn;
      break;
    case CollType::Broadcast:
      for (size_t i = 0; i < count; ++i) ec.at(out, i, input(root_, i));
      total = count;
      break;
    case CollType::AllToAll:  // block p of my output is block r of rank p's input
      for (size_t i = 0; i < cn; ++i) ec.at(out, i, input(static_cast<int>(i / count), rc + i % count));
      total = cn;
      break;
    case CollType::Gather:
      if (isRoot)
        for (size_t i = 0; i < cn; ++i) ec.at(out, i, input(static_cast<int>(i / count), i % count));
      total = isRoot ? cn : 0;
      break;
    case CollType::Scatter:
      for (size_t i = 0; i < count; ++i) ec.at(out, i, input(root_, rc + i));
      total = count;
      break;
  }
  if (ec.report(rep, label_, total)) rep->passed++;
}

void checkDevice(DeviceRank& d, CollType coll, strataDataType_t t, int op, size_t count, int root, bool inPlace,
                 CheckReport* rep, bool plainForm) {
  ArenaCursor cursor{&d};
  DeviceCheck c(d, cursor, coll, t, op, count, root, inPlace);
  d.setLabel(c.label());
  if (plainForm) {
    cudaStreamSynchronize(d.stream);  // the uploads ran on d.stream, which the legacy stream does not wait for
    c.issuePlain();
  } else {
    c.issue(d.stream);
  }
  c.releaseOp();  // allowed as soon as the call has returned
  c.verify(rep);
}

}  // namespace strata::testing
