// schedule_sim_test.cc: proves every (algorithm, collective) schedule with the symbolic simulator for
// n = 1..64, counts {0, 1, 7, n, n+1, 3n-1} (+4096 for n <= 16), every root for n <= 8 and roots
// {0, n/2, n-1} above, in place and out of place; then checks that the simulator itself catches
// each kind of broken schedule. Run: ctest -R schedule_sim_test, or build-*/tests/schedule_sim_test.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "collectives/schedule.h"
#include "collectives/simulator.h"

namespace strata {
namespace {

constexpr Algo kAlgos[] = {Algo::Ring,    Algo::Rhd,      Algo::Tree,  Algo::Direct,
                           Algo::OneShot, Algo::Pairwise, Algo::Bruck, Algo::Linear, Algo::Hier};
constexpr CollType kColls[] = {CollType::AllReduce, CollType::ReduceScatter, CollType::AllGather,
                               CollType::Broadcast, CollType::Reduce,        CollType::AllToAll,
                               CollType::Gather,    CollType::Scatter};

bool rooted(CollType c) {
  return c == CollType::Broadcast || c == CollType::Reduce || c == CollType::Gather || c == CollType::Scatter;
}

struct Case {
  Algo algo;
  CollType coll;
};

std::vector<Case> supportedCases() {
  std::vector<Case> v;
  for (Algo a : kAlgos)
    for (CollType c : kColls)
      if (algoSupports(a, c)) v.push_back({a, c});
  return v;
}

class ScheduleSim : public ::testing::TestWithParam<Case> {};

TEST_P(ScheduleSim, ProvesEveryRankCountRootAndAliasing) {
  const Case k = GetParam();
  int failures = 0;
  for (int n = 1; n <= 64; ++n) {
    std::vector<size_t> counts = {0, 1, 7, size_t(n), size_t(n) + 1, 3 * size_t(n) - 1};
    if (n <= 16) counts.push_back(4096);
    std::set<int> roots = {0};
    if (rooted(k.coll)) {
      if (n <= 8)
        for (int r = 0; r < n; ++r) roots.insert(r);
      else
        roots = {0, n / 2, n - 1};
    }
    for (size_t count : counts)
      for (int root : roots)
        for (bool inPlace : {false, true}) {
          CollArgs a;
          a.coll = k.coll, a.nranks = n, a.root = root, a.count = count;
          const SimResult r = simulate(k.algo, a, inPlace);
          if (!r.ok) {
            ADD_FAILURE() << algoName(k.algo) << " " << collName(k.coll) << " n=" << n << " count=" << count
                          << " root=" << root << (inPlace ? " in place" : " out of place") << ": " << r.error;
            if (++failures >= 5) return;
          }
        }
  }
}

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  return std::string(algoName(info.param.algo)) + "_" + collName(info.param.coll);
}

INSTANTIATE_TEST_SUITE_P(All, ScheduleSim, ::testing::ValuesIn(supportedCases()), caseName);

CollArgs args(CollType c, int n, size_t count, int root = 0) {
  CollArgs a;
  a.coll = c, a.nranks = n, a.count = count, a.root = root;
  return a;
}

// ---- the support table ---------------------------------------------------------------------------

TEST(AlgoSupport, MatchesTheDocumentedTable) {
  using C = CollType;
  const std::set<std::pair<Algo, C>> want = {
      {Algo::Ring, C::AllReduce},     {Algo::Ring, C::ReduceScatter},  {Algo::Ring, C::AllGather},
      {Algo::Ring, C::Broadcast},     {Algo::Ring, C::Reduce},         {Algo::Rhd, C::AllReduce},
      {Algo::Rhd, C::ReduceScatter},  {Algo::Rhd, C::AllGather},       {Algo::Tree, C::Broadcast},
      {Algo::Tree, C::Reduce},        {Algo::Tree, C::AllReduce},      {Algo::Tree, C::Gather},
      {Algo::Tree, C::Scatter},       {Algo::Direct, C::AllReduce},    {Algo::Direct, C::ReduceScatter},
      {Algo::Direct, C::AllGather},   {Algo::OneShot, C::AllReduce},   {Algo::OneShot, C::Reduce},
      {Algo::OneShot, C::Broadcast},  {Algo::Pairwise, C::AllToAll},   {Algo::Bruck, C::AllToAll},
      {Algo::Linear, C::Broadcast},   {Algo::Linear, C::Reduce},       {Algo::Linear, C::Gather},
      {Algo::Linear, C::Scatter},     {Algo::Linear, C::AllToAll},     {Algo::Hier, C::AllReduce},
      {Algo::Hier, C::ReduceScatter}, {Algo::Hier, C::AllGather},      {Algo::Hier, C::Broadcast},
      {Algo::Hier, C::Reduce},        {Algo::Hier, C::AllToAll},
  };
  for (Algo a : kAlgos)
    for (C c : kColls) EXPECT_EQ(algoSupports(a, c), want.count({a, c}) == 1) << algoName(a) << " " << collName(c);
  for (C c : kColls) EXPECT_FALSE(algoSupports(Algo::Auto, c));
}

TEST(AlgoNames, RoundTrip) {
  for (Algo a : kAlgos) {
    Algo got = Algo::Auto;
    ASSERT_TRUE(parseAlgo(algoName(a), &got)) << algoName(a);
    EXPECT_EQ(got, a);
  }
  Algo got = Algo::Ring;
  EXPECT_TRUE(parseAlgo("auto", &got));
  EXPECT_EQ(got, Algo::Auto);
  EXPECT_TRUE(parseAlgo("OneShot", &got));
  EXPECT_EQ(got, Algo::OneShot);
  EXPECT_FALSE(parseAlgo("nvls", &got));
  EXPECT_FALSE(parseAlgo("", &got));
  EXPECT_STREQ(collName(CollType::AllReduce), "allreduce");
  EXPECT_STREQ(collName(CollType::AllToAll), "alltoall");
}

// ---- costs the tuner relies on -------------------------------------------------------------------

SimResult run(Algo algo, CollType coll, int n, size_t count, int root = 0) {
  CollArgs a;
  a.coll = coll, a.nranks = n, a.count = count, a.root = root;
  return simulate(algo, a, false);
}

TEST(ScheduleCost, StepsAndVolumes) {
  SimResult r = run(Algo::Ring, CollType::AllReduce, 8, 8000);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.steps, 14);
  EXPECT_EQ(r.maxSentElems, 14000u);
  EXPECT_EQ(r.depth, 14);

