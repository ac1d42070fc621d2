// coll_checks.cc: verifiable inputs and exact expected results for every collective.
#include "support/coll_checks.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "collectives/comm.h"
#include "kernels/host_reduce.h"
#include "support/typed_values.h"

namespace strata::testing {
namespace {
bool isIntType(strataDataType_t t) { return !kernels::dtypeIsFloat(t); }
}  // namespace

// Values that are exact in every dtype and make sums, products, max and min exact too.
double reduceInput(int op, int r, size_t i, strataDataType_t t) {
  switch (op) {
    case strataProd: return ((i + static_cast<size_t>(r)) % 3 == 0) ? 2 : 1;
    case strataMax:
    case strataMin: return static_cast<double>((i * 7 + static_cast<size_t>(r) * 3) % 5);
    default:
      // Sums stay exact in every type: e5m2 holds integers to 8 (even ones to 16), e4m3 to 16.
      return static_cast<double>((i + static_cast<size_t>(r)) % (t == strataFloat8e5m2 ? 2 : 3));
  }
}

double reduceExpect(int op, int n, size_t i, strataDataType_t t) {
  double acc = reduceInput(op, 0, i, t);
  for (int r = 1; r < n; ++r) {
    double v = reduceInput(op, r, i, t);
    switch (op) {
      case strataProd: acc *= v; break;
      case strataMax: acc = std::max(acc, v); break;
      case strataMin: acc = std::min(acc, v); break;
      default: acc += v; break;
    }
  }
  if (op == kPreMulSum) acc *= 2;
  if (op == strataAvg) acc = isIntType(t) ? std::trunc(acc / n) : acc / n;
  return acc;
}

// Unique-ish values for data movement: exact in the dtype.
double moveValue(strataDataType_t t, int r, size_t i) {
  switch (t) {
    case strataInt32: case strataUint32: case strataInt64: case strataUint64: case strataFloat32:
    case strataFloat64:
      return static_cast<double>((static_cast<size_t>(r) * 100003 + i) % (1u << 24));
    case strataFloat16: case strataBfloat16: case strataInt8: case strataUint8:
      return static_cast<double>((static_cast<size_t>(r) * 5 + i) % 97 % 64);
    default:
      return static_cast<double>((static_cast<size_t>(r) * 3 + i) % 7);
  }
}

double roundToType(strataDataType_t t, double v) {
  alignas(8) unsigned char tmp[8];
  storeValue(t, tmp, 0, v);
  return loadValue(t, tmp, 0);
}

bool valueMatches(strataDataType_t t, int op, double got, double expect) {
  if (op == strataAvg && !isIntType(t)) return std::fabs(got - expect) <= typeEpsilon(t) * std::fabs(expect) * 2 + 1e-12;
  return got == roundToType(t, expect);
}

namespace {


struct Buf {
  std::vector<unsigned char> bytes;
  size_t es = 1, elems = 0;
  static constexpr size_t kCanary = 64;
  void init(strataDataType_t t, size_t n) {
    es = kernels::dtypeSize(t);
    elems = n;
    bytes.assign(n * es + kCanary, 0xA5);
  }
  void* at(size_t elem) { return bytes.data() + elem * es; }
  bool canaryIntact() const {
    if (bytes.empty()) return true;
    for (size_t k = 0; k < kCanary; ++k)
      if (bytes[elems * es + k] != 0xA5) return false;
    return true;
  }
};

}  // namespace

void checkCollective(strataComm_t comm, CollType coll, strataDataType_t t, int op, size_t count, int root,
                     bool inPlace, CheckReport* rep) {
  int n = 0, r = 0;
  strataCommCount(comm, &n);
  strataCommUserRank(comm, &r);
  const size_t cn = count * static_cast<size_t>(n);
  const bool reduction = coll == CollType::AllReduce || coll == CollType::ReduceScatter || coll == CollType::Reduce;
  std::string label = fmt::format("{} {} op {} count {} root {} {} (rank {} of {})", collName(coll),
                                  kernels::dtypeName(t), op, count, root, inPlace ? "in-place" : "out-of-place", r, n);
  strataRedOp_t rop = op == kPreMulSum ? strataSum : static_cast<strataRedOp_t>(op);
  if (reduction && op == kPreMulSum) {
    Buf scalar;
    scalar.init(t, 1);
    storeValue(t, scalar.at(0), 0, 2.0);
    if (strataRedOpCreatePreMulSum(&rop, scalar.at(0), t, comm) != strataSuccess) {
      rep->fail(label + ": RedOpCreatePreMulSum failed: " + strataGetLastError(comm));
      return;
    }
  }
  auto input = [&](int rank, size_t i) { return reduction ? reduceInput(op, rank, i, t) : moveValue(t, rank, i); };

  Buf a, b;  // a: send side (or the single in-place buffer), b: receive side
  void* send = nullptr;
  void* recv = nullptr;
  const bool isRoot = r == root;
  strataResult_t rc = strataSuccess;
  switch (coll) {
    case CollType::AllReduce:
    case CollType::Reduce: {
      a.init(t, count);
      for (size_t i = 0; i < count; ++i) storeValue(t, a.at(0), i, input(r, i));
      send = a.at(0);
      if (inPlace) recv = send;
      else if (coll == CollType::AllReduce || isRoot) b.init(t, count), recv = b.at(0);
      if (coll == CollType::AllReduce) rc = strataAllReduce(send, recv, count, t, rop, comm);
      else rc = strataReduce(send, (coll == CollType::Reduce && !isRoot && !inPlace) ? nullptr : recv, count, t, rop,
                             root, comm);
      break;
    }
    case CollType::ReduceScatter: {
      a.init(t, cn);
      for (size_t i = 0; i < cn; ++i) storeValue(t, a.at(0), i, input(r, i));
      send = a.at(0);
      if (inPlace) recv = a.at(static_cast<size_t>(r) * count);
      else b.init(t, count), recv = b.at(0);
      rc = strataReduceScatter(send, recv, count, t, rop, comm);
      break;
    }
    case CollType::AllGather: {
      if (inPlace) {
        a.init(t, cn);
        for (size_t i = 0; i < count; ++i) storeValue(t, a.at(static_cast<size_t>(r) * count), i, input(r, i));
        send = a.at(static_cast<size_t>(r) * count);
        recv = a.at(0);
      } else {
        a.init(t, count);
        b.init(t, cn);
        for (size_t i = 0; i < count; ++i) storeValue(t, a.at(0), i, input(r, i));
        send = a.at(0);
        recv = b.at(0);
      }
      rc = strataAllGather(send, recv, count, t, comm);
      break;
    }
    case CollType::Broadcast: {
      b.init(t, count);
      recv = b.at(0);
      if (isRoot) {
        if (inPlace) {
          for (size_t i = 0; i < count; ++i) storeValue(t, b.at(0), i, input(r, i));
          send = recv;
        } else {
          a.init(t, count);
          for (size_t i = 0; i < count; ++i) storeValue(t, a.at(0), i, input(r, i));
          send = a.at(0);
        }
      }
      rc = strataBroadcast(send, recv, count, t, root, comm);
      break;
    }
    case CollType::AllToAll: {
      a.init(t, cn);
      for (size_t i = 0; i < cn; ++i) storeValue(t, a.at(0), i, input(r, i));
      send = a.at(0);
      if (inPlace) recv = send;
      else b.init(t, cn), recv = b.at(0);
      rc = strataAllToAll(send, recv, count, t, comm);
      break;
    }
    case CollType::Gather: {
      if (isRoot) {
        b.init(t, cn);
        recv = b.at(0);
        if (inPlace) {
          for (size_t i = 0; i < count; ++i) storeValue(t, b.at(static_cast<size_t>(r) * count), i, input(r, i));
          send = b.at(static_cast<size_t>(r) * count);
        }
      }
      if (!send) {
        a.init(t, count);
        for (size_t i = 0; i < count; ++i) storeValue(t, a.at(0), i, input(r, i));
        send = a.at(0);
      }
      rc = strataGather(send, recv, count, t, root, comm);
      break;
    }
    case CollType::Scatter: {
      if (isRoot) {
        a.init(t, cn);
        for (size_t i = 0; i < cn; ++i) storeValue(t, a.at(0), i, input(r, i));
        send = a.at(0);
        if (inPlace) recv = a.at(static_cast<size_t>(r) * count);
      }
      if (!recv) b.init(t, count), recv = b.at(0);
      rc = strataScatter(send, recv, count, t, root, comm);
      break;
    }
  }
  if (reduction && op == kPreMulSum) strataRedOpDestroy(rop, comm);
  if (rc != strataSuccess) {
    rep->fail(fmt::format("{}: returned {} ({})", label, static_cast<int>(rc), strataGetLastError(comm)));
    return;
  }
  if (!a.canaryIntact() || !b.canaryIntact()) {
    rep->fail(label + ": wrote past the end of a buffer");
    return;
  }
  // Expected values for this rank's output.
  auto check = [&](const void* base, size_t i, double expect, size_t outIndex) -> bool {
    double got = loadValue(t, base, i);
    bool good = valueMatches(t, op, got, expect);
    if (!good)
      rep->fail(fmt::format("{}: element {} is {} but should be {}", label, outIndex, got, roundToType(t, expect)));
    return good;
  };
  bool good = true;
  switch (coll) {
    case CollType::AllReduce:
      for (size_t i = 0; i < count && good; ++i) good = check(recv, i, reduceExpect(op, n, i, t), i);
      break;
    case CollType::Reduce:
      if (isRoot)
        for (size_t i = 0; i < count && good; ++i) good = check(recv, i, reduceExpect(op, n, i, t), i);
      break;
    case CollType::ReduceScatter:
      for (size_t i = 0; i < count && good; ++i)
        good = check(recv, i, reduceExpect(op, n, static_cast<size_t>(r) * count + i, t), i);
      break;
    case CollType::AllGather:
      for (size_t i = 0; i < cn && good; ++i) good = check(recv, i, input(static_cast<int>(i / count), i % count), i);
      break;
    case CollType::Broadcast:
      for (size_t i = 0; i < count && good; ++i) good = check(recv, i, input(root, i), i);
      break;
    case CollType::AllToAll:
      // Block p of my output is block r of rank p's input.
      for (size_t i = 0; i < cn && good; ++i)
        good = check(recv, i, input(static_cast<int>(i / count), static_cast<size_t>(r) * count + i % count), i);
      break;
    case CollType::Gather:
      if (isRoot)
        for (size_t i = 0; i < cn && good; ++i) good = check(recv, i, input(static_cast<int>(i / count), i % count), i);
      break;
    case CollType::Scatter:
      for (size_t i = 0; i < count && good; ++i) good = check(recv, i, input(root, static_cast<size_t>(r) * count + i), i);
      break;
  }
  if (good) rep->passed++;
}

void checkAllToAllV(strataComm_t comm, strataDataType_t t, size_t base, CheckReport* rep) {
  int n = 0, r = 0;
  strataCommCount(comm, &n);
  strataCommUserRank(comm, &r);
  auto cnt = [&](int from, int to) { return base + static_cast<size_t>((from + to) % 3 + 1); };
  std::vector<Buf> sends(n), recvs(n);
  strataGroupStart();
  for (int p = 0; p < n; ++p) {
    sends[p].init(t, cnt(r, p));
    for (size_t i = 0; i < cnt(r, p); ++i) storeValue(t, sends[p].at(0), i, moveValue(t, r * n + p, i));
    recvs[p].init(t, cnt(p, r));
    strataSend(sends[p].at(0), cnt(r, p), t, p, comm);
    strataRecv(recvs[p].at(0), cnt(p, r), t, p, comm);
  }
  strataResult_t rc = strataGroupEnd();
  std::string label = fmt::format("grouped send/recv {} base {} (rank {} of {})", kernels::dtypeName(t), base, r, n);
  if (rc != strataSuccess) {
    rep->fail(fmt::format("{}: returned {} ({})", label, static_cast<int>(rc), strataGetLastError(comm)));
    return;
  }
  for (int p = 0; p < n; ++p) {
    if (!recvs[p].canaryIntact()) return rep->fail(label + ": overflow");
    for (size_t i = 0; i < cnt(p, r); ++i) {
      double got = loadValue(t, recvs[p].at(0), i);
      Buf tmp;
      tmp.init(t, 1);
      storeValue(t, tmp.at(0), 0, moveValue(t, p * n + r, i));
      if (got != loadValue(t, tmp.at(0), 0))
        return rep->fail(fmt::format("{}: element {} from rank {} is {}", label, i, p, got));
    }
  }
  rep->passed++;
}

void checkInPlaceShift(strataComm_t comm, size_t count, CheckReport* rep) {
  int n = 0, r = 0;
  strataCommCount(comm, &n);
  strataCommUserRank(comm, &r);
  std::vector<int32_t> buf(count);
  for (size_t i = 0; i < count; ++i) buf[i] = static_cast<int32_t>(r * 1000003 + i);
  strataGroupStart();
  strataSend(buf.data(), count, strataInt32, (r + 1) % n, comm);
  strataRecv(buf.data(), count, strataInt32, (r + n - 1) % n, comm);
  strataResult_t rc = strataGroupEnd();
  std::string label = fmt::format("in-place shift count {} (rank {} of {})", count, r, n);
  if (rc != strataSuccess) return rep->fail(fmt::format("{}: returned {} ({})", label, static_cast<int>(rc), strataGetLastError(comm)));
  const int from = (r + n - 1) % n;
  for (size_t i = 0; i < count; ++i)
    if (buf[i] != static_cast<int32_t>(from * 1000003 + i))
      return rep->fail(fmt::format("{}: element {} is {}, expected {}", label, i, buf[i], from * 1000003 + i));
  rep->passed++;
}

void runStandardSweep(strataComm_t comm, bool quick, CheckReport* rep) {
  int n = 0;
  strataCommCount(comm, &n);
  const std::vector<size_t> counts = quick ? std::vector<size_t>{0, 1, 7, 1031}
                                           : std::vector<size_t>{0, 1, 7, 1031, 65537};
  const CollType colls[] = {CollType::AllReduce, CollType::ReduceScatter, CollType::AllGather, CollType::Broadcast,
                            CollType::Reduce,    CollType::AllToAll,      CollType::Gather,    CollType::Scatter};
  for (CollType c : colls)
    for (size_t count : counts)
      for (bool inPlace : {false, true}) {
        const int root = n > 1 ? (static_cast<int>(count) + 1) % n : 0;
        checkCollective(comm, c, strataFloat32, strataSum, count, root, inPlace, rep);
      }
  const int ops[] = {strataSum, strataProd, strataMax, strataMin, strataAvg, kPreMulSum};
  for (int t = 0; t < strataNumTypes; ++t)
    for (int op : ops) {
      checkCollective(comm, CollType::AllReduce, static_cast<strataDataType_t>(t), op, 37, 0, false, rep);
      if (!quick) {
        checkCollective(comm, CollType::ReduceScatter, static_cast<strataDataType_t>(t), op, 5, 0, true, rep);
        checkCollective(comm, CollType::Reduce, static_cast<strataDataType_t>(t), op, 9, n - 1, false, rep);
      }
    }
  for (int t = 0; t < strataNumTypes; ++t)
    checkCollective(comm, CollType::AllGather, static_cast<strataDataType_t>(t), strataSum, 3, 0, false, rep);
  for (int root = 0; root < n; ++root) {
    checkCollective(comm, CollType::Broadcast, strataInt32, strataSum, 100, root, false, rep);
    checkCollective(comm, CollType::Reduce, strataInt32, strataSum, 100, root, true, rep);
    checkCollective(comm, CollType::Gather, strataInt64, strataSum, 10, root, false, rep);
    checkCollective(comm, CollType::Scatter, strataInt64, strataSum, 10, root, true, rep);
  }
  checkAllToAllV(comm, strataFloat32, 0, rep);
  checkAllToAllV(comm, strataUint8, 1000, rep);
  checkInPlaceShift(comm, 1001, rep);
  checkInPlaceShift(comm, quick ? 100003 : 1000003, rep);
}

void runTopologySweep(strataComm_t comm, bool large, CheckReport* rep) {
  int n = 0;
  strataCommCount(comm, &n);
  const topology::CommLayout& layout = static_cast<const Comm*>(comm)->layout();
  // One root per node, at a different local rank on each node (first node: local rank 0).
  std::vector<int> roots;
  for (int k = 0; k < layout.nnodes(); ++k) roots.push_back(layout.rankAt(k, k % layout.localSize(k)));
  const size_t big = (size_t{1} << 20) + 1;                                  // odd: uneven segments
  const size_t bigBlock = (size_t{1} << 20) / static_cast<size_t>(n) + 1;  // per-rank blocks, ~1M in all
  const CollType colls[] = {CollType::AllReduce, CollType::ReduceScatter, CollType::AllGather, CollType::Broadcast,
                            CollType::Reduce,    CollType::AllToAll,      CollType::Gather,    CollType::Scatter};
  for (CollType c : colls) {
    const bool perRank = c == CollType::ReduceScatter || c == CollType::AllGather || c == CollType::AllToAll ||
                         c == CollType::Gather || c == CollType::Scatter;
    const bool rooted = c == CollType::Broadcast || c == CollType::Reduce || c == CollType::Gather ||
                        c == CollType::Scatter;
    std::vector<size_t> counts = {0, 1, 7, 1031, perRank ? size_t{65537} / static_cast<size_t>(n) + 1 : 65537};
    if (large) counts.push_back(perRank ? bigBlock : big);
    for (size_t count : counts)
      for (bool inPlace : {false, true}) {
        if (!rooted) {
          checkCollective(comm, c, strataFloat32, strataSum, count, 0, inPlace, rep);
          continue;
        }
        // Small counts: a root on every node; larger ones: on the last node (local rank > 0 unless
        // the node has one rank).
        for (size_t k = 0; k < roots.size(); ++k)
          if (count <= 1031 || k + 1 == roots.size())
            checkCollective(comm, c, strataFloat32, strataSum, count, roots[k], inPlace, rep);
      }
  }
  // Every dtype x op at odd counts.
  const int ops[] = {strataSum, strataProd, strataMax, strataMin, strataAvg, kPreMulSum};
  for (int t = 0; t < strataNumTypes; ++t)
    for (int op : ops) {
      const auto dt = static_cast<strataDataType_t>(t);
      checkCollective(comm, CollType::AllReduce, dt, op, 1031, 0, t % 2 == 0, rep);
      checkCollective(comm, CollType::ReduceScatter, dt, op, 129, 0, t % 2 == 1, rep);
      checkCollective(comm, CollType::Reduce, dt, op, 257, roots[static_cast<size_t>(t) % roots.size()], t % 2 == 0,
                      rep);
    }
  for (int t = 0; t < strataNumTypes; ++t) {
    const auto dt = static_cast<strataDataType_t>(t);
    checkCollective(comm, CollType::AllGather, dt, strataSum, 33, 0, t % 2 == 0, rep);
    checkCollective(comm, CollType::AllToAll, dt, strataSum, 33, 0, t % 2 == 1, rep);
    checkCollective(comm, CollType::Broadcast, dt, strataSum, 65, roots.back(), t % 2 == 0, rep);
  }
  // ~1M-element reductions in other dtypes and ops.
  if (large) {
    checkCollective(comm, CollType::AllReduce, strataBfloat16, strataSum, big, 0, true, rep);
    checkCollective(comm, CollType::AllReduce, strataInt32, strataMax, big, 0, false, rep);
    checkCollective(comm, CollType::AllReduce, strataFloat64, strataAvg, big, 0, true, rep);
    checkCollective(comm, CollType::ReduceScatter, strataFloat16, kPreMulSum, bigBlock, 0, false, rep);
    checkCollective(comm, CollType::Reduce, strataUint8, strataMin, big, roots[roots.size() / 2], true, rep);
  }
  // Send / receive across and within nodes.
  checkAllToAllV(comm, strataFloat32, 0, rep);
  checkAllToAllV(comm, strataUint8, 1000, rep);
  checkInPlaceShift(comm, 1001, rep);
  if (large) checkInPlaceShift(comm, big, rep);
}

}  // namespace strata::testing
