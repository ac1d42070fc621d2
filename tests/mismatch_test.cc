// mismatch_test.cc: ranks that call different collectives, counts, dtypes, ops or roots get an
// error naming both ranks and both calls (the call tag every message carries,
// transport/call_tag.h) instead of corrupt data or a hang: ranks as threads (pointer channels) and
// as forked processes (shared-memory slots and tcp). A rank whose own call happened to complete
// gets the error from its next call. Calls that only differ where it does not matter (the scalar of
// a pre-multiplied sum) still run.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "strata/strata.h"
#include "support/thread_ranks.h"

using namespace strata::testing;

namespace {

enum class Kind { AllReduce, AllGather, Broadcast, Reduce };

struct Call {
  Kind kind = Kind::AllReduce;
  size_t count = 1024;
  strataDataType_t dtype = strataFloat32;
  strataRedOp_t op = strataSum;
  int root = 0;
};

strataResult_t run(const Call& c, strataComm_t comm, int n) {
  std::vector<char> in(c.count * 8 * static_cast<size_t>(n) + 64, 1), out(in.size(), 0);
  switch (c.kind) {
    case Kind::AllReduce: return strataAllReduce(in.data(), out.data(), c.count, c.dtype, c.op, comm);
    case Kind::AllGather: return strataAllGather(in.data(), out.data(), c.count, c.dtype, comm);
    case Kind::Broadcast: return strataBroadcast(in.data(), out.data(), c.count, c.dtype, c.root, comm);
    case Kind::Reduce: return strataReduce(in.data(), out.data(), c.count, c.dtype, c.op, c.root, comm);
  }
  return strataInternalError;
}

/// Rank r: `warmup` matching all-reduces, then calls[r], then (if that succeeded) one more
/// all-reduce. Returns the first error's text ("" when everything succeeded).
std::string rankBody(strataComm_t comm, int r, int n, int warmup, const std::vector<Call>& calls) {
  float x = 1;
  for (int i = 0; i < warmup; ++i)
    if (strataAllReduce(&x, &x, 1, strataFloat32, strataSum, comm) != strataSuccess)
      return std::string("warm-up failed: ") + strataGetLastError(comm);
  if (run(calls[r], comm, n) != strataSuccess) return strataGetLastError(comm);
  if (strataAllReduce(&x, &x, 1, strataFloat32, strataSum, comm) != strataSuccess) return strataGetLastError(comm);
  return "";
}

std::vector<std::string> threadRanks(int n, int warmup, const std::vector<Call>& calls) {
  std::vector<std::string> errors(static_cast<size_t>(n));
  runThreadRanks(n, [&](strataComm_t comm, int r) { errors[r] = rankBody(comm, r, n, warmup, calls); });
  return errors;
}

/// The same with forked rank processes; each sends its error text back through a pipe.
std::vector<std::string> processRanks(int n, int warmup, const std::vector<Call>& calls) {
  strataUniqueId id;
  EXPECT_EQ(strataGetUniqueId(&id), strataSuccess);
  std::vector<pid_t> pids;
  std::vector<int> fds;
  for (int r = 0; r < n; ++r) {
    int p[2];
    EXPECT_EQ(pipe(p), 0);
    pid_t pid = fork();
    if (pid == 0) {
      alarm(60);
      close(p[0]);
      strataComm_t comm = nullptr;
      std::string err = strataCommInitRank(&comm, n, id, r) == strataSuccess ? rankBody(comm, r, n, warmup, calls)
                                                                             : "init failed";
      ssize_t w = write(p[1], err.data(), err.size());
      (void)w;
      close(p[1]);
      // Linger: a process that exits at once may reset its tcp connections before the peers
      // read its failure notice (they would see "connection reset" without the reason).
      usleep(500000);
      _exit(0);
    }
    close(p[1]);
    pids.push_back(pid);
    fds.push_back(p[0]);
  }
  std::vector<std::string> errors;
  for (int r = 0; r < n; ++r) {
    std::string s;
    char buf[4096];
    ssize_t k;
    while ((k = read(fds[r], buf, sizeof(buf))) > 0) s.append(buf, static_cast<size_t>(k));
    close(fds[r]);
    int st = 0;
    waitpid(pids[r], &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "rank " << r << " status " << st;
    errors.push_back(s);
  }
  return errors;
}

void expectEveryRankNames(const std::vector<std::string>& errors, const std::vector<std::string>& parts) {
  for (size_t r = 0; r < errors.size(); ++r) {
    EXPECT_FALSE(errors[r].empty()) << "rank " << r << " got no error";
    for (const std::string& p : parts)
      EXPECT_NE(errors[r].find(p), std::string::npos) << "rank " << r << ": '" << p << "' not in: " << errors[r];
  }
}

Call allGather(size_t count) {
  Call c;
  c.kind = Kind::AllGather;
  c.count = count;
  return c;
}

struct Case {
  const char* name;
  int n, warmup;
  std::vector<Call> calls;
  std::vector<std::string> parts;  ///< every rank's error contains each
};

std::vector<Case> cases() {
  Call ar;
  Call ar1000 = ar;
  ar1000.count = 1000;
  Call arInt = ar;
  arInt.dtype = strataInt32;  // same bytes: without the tag this would reduce floats as ints
  Call arMax = ar;
  arMax.op = strataMax;
  Call bc0;
  bc0.kind = Kind::Broadcast;
  bc0.count = 4096;
  Call bc1 = bc0;
  bc1.root = 1;
  return {
      {"Collectives", 2, 0, {ar, allGather(512)},
       {"rank 0 called all_reduce #1 (count 1024 fp32 sum)", "rank 1 called all_gather #1 (count 512 fp32)"}},
      {"Counts", 2, 3, {ar, ar1000},
       {"rank 0 called all_reduce #4 (count 1024 fp32 sum)", "rank 1 called all_reduce #4 (count 1000 fp32 sum)"}},
      {"Dtypes", 2, 1, {arInt, ar},
       {"rank 0 called all_reduce #2 (count 1024 int32 sum)", "rank 1 called all_reduce #2 (count 1024 fp32 sum)"}},
      // Three ranks: with warm-up, so that every connection is open and a failing rank's notice
      // reaches every peer (a connection still being opened cannot carry it).
      {"Ops", 3, 1, {ar, ar, arMax}, {"called all_reduce #2 (count 1024 fp32 sum)", "rank 2 called all_reduce #2 (count 1024 fp32 max)"}},
      // Different roots deadlock rather than exchange a mismatched message: the stray message
      // of the same collective number is found by the wait's slow path (on open connections).
      {"Roots", 3, 1, {bc0, bc0, bc1},
       {"called broadcast #2 (count 4096 fp32 root 0)", "rank 2 called broadcast #2 (count 4096 fp32 root 1)"}},
  };
}

class ThreadMismatch : public ::testing::TestWithParam<Case> {};

TEST_P(ThreadMismatch, EveryRankGetsAnErrorNamingBothCalls) {
  ScopedEnv timeout("STRATA_TIMEOUT", "20");
  const Case& c = GetParam();
  expectEveryRankNames(threadRanks(c.n, c.warmup, c.calls), c.parts);
}

INSTANTIATE_TEST_SUITE_P(Calls, ThreadMismatch, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return std::string(info.param.name); });

struct ProcessCase {
  const char* transport;
  Case c;
};

class ProcessMismatch : public ::testing::TestWithParam<ProcessCase> {};

TEST_P(ProcessMismatch, EveryRankGetsAnErrorNamingBothCalls) {
  ScopedEnv transport("STRATA_TRANSPORT", GetParam().transport);
  ScopedEnv timeout("STRATA_TIMEOUT", "20");
  const Case& c = GetParam().c;
  expectEveryRankNames(processRanks(c.n, c.warmup, c.calls), c.parts);
}

std::vector<ProcessCase> processCases() {
  std::vector<ProcessCase> out;
  for (const char* t : {"local", "tcp"})
    for (const Case& c : cases()) out.push_back(ProcessCase{t, c});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Calls, ProcessMismatch, ::testing::ValuesIn(processCases()), [](const auto& info) {
  return std::string(info.param.transport) + "_" + info.param.c.name;
});

TEST(NoMismatch, ArgumentsThatDoNotMatterMayDiffer) {
  // Each rank's pre-multiplied-sum factor is its own: the op is "premulsum" on every rank.
  runThreadRanks(3, [](strataComm_t comm, int r) {
    std::vector<float> in(4, 1.0f), out(12, 0.0f);
    EXPECT_EQ(strataAllGather(in.data(), out.data(), 4, strataFloat32, comm), strataSuccess) << strataGetLastError(comm);
    strataRedOp_t op;
    const float factor = static_cast<float>(r + 1);
    ASSERT_EQ(strataRedOpCreatePreMulSum(&op, &factor, strataFloat32, comm), strataSuccess);
    EXPECT_EQ(strataAllReduce(in.data(), out.data(), 4, strataFloat32, op, comm), strataSuccess)
        << strataGetLastError(comm);
    EXPECT_EQ(out[0], 6.0f);  // 1*1 + 1*2 + 1*3
    strataRedOpDestroy(op, comm);
  });
}

}  // namespace