  r = run(Algo::Rhd, CollType::AllReduce, 8, 8000);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.steps, 6);
  EXPECT_EQ(r.maxSentElems, 14000u);  // 2 * (4000 + 2000 + 1000)
  r = run(Algo::Rhd, CollType::AllReduce, 6, 600);  // p = 4, two fold pairs
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.depth, 6);

  r = run(Algo::Tree, CollType::Broadcast, 13, 100, 5);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.depth, 4);

  r = run(Algo::Direct, CollType::AllReduce, 8, 800);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.commSteps, 2);
  EXPECT_EQ(r.steps, 5);  // + 3 local reduce levels
  EXPECT_EQ(r.depth, 2);

  r = run(Algo::Pairwise, CollType::AllToAll, 9, 10);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.steps, 8);
  r = run(Algo::Bruck, CollType::AllToAll, 9, 10);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.commSteps, 4);
  // In place: the same n-1 exchanges after one local staging step, 2 blocks of Scratch.
  r = simulate(Algo::Pairwise, args(CollType::AllToAll, 9, 10), true);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.steps, 9);
  EXPECT_EQ(r.commSteps, 8);
  EXPECT_EQ(r.maxSentElems, 80u);
  EXPECT_EQ(r.maxScratchElems, 20u);

  // Pipelined ring broadcast: P = 4096/256 = 16 chunks; a middle rank has P + 1 steps, the chain
  // P + n - 2 rounds.
  r = run(Algo::Ring, CollType::Broadcast, 8, 4096, 3);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.steps, 16 + 1);
  EXPECT_EQ(r.depth, 16 + 8 - 2);
}

