// device_sweep.cc: grouped send/recv checks on device buffers and the sampled sweep over collectives x dtypes x ops x counts.
#include <fmt/format.h>

#include <algorithm>

#include "gpu/device_checks.h"
#include "kernels/host_reduce.h"
#include "support/typed_values.h"

namespace strata::testing {
namespace {

constexpr size_t kCanary = 64;
constexpr unsigned char kFill = 0xA5;

// Data-movement values, as in support/coll_checks.cc (exact in the dtype); `key` names the sender/slice.
double p2pValue(strataDataType_t t, int key, size_t i) {
  switch (t) {
    case strataInt32: case strataUint32: case strataInt64: case strataUint64: case strataFloat32:
    case strataFloat64:
      return static_cast<double>((static_cast<size_t>(key) * 100003 + i) % (1u << 24));
    case strataFloat16: case strataBfloat16: case strataInt8: case strataUint8:
      return static_cast<double>((static_cast<size_t>(key) * 5 + i) % 97 % 64);
    default: return static_cast<double>((static_cast<size_t>(key) * 3 + i) % 7);
  }
}

// One device buffer of a p2p check with its host image (count elements + canary).
struct Slice {
  std::vector<unsigned char> img, orig;
  unsigned char* dev = nullptr;
  size_t count = 0;
};

bool makeSlice(ArenaCursor& cur, Slice* s, strataDataType_t t, size_t count, int key) {
  s->count = count;
  s->img.assign(count * kernels::dtypeSize(t) + kCanary, kFill);
  if (key >= 0)
    for (size_t i = 0; i < count; ++i) storeValue(t, s->img.data(), i, p2pValue(t, key, i));
  s->orig = s->img;
  s->dev = cur.take(s->img.size());
  return s->dev && cudaMemcpyAsync(s->dev, s->img.data(), s->img.size(), cudaMemcpyHostToDevice, cur.d->stream) == cudaSuccess;
}

bool download(Slice* s, cudaStream_t stream) {
  return cudaMemcpyAsync(s->img.data(), s->dev, s->img.size(), cudaMemcpyDeviceToHost, stream) == cudaSuccess;
}

// Compares a received slice with key's values; names the first wrong element.
bool checkSlice(const Slice& s, strataDataType_t t, int key, std::string* why) {
  if (!std::all_of(s.img.end() - kCanary, s.img.end(), [](unsigned char c) { return c == kFill; })) {
    *why = "wrote past the end of a receive buffer";
    return false;
  }
  for (size_t i = 0; i < s.count; ++i) {
    unsigned char tmp[8];
    storeValue(t, tmp, 0, p2pValue(t, key, i));
    if (loadValue(t, s.img.data(), i) != loadValue(t, tmp, 0)) {
      *why = fmt::format("element {} is {} but should be {}", i, loadValue(t, s.img.data(), i), loadValue(t, tmp, 0));
      return false;
    }
  }
  return true;
}

// Runs a group of sends and receives built by `post`, syncs, and reports; `check` then verifies.
template <typename Post, typename Check>
void runP2p(DeviceRank& d, const std::string& label, bool prepared, Post post, Check check, CheckReport* rep) {
  d.setLabel(label);
  d.checks++;
  strataResult_t first = strataSuccess;
  strataGroupStart();
  post([&](strataResult_t rc) { if (first == strataSuccess) first = rc; });
  strataResult_t end = strataGroupEnd();
  std::string lastError = strataGetLastError(d.comm);
  if (!prepared) return rep->fail(label + ": device arena exhausted or upload failed");
  if (first != strataSuccess || end != strataSuccess)
    return rep->fail(fmt::format("{}: send/recv returned {}, group end {} ({})", label, static_cast<int>(first),
                                 static_cast<int>(end), lastError));
  std::string why;
  if (!check(&why)) return rep->fail(label + ": " + why);
  rep->passed++;
}

}  // namespace

void checkDeviceRing(DeviceRank& d, strataDataType_t t, size_t count, int shift, bool inPlace, CheckReport* rep) {
  const int n = d.n, r = d.rank, to = (r + shift) % n, from = ((r - shift) % n + n) % n;
  ArenaCursor cur{&d};
  Slice s, rv;
  bool ok = makeSlice(cur, &s, t, count, r);
  if (!inPlace) ok = makeSlice(cur, &rv, t, count, -1) && ok;
  Slice& recv = inPlace ? s : rv;
  const std::string label = fmt::format("device send/recv ring {} count {} shift {} {} (rank {} of {})",
                                        kernels::dtypeName(t), count, shift, inPlace ? "in-place" : "out-of-place", r, n);
  runP2p(d, label, ok, [&](auto note) {
    note(strataSendStream(s.dev, count, t, to, d.comm, d.stream));
    note(strataRecvStream(recv.dev, count, t, from, d.comm, d.stream));
  }, [&](std::string* why) {
    bool copied = download(&recv, d.stream) && (inPlace || download(&s, d.stream));
    cudaError_t e = cudaStreamSynchronize(d.stream);
    if (!copied || e != cudaSuccess) return *why = "download / stream synchronize failed: " + std::string(cudaGetErrorName(e)), false;
    if (!inPlace && s.img != s.orig) return *why = "modified its send buffer", false;
    return checkSlice(recv, t, from, why);
  }, rep);
}

void checkDeviceAllToAllV(DeviceRank& d, strataDataType_t t, size_t base, CheckReport* rep) {
  const int n = d.n, r = d.rank;
  auto cnt = [&](int from, int to) { return base + static_cast<size_t>((from + to) % 3); };  // 0 when base is 0
  ArenaCursor cur{&d};
  std::vector<Slice> sends(n), recvs(n);
  bool ok = true;
  for (int p = 0; p < n; ++p) {
    ok = makeSlice(cur, &sends[p], t, cnt(r, p), r * n + p) && ok;
    ok = makeSlice(cur, &recvs[p], t, cnt(p, r), -1) && ok;
  }
  const std::string label = fmt::format("device grouped all-to-all-v {} base {} (rank {} of {})", kernels::dtypeName(t),
                                        base, r, n);
  runP2p(d, label, ok, [&](auto note) {
    for (int p = 0; p < n; ++p) {
      note(strataSendStream(sends[p].dev, cnt(r, p), t, p, d.comm, d.stream));
      note(strataRecvStream(recvs[p].dev, cnt(p, r), t, p, d.comm, d.stream));
    }
  }, [&](std::string* why) {
    bool copied = true;
    for (int p = 0; p < n; ++p) copied = download(&recvs[p], d.stream) && download(&sends[p], d.stream) && copied;
    cudaError_t e = cudaStreamSynchronize(d.stream);
    if (!copied || e != cudaSuccess) return *why = "download / stream synchronize failed: " + std::string(cudaGetErrorName(e)), false;
    for (int p = 0; p < n; ++p) {
      if (sends[p].img != sends[p].orig) return *why = fmt::format("modified its send buffer to {}", p), false;
      if (!checkSlice(recvs[p], t, p * n + r, why)) return *why = fmt::format("from rank {}: {}", p, *why), false;
    }
    return true;
  }, rep);
}

const char* sweepPartName(SweepPart p) {
  static const char* const names[] = {"AllReduceTypes", "AllReduceOps", "ReduceScatter", "AllGather", "Broadcast",
                                      "Reduce", "AllToAll", "Gather", "Scatter", "SendRecv"};
  return names[static_cast<int>(p)];
}

void runDeviceSweep(DeviceRank& d, SweepPart part, bool quick, CheckReport* rep) {
  const int n = d.n;
  const std::vector<size_t> counts = quick ? std::vector<size_t>{0, 1, 1000, kMidCount}
                                           : std::vector<size_t>{0, 1, 7, 1000, kMidCount};
  const int ops[] = {strataSum, strataProd, strataMax, strataMin, strataAvg, kPreMulSum};
  const strataDataType_t opTypes[] = {strataFloat32, strataBfloat16, strataInt32};
  auto type = [](int t) { return static_cast<strataDataType_t>(t); };
  auto rootFor = [&](size_t count) { return static_cast<int>((count + 1) % static_cast<size_t>(n)); };
  if (part == SweepPart::SendRecv) {
    for (size_t count : counts)
      for (bool inPlace : {false, true}) checkDeviceRing(d, strataFloat32, count, 1, inPlace, rep);
    checkDeviceRing(d, strataFloat32, kBigCount, 1, false, rep);
    for (int t = 0; t < strataNumTypes; ++t) checkDeviceRing(d, type(t), quick ? 37 : 1000, 1, t % 2 == 1, rep);
    if (n > 2) checkDeviceRing(d, strataInt32, 1000, n - 1, false, rep);  // the other direction
    checkDeviceRing(d, strataInt64, 1000, 0, false, rep);                   // to itself
    checkDeviceAllToAllV(d, strataFloat32, 0, rep);
    checkDeviceAllToAllV(d, strataUint8, 1000, rep);
    if (!quick) checkDeviceAllToAllV(d, strataBfloat16, 100000, rep);
    return;
  }
  if (part == SweepPart::AllReduceTypes || part == SweepPart::AllReduceOps) {
    const CollType ar = CollType::AllReduce;
    if (part == SweepPart::AllReduceTypes) {
      for (size_t count : counts)
        for (bool inPlace : {false, true}) checkDevice(d, ar, strataFloat32, strataSum, count, 0, inPlace, rep);
      checkDevice(d, ar, strataFloat32, strataSum, kBigCount, 0, false, rep);
      if (!quick) checkDevice(d, ar, strataFloat32, strataSum, kBigCount, 0, true, rep);
      const std::vector<size_t> typeCounts = quick ? std::vector<size_t>{1000} : std::vector<size_t>{1, 7, 1000, kMidCount};
      for (int t = 0; t < strataNumTypes; ++t) {
        for (size_t count : typeCounts) checkDevice(d, ar, type(t), strataSum, count, 0, false, rep);
        checkDevice(d, ar, type(t), strataSum, quick ? 7 : 1000, 0, true, rep);
      }
      return;
    }
    const std::vector<size_t> opCounts = quick ? std::vector<size_t>{1000} : std::vector<size_t>{7, 1000, kMidCount};
    for (int op : ops)
      for (strataDataType_t t : opTypes) {
        for (size_t count : opCounts) checkDevice(d, ar, t, op, count, 0, false, rep);
        checkDevice(d, ar, t, op, quick ? 7 : 1000, 0, true, rep);
      }
    for (int op : ops)
      for (int t = 0; t < strataNumTypes; ++t) checkDevice(d, ar, type(t), op, 37, 0, t % 2 == 1, rep);
    for (int op : ops)
      if (!quick || op == strataAvg) checkDevice(d, ar, strataFloat32, op, kBigCount, 0, false, rep);
    return;
  }
  static const CollType kColl[] = {CollType::AllReduce, CollType::AllReduce, CollType::ReduceScatter,
                                   CollType::AllGather, CollType::Broadcast, CollType::Reduce,
                                   CollType::AllToAll,  CollType::Gather,    CollType::Scatter};
  const CollType coll = kColl[static_cast<int>(part)];
  const bool reduction = coll == CollType::ReduceScatter || coll == CollType::Reduce;
  const bool rooted = coll == CollType::Broadcast || coll == CollType::Reduce || coll == CollType::Gather ||
                      coll == CollType::Scatter;
  for (size_t count : counts)
    for (bool inPlace : {false, true}) checkDevice(d, coll, strataFloat32, strataSum, count, rootFor(count), inPlace, rep);
  checkDevice(d, coll, strataFloat32, strataSum, kBigCount, n - 1, false, rep);
  if (!quick) checkDevice(d, coll, strataFloat32, strataSum, kBigCount, 0, true, rep);
  for (int t = 0; t < strataNumTypes; ++t)
    checkDevice(d, coll, type(t), strataSum, quick ? 37 : 1000, rootFor(static_cast<size_t>(t)), t % 2 == 1, rep);
  if (rooted)
    for (int root = 0; root < n; ++root)
      for (bool inPlace : {false, true})
        if (!quick || !inPlace) checkDevice(d, coll, strataInt32, strataSum, 1000, root, inPlace, rep);
  if (reduction) {
    for (int op : ops)
      for (strataDataType_t t : opTypes)
        for (size_t count : quick ? std::vector<size_t>{1000} : std::vector<size_t>{7, 1000})
          checkDevice(d, coll, t, op, count, n - 1, count == 7, rep);
    if (!quick)
      for (int op : ops)
        for (int t = 0; t < strataNumTypes; ++t) checkDevice(d, coll, type(t), op, 37, 0, t % 2 == 0, rep);
  }
}

}  // namespace strata::testing
