// memalloc_checks.cc: the collectives on strataHostMemAlloc buffers (see memalloc_checks.h). Values
// are int32, so sums are exact; each buffer gets a canary element past its end.
#include "support/memalloc_checks.h"

#include <fmt/format.h>

#include <cstdint>
#include <vector>

namespace strata::testing {
namespace {

int32_t value(int r, size_t i) { return static_cast<int32_t>((r * 7919 + i * 31 + 1) % 100003); }
constexpr int32_t kCanary = -12345;

/// count int32 elements (+1 canary) from strataHostMemAlloc.
struct MemBuf {
  int32_t* p = nullptr;
  size_t n = 0;
  bool ok = false;
  explicit MemBuf(size_t count) : n(count) {
    void* v = nullptr;
    ok = strataHostMemAlloc(&v, (count + 1) * sizeof(int32_t)) == strataSuccess;
    p = static_cast<int32_t*>(v);
    if (ok) {
      for (size_t i = 0; i < count; ++i) p[i] = -1;
      p[count] = kCanary;
    }
  }
  ~MemBuf() {
    if (p) strataMemFree(p);
  }
  MemBuf(const MemBuf&) = delete;
  MemBuf& operator=(const MemBuf&) = delete;
};

enum class C { AllReduce, Reduce, ReduceScatter, AllGather, Broadcast, AllToAll, Gather, Scatter, SendRecv };
const char* name(C c) {
  static const char* names[] = {"all_reduce", "reduce", "reduce_scatter", "all_gather", "broadcast",
                                "alltoall",   "gather", "scatter",        "sendrecv"};
  return names[static_cast<int>(c)];
}

void check(strataComm_t comm, C c, size_t count, bool inPlace, CheckReport* rep) {
  int n = 0, me = 0;
  strataCommCount(comm, &n);
  strataCommUserRank(comm, &me);
  const int root = n - 1;
  const size_t cn = count * static_cast<size_t>(n);
  const std::string label = fmt::format("memalloc {} count {} {} (rank {} of {})", name(c), count,
                                        inPlace ? "in-place" : "out-of-place", me, n);
  // a: the send side (or the one in-place buffer); b: the receive side.
  const bool wideSend = c == C::ReduceScatter || c == C::AllToAll || c == C::Scatter;
  const bool wideRecv = c == C::AllGather || c == C::AllToAll || c == C::Gather;
  MemBuf a(wideSend || (inPlace && wideRecv) ? cn : count), b(wideRecv ? cn : count);
  if (!a.ok || !b.ok) return rep->fail(label + ": strataHostMemAlloc failed");
  int32_t* send = a.p;
  int32_t* recv = inPlace ? a.p : b.p;
  const strataDataType_t t = strataInt32;
  strataResult_t rc = strataSuccess;
  std::vector<int32_t> expect;  // this rank's expected result, at `res`
  int32_t* res = recv;
  auto sum = [&](size_t j) {
    int64_t s = 0;
    for (int r = 0; r < n; ++r) s += value(r, j);
    return static_cast<int32_t>(s);
  };
  switch (c) {
    case C::AllReduce:
    case C::Reduce:
      for (size_t i = 0; i < count; ++i) send[i] = value(me, i), expect.push_back(sum(i));
      rc = c == C::AllReduce ? strataAllReduce(send, recv, count, t, strataSum, comm)
                             : strataReduce(send, recv, count, t, strataSum, root, comm);
      if (c == C::Reduce && me != root) expect.clear();
      break;
    case C::ReduceScatter:
      for (size_t i = 0; i < cn; ++i) send[i] = value(me, i);
      for (size_t i = 0; i < count; ++i) expect.push_back(sum(me * count + i));
      if (inPlace) recv = res = a.p + me * count;
      rc = strataReduceScatter(send, recv, count, t, strataSum, comm);
      break;
    case C::AllGather:
      if (inPlace) send = a.p + me * count;
      for (size_t i = 0; i < count; ++i) send[i] = value(me, i);
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < count; ++i) expect.push_back(value(p, i));
      rc = strataAllGather(send, recv, count, t, comm);
      break;
    case C::Broadcast:
      if (me == root)
        for (size_t i = 0; i < count; ++i) send[i] = value(root, i);
      for (size_t i = 0; i < count; ++i) expect.push_back(value(root, i));
      rc = strataBroadcast(send, recv, count, t, root, comm);
      break;
    case C::AllToAll:
      for (size_t i = 0; i < cn; ++i) send[i] = value(me, i);
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < count; ++i) expect.push_back(value(p, me * count + i));
      rc = strataAllToAll(send, recv, count, t, comm);
      break;
    case C::Gather:
      if (inPlace) send = a.p + me * count;  // in place only at the root; elsewhere a plain send
      for (size_t i = 0; i < count; ++i) send[i] = value(me, i);
      if (me == root)
        for (int p = 0; p < n; ++p)
          for (size_t i = 0; i < count; ++i) expect.push_back(value(p, i));
      rc = strataGather(send, recv, count, t, root, comm);
      break;
    case C::Scatter:
      if (me == root)
        for (size_t i = 0; i < cn; ++i) send[i] = value(root, i);
      for (size_t i = 0; i < count; ++i) expect.push_back(value(root, me * count + i));
      if (inPlace && me == root) recv = res = a.p + me * count;
      else if (inPlace) recv = res = b.p;
      rc = strataScatter(send, recv, count, t, root, comm);
      break;
    case C::SendRecv: {
      const int to = (me + 1) % n, from = (me + n - 1) % n;
      for (size_t i = 0; i < count; ++i) send[i] = value(me, i), expect.push_back(value(from, i));
      recv = res = b.p;
      strataGroupStart();
      strataSend(send, count, t, to, comm);
      strataRecv(recv, count, t, from, comm);
      rc = strataGroupEnd();
      break;
    }
  }
  if (rc != strataSuccess) return rep->fail(label + ": " + strataGetLastError(comm));
  for (size_t i = 0; i < expect.size(); ++i)
    if (res[i] != expect[i])
      return rep->fail(fmt::format("{}: element {} is {}, expected {}", label, i, res[i], expect[i]));
  if (a.p[a.n] != kCanary || b.p[b.n] != kCanary) return rep->fail(label + ": wrote past the buffer");
  rep->passed++;
}

}  // namespace

void runMemAllocSweep(strataComm_t comm, bool quick, CheckReport* report) {
  // Across STRATA_SHARED_MIN_BYTES (16 KiB) and the 256 KiB chunk: several chunks per message.
  const std::vector<size_t> counts = quick ? std::vector<size_t>{7, 5000, 70001}
                                           : std::vector<size_t>{0, 7, 4096, 5000, 65536, 70001, 300007};
  for (C c : {C::AllReduce, C::Reduce, C::ReduceScatter, C::AllGather, C::Broadcast, C::AllToAll, C::Gather,
              C::Scatter, C::SendRecv})
    for (size_t count : counts)
      for (bool inPlace : {false, true}) {
        if (c == C::SendRecv && inPlace) continue;
        check(comm, c, count, inPlace, report);
      }
}

}  // namespace strata::testing