TEST(ScheduleCost, WithoutValuesScalesPast64Ranks) {
  CollArgs a;
  a.coll = CollType::AllReduce, a.nranks = 512, a.count = 1 << 20;
  SimOptions o;
  o.values = false;
  const SimResult r = simulate(Algo::Ring, a, false, o);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.steps, 2 * 511);
  EXPECT_EQ(r.depth, 2 * 511);
  const SimResult t = simulate(Algo::Rhd, a, false, o);
  ASSERT_TRUE(t.ok) << t.error;
  EXPECT_EQ(t.depth, 18);
}

// ---- Schedule helpers ----------------------------------------------------------------------------

TEST(Schedule, CompactDropsEmptyStepsAndToStringNamesOps) {
  Schedule s;
  s.beginStep();
  s.send(1, in(0), 4);
  s.beginStep();
  s.send(1, in(0), 0);  // dropped: empty step
  s.beginStep();
  s.recvReduce(2, in(4), out(4), 4);
  s.beginStep();
  s.compact();
  ASSERT_EQ(s.steps.size(), 2u);
  EXPECT_EQ(s.steps[1].firstOp, 1u);
  const std::string t = s.toString();
  EXPECT_NE(t.find("send(to 1, in[0], 4)"), std::string::npos) << t;
  EXPECT_NE(t.find("recvReduce(from 2, in[4] -> out[4], 4)"), std::string::npos) << t;
}

// ---- the simulator catches broken schedules ------------------------------------------------------

void expectError(const SimResult& r, const std::string& what) {
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find(what), std::string::npos) << "error was: " << r.error;
}

TEST(Simulator, DetectsDoubleCounting) {
  std::vector<Schedule> s(2);
  for (int r = 0; r < 2; ++r) {  // each sends its input, adds it twice
    s[r].send(1 - r, in(0), 4);
    s[r].recvReduce(1 - r, in(0), out(0), 4);
    s[r].beginStep();
    s[r].reduce(out(0), in(0), out(0), 4);
  }
  expectError(simulateSchedules(args(CollType::AllReduce, 2, 4), false, s), "double counted");
}

TEST(Simulator, DetectsIndexMismatch) {
  std::vector<Schedule> s(2);
  for (int r = 0; r < 2; ++r) {
    s[r].send(1 - r, in(0), 2);
    s[r].recvReduce(1 - r, in(2), out(0), 2);
  }
  expectError(simulateSchedules(args(CollType::AllReduce, 2, 4), false, s), "index mismatch");
}

TEST(Simulator, DetectsDeadlockUnderRendezvous) {
  std::vector<Schedule> s(2);
  for (int r = 0; r < 2; ++r) {  // both receive first: fine with buffering, a deadlock here
    s[r].recvReduce(1 - r, in(0), out(0), 4);
    s[r].beginStep();
    s[r].send(1 - r, in(0), 4);
  }
  expectError(simulateSchedules(args(CollType::AllReduce, 2, 4), false, s), "deadlock");
}

TEST(Simulator, DetectsCountMismatchAndUnmatchedOps) {
  std::vector<Schedule> s(2);
  s[0].send(1, in(0), 4);
  s[1].recv(0, out(0), 3);
  expectError(simulateSchedules(args(CollType::Broadcast, 2, 4), false, s), "differs from the matching");
  std::vector<Schedule> t(2);
  t[0].send(1, in(0), 4);
  expectError(simulateSchedules(args(CollType::Broadcast, 2, 4), false, t), "no matching receive");
}

TEST(Simulator, DetectsConflictsInsideAStep) {
  std::vector<Schedule> s(2);
  s[0].copy(in(0), out(0), 4);
  s[0].send(1, out(0), 4);  // reads what the copy writes
  s[1].recv(0, out(0), 4);
  expectError(simulateSchedules(args(CollType::Broadcast, 2, 4), false, s), "of the same step writes");
  std::vector<Schedule> t(2);
  t[0].copy(in(0), out(0), 4);
  t[1].recv(0, out(0), 4);
  t[1].recv(0, out(2), 2);  // overlapping writes
  t[0].send(1, in(0), 4);
  t[0].send(1, in(0), 2);
  expectError(simulateSchedules(args(CollType::Broadcast, 2, 4), false, t), "also writes");
  std::vector<Schedule> u(1);
  u[0].reduce(in(0), in(1), out(1), 3);  // partial overlap of dst and src inside one op (in place)
  expectError(simulateSchedules(args(CollType::AllReduce, 1, 4), true, u), "partially overlaps");
}

TEST(Simulator, DetectsMissingBuffersAndInputWrites) {
  std::vector<Schedule> s(2);
  s[0].copy(in(0), out(0), 4);
  s[1].copy(in(0), out(0), 4);  // non-roots of Broadcast have no Input
  expectError(simulateSchedules(args(CollType::Broadcast, 2, 4), false, s), "which this rank does not have");
  std::vector<Schedule> t(2);
  t[1].send(0, in(0), 4);
  t[1].beginStep();
  t[1].copy(in(0), out(0), 4);  // non-roots of Reduce have no Output
  t[0].recvReduce(1, in(0), out(0), 4);
  expectError(simulateSchedules(args(CollType::Reduce, 2, 4), false, t), "Output, which this rank does not have");
  std::vector<Schedule> u(1);
  u[0].copy(out(0), in(0), 4);
  expectError(simulateSchedules(args(CollType::AllReduce, 1, 4), false, u), "read-only");
  std::vector<Schedule> v(1);
  v[0].copy(in(0), scr(0), 4);  // no scratchElems
  expectError(simulateSchedules(args(CollType::AllReduce, 1, 4), false, v), "Scratch");
}

TEST(Simulator, DetectsUninitialisedAndWrongOutput) {
  std::vector<Schedule> s(1);
  s[0].copy(in(0), out(0), 3);  // Output[3] never written
  expectError(simulateSchedules(args(CollType::AllReduce, 1, 4), false, s), "Output[3]: expected element 3");
  std::vector<Schedule> t(1);
  t[0].scratchElems = 4;
  t[0].copy(scr(0), out(0), 4);
  expectError(simulateSchedules(args(CollType::AllReduce, 1, 4), false, t), "first uninitialised read");
  std::vector<Schedule> u(2);  // all-gather that forgets its own block
  u[0].send(1, in(0), 2);
  u[0].recv(1, out(2), 2);
  u[1].send(0, in(0), 2);
  u[1].recv(0, out(0), 2);
  expectError(simulateSchedules(args(CollType::AllGather, 2, 2), false, u), "rank 0 Output[0]");
  // The same schedule is right in place: the own block is already there.
  EXPECT_TRUE(simulateSchedules(args(CollType::AllGather, 2, 2), true, u).ok);
}

TEST(Simulator, DetectsRanksReducingInDifferentOrders) {
  // Three ranks gather everything (one-shot) but rank 2 associates differently.
  std::vector<Schedule> s(3);
  for (int r = 0; r < 3; ++r) {
    s[r].scratchElems = 3;
    for (int k = 1; k < 3; ++k) {
      s[r].send((r + k) % 3, in(0), 1);
      s[r].recv((r + 3 - k) % 3, scr((r + 3 - k) % 3), 1);
    }
    auto loc = [&](int j) { return j == r ? in(0) : scr(j); };
    s[r].beginStep();
    if (r < 2)
      s[r].reduce(loc(0), loc(1), scr(r), 1);
    else
      s[r].reduce(loc(1), loc(2), scr(r), 1);
    s[r].beginStep();
    s[r].reduce(scr(r), r < 2 ? loc(2) : loc(0), out(0), 1);
  }
  expectError(simulateSchedules(args(CollType::AllReduce, 3, 1), false, s), "different order");
}

TEST(Simulator, RejectsReductionsInDataMovement) {
  std::vector<Schedule> s(2);
  s[0].send(1, in(0), 2);
  s[1].recvReduce(0, in(0), out(0), 2);
  s[1].beginStep();
  s[1].copy(in(0), out(2), 2);
  expectError(simulateSchedules(args(CollType::AllToAll, 2, 2), false, s), "non-reduction");
}

// ---- in-place all-to-all -------------------------------------------------------------------------

// Pairwise builds an in-place schedule that stages one block per pair of shifts, never the input.
TEST(AllToAllInPlace, PairwiseStagesBlocksNotTheInput) {
  for (int n = 1; n <= 64; ++n)
    for (size_t count : {size_t(1), size_t(5)}) {
      CollArgs a = args(CollType::AllToAll, n, count);
      a.inPlace = true;
      for (int rank = 0; rank < n; ++rank) {
        a.rank = rank;
        Schedule s;
        buildSchedule(Algo::Pairwise, a, &s);
        ASSERT_TRUE(s.inPlace);
        size_t copied = 0, sends = 0;
        for (const Op& op : s.ops) {
          if (op.code == OpCode::Copy) copied += op.count;
          if (op.code == OpCode::Send) {
            ++sends;
            EXPECT_EQ(op.count, count);
          }
          EXPECT_FALSE(op.code == OpCode::Copy && op.dst.buf != BufId::Scratch) << "copies only stage";
        }
        EXPECT_EQ(copied, static_cast<size_t>(n / 2) * count) << "n=" << n;
        EXPECT_EQ(sends, static_cast<size_t>(n - 1));
        EXPECT_EQ(s.steps.size(), n == 1 ? 0u : static_cast<size_t>(n));
        EXPECT_EQ(s.scratchElems, n == 1 ? 0 : (n <= 3 ? 1 : 2) * count);
      }
      const SimResult r = simulate(Algo::Pairwise, args(CollType::AllToAll, n, count), true);
      EXPECT_TRUE(r.ok) << "n=" << n << ": " << r.error;
    }
}

// Bruck and Linear ignore CollArgs::inPlace (the executor stages their input); Hier where it falls
// back to the flat pairwise exchange (one node, uneven nodes) gets Pairwise's in-place schedule; out
// of place nothing changes.
TEST(AllToAllInPlace, OtherAlgorithmsAndOutOfPlaceAreUnchanged) {
  auto build = [](Algo algo, bool inPlace) {
    CollArgs a = args(CollType::AllToAll, 6, 3);
    a.rank = 2;
    a.inPlace = inPlace;
    Schedule s;
    buildSchedule(algo, a, &s);
    return s;
  };
  for (Algo algo : {Algo::Bruck, Algo::Linear}) {
    EXPECT_FALSE(build(algo, true).inPlace) << algoName(algo);
    EXPECT_EQ(build(algo, true).toString(), build(algo, false).toString()) << algoName(algo);
  }
  EXPECT_FALSE(build(Algo::Pairwise, false).inPlace);
  for (bool inPlace : {false, true}) {
    EXPECT_EQ(build(Algo::Hier, inPlace).inPlace, inPlace);
    EXPECT_EQ(build(Algo::Hier, inPlace).toString(), build(Algo::Pairwise, inPlace).toString());
  }
}

TEST(Simulator, AliasesInPlaceAllToAllSchedules) {
  std::vector<Schedule> ip(4), oop(4);
  CollArgs a = args(CollType::AllToAll, 4, 3);
  for (int r = 0; r < 4; ++r) {
    a.rank = r;
    a.inPlace = true;
    buildSchedule(Algo::Pairwise, a, &ip[r]);
    a.inPlace = false;
    buildSchedule(Algo::Pairwise, a, &oop[r]);
  }
  EXPECT_TRUE(simulateSchedules(args(CollType::AllToAll, 4, 3), true, ip).ok);
  expectError(simulateSchedules(args(CollType::AllToAll, 4, 3), false, ip), "run out of place");
  // The out-of-place schedule on aliased buffers: with n = 4 shift 2 sends and receives one block in
  // one step; with n = 5 it sends blocks it already received into.
  for (Schedule& s : oop) s.inPlace = true;
  expectError(simulateSchedules(args(CollType::AllToAll, 4, 3), true, oop), "of the same step writes");
  oop[1].inPlace = false;
  expectError(simulateSchedules(args(CollType::AllToAll, 4, 3), true, oop), "disagree");
  std::vector<Schedule> odd(5);
  a = args(CollType::AllToAll, 5, 3);
  for (int r = 0; r < 5; ++r) {
    a.rank = r;
    buildSchedule(Algo::Pairwise, a, &odd[r]);
    odd[r].inPlace = true;
  }
  expectError(simulateSchedules(args(CollType::AllToAll, 5, 3), true, odd), "expected element");
  std::vector<Schedule> ar(1);
  ar[0].copy(in(0), out(0), 1);
  ar[0].inPlace = true;
  expectError(simulateSchedules(args(CollType::AllReduce, 1, 1), true, ar), "non-AllToAll");
}

}  // namespace
}  // namespace strata
