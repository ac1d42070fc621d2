// hang_report_test.cc: the hang report's pieces without a job: call tags (packing, names, the
// mismatch message), the op-ring dump format (round trip, errors naming the line), the diagnosis
// on synthetic dumps (a rank behind, mismatched calls, a blocked send, a rank without a dump,
// nothing pending), and the op ring itself (wrap-around, what a record holds, consistent snapshots
// while the executor writes).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "collectives/call_digest.h"
#include "collectives/hang_report.h"
#include "collectives/op_ring.h"
#include "transport/call_tag.h"

using namespace strata;
using namespace strata::hang;

namespace {

OpEntry coll(uint64_t seq, const char* name, uint64_t count, const char* state, const char* op = "sum",
             long root = -1) {
  OpEntry e;
  e.seq = seq;
  e.coll = name;
  e.count = count;
  e.dtype = "fp32";
  e.op = op;
  e.root = root;
  e.algo = "ring";
  e.state = state;
  e.start = 100 + seq;
  e.end = std::string(state) == "done" ? 100.5 + seq : -1;
  e.step = std::string(state) == "done" ? 14 : 3;
  e.nsteps = 14;
  return e;
}

/// One process per rank; every rank of comm 0xabc has done collectives 1..lastDone.
std::vector<ProcessDump> job(int n, uint64_t lastDone) {
  std::vector<ProcessDump> dumps;
  for (int r = 0; r < n; ++r) {
    ProcessDump p;
    p.host = "node" + std::to_string(r / 4);
    p.pid = 1000 + r;
    p.reason = "signal";
    p.now = 1241;
    CommDump c;
    c.id = "0xabc";
    c.rank = r;
    c.nranks = n;
    c.lastSeq = lastDone;
    for (uint64_t s = lastDone > 3 ? lastDone - 3 : 1; s <= lastDone; ++s)
      c.ops.push_back(coll(s, "all_reduce", 1024, "done"));
    p.comms.push_back(c);
    dumps.push_back(p);
  }
  return dumps;
}

void enter(ProcessDump& p, const OpEntry& op) {
  p.comms[0].ops.push_back(op);
  if (!op.p2p) p.comms[0].lastSeq = op.seq;
}

std::string firstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

TEST(CallTag, PacksEveryFieldExactly) {
  CallTag t = makeCallTag(1043, kCallBroadcast, 123456789012ull, strataBfloat16, kCallOpNone, 4000000);
  CallFields f = decodeCallTag(t);
  EXPECT_EQ(f.seq, 1043u);
  EXPECT_EQ(f.code, uint32_t(kCallBroadcast));
  EXPECT_EQ(f.count, 123456789012ull);
  EXPECT_EQ(f.dtype, uint32_t(strataBfloat16));
  EXPECT_EQ(f.op, kCallOpNone);
  EXPECT_EQ(f.root, 4000000u);
  EXPECT_EQ(describeCall(t), "broadcast #1043 (count 123456789012 bf16 root 4000000)");
  EXPECT_EQ(describeCall(CallTag{}), "send/recv");
}

TEST(CallTag, CollectiveTagsLeaveOutWhatDoesNotApply) {
  CollCall a;
  a.coll = CollType::AllGather;
  a.count = 512;
  a.op = strataMax;  // ignored: all-gather does not reduce
  a.root = 3;        // ignored: no root
  CollCall b = a;
  b.op = strataSum;
  b.root = 0;
  EXPECT_EQ(collCallTag(a, 7), collCallTag(b, 7));
  EXPECT_EQ(describeCall(collCallTag(a, 7)), "all_gather #7 (count 512 fp32)");
  CollCall r;
  r.coll = CollType::Reduce;
  r.count = 10;
  r.op = static_cast<strataRedOp_t>(strataNumOps + 2);  // a user-created op: one code whatever its id
  r.root = 2;
  CollCall r2 = r;
  r2.op = static_cast<strataRedOp_t>(strataNumOps);
  EXPECT_EQ(collCallTag(r, 1), collCallTag(r2, 1));
  EXPECT_EQ(describeCall(collCallTag(r, 1)), "reduce #1 (count 10 fp32 premulsum root 2)");
  r2.root = 1;
  EXPECT_NE(collCallTag(r, 1), collCallTag(r2, 1));
  EXPECT_NE(collCallTag(r, 1), collCallTag(r, 2));  // the sequence number is part of it
}

TEST(CallTag, MismatchNamesBothRanksAndCallsLowerRankFirst) {
  CallTag ar = makeCallTag(12, kCallAllReduce, 1024, strataFloat32, strataSum, kCallNoRoot);
  CallTag ag = makeCallTag(12, kCallAllGather, 512, strataFloat32, kCallOpNone, kCallNoRoot);
  const std::string want =
      "mismatched calls: rank 0 called all_reduce #12 (count 1024 fp32 sum), rank 1 called all_gather #12 (count 512 fp32)";
  EXPECT_EQ(callMismatch(1, ag, 0, ar).message(), want);  // rank 0 received rank 1's message
  EXPECT_EQ(callMismatch(0, ar, 1, ag).message(), want);  // and the other way round
  EXPECT_EQ(callMismatch(0, ar, 1, ag).code(), strataInvalidUsage);
}

TEST(RankList, CompressesRuns) {
  EXPECT_EQ(rankList({0, 1, 2, 3, 4, 6, 7}), "0-4,6,7");
  EXPECT_EQ(rankList({5}), "5");
  EXPECT_EQ(rankList({3, 1, 2, 9, 10, 11, 12, 1}), "1-3,9-12");
  EXPECT_EQ(rankList({}), "");
}

TEST(DumpFormat, RoundTrips) {
  std::vector<ProcessDump> dumps = job(2, 5);
  OpEntry running = coll(6, "broadcast", 77, "running", "", 1);
  running.waits = {{1, true}, {0, false}};
  enter(dumps[0], running);
  OpEntry p2p;
  p2p.p2p = true;
  p2p.seq = 3;
  p2p.coll = "send/recv";
  p2p.count = 2;
  p2p.state = "failed";
  p2p.start = 1.5;
  p2p.end = 2.25;
  p2p.step = 1;
  p2p.nsteps = 1;
  dumps[0].comms[0].ops.push_back(p2p);
  dumps[0].comms[0].error = "rank 0: something\nbroke";
  dumps[0].comms[0].name = "tp group";
  const std::string text = formatDump(dumps[0]);
  ProcessDump back;
  ASSERT_TRUE(parseDump(text, &back).ok()) << text;
  EXPECT_EQ(formatDump(back), text);
  ASSERT_EQ(back.comms.size(), 1u);
  const CommDump& c = back.comms[0];
  EXPECT_EQ(c.name, "tp_group");
  EXPECT_EQ(c.error, "rank 0: something broke");
  ASSERT_EQ(c.ops.size(), 6u);
  EXPECT_EQ(c.ops[4].describe(), "broadcast #6 (count 77 fp32 root 1)");
  ASSERT_EQ(c.ops[4].waits.size(), 2u);
  EXPECT_TRUE(c.ops[4].waits[0].send);
  EXPECT_EQ(c.ops[4].waits[1].peer, 0);
  EXPECT_TRUE(c.ops[5].p2p);
  EXPECT_EQ(c.ops[5].state, "failed");
  EXPECT_DOUBLE_EQ(c.ops[5].end, 2.25);
}

TEST(DumpFormat, ErrorsNameTheLine) {
  ProcessDump d;
  Status st = parseDump("strata-dump 1 host=a pid=1 reason=signal now=1\ncomm id=0x1 rank=0 nranks=1\nop seq=1 "
                        "coll=all_reduce state=sleeping\nend\n",
                        &d);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("line 3"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("sleeping"), std::string::npos) << st.message();
  st = parseDump("strata-dump 1 host=a pid=1\ncomm id=0x1 rank=0 nranks=1\n", &d);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cut short"), std::string::npos) << st.message();
  EXPECT_FALSE(parseDump("hello\n", &d).ok());
  // Unknown lines and keys (a newer writer) are ignored.
  EXPECT_TRUE(parseDump("strata-dump 1 host=a pid=1 color=blue\nfuture x=1\ncomm id=0x1 rank=0 nranks=1\nend\n", &d).ok());
}

TEST(Diagnose, NamesTheRankThatIsBehind) {
  std::vector<ProcessDump> dumps = job(8, 1042);
  for (int r = 0; r < 8; ++r) {
    if (r == 5) continue;
    OpEntry op = coll(1043, "all_reduce", 1024, r % 2 ? "running" : "failed");
    op.waits = {{(r + 7) % 8, false}, {(r + 1) % 8, true}};
    enter(dumps[r], op);
  }
  Diagnosis d = diagnose(dumps);
  EXPECT_TRUE(d.problem);
  EXPECT_EQ(firstLine(d.text),
            "comm 0xabc (8 ranks, dumps from 8): rank 5 has not entered all_reduce #1043 (count 1024 fp32 sum); "
            "ranks 0-4,6,7 wait in it")
      << d.text;
  EXPECT_NE(d.text.find("rank 5 (host node1, pid 1005): last entered all_reduce #1042 (count 1024 fp32 sum), done "
                        "98.5 s before its dump"),
            std::string::npos)
      << d.text;
  // The blocked send of rank 4 names the peer that does not receive.
  EXPECT_NE(d.text.find("rank 4 waits in all_reduce #1043 (count 1024 fp32 sum) [ring step 3/14, failed]: receive "
                        "from rank 3, send to rank 5"),
            std::string::npos)
      << d.text;
}

TEST(Diagnose, NamesMismatchedCalls) {
  std::vector<ProcessDump> dumps = job(8, 11);
  for (int r = 0; r < 8; ++r)
    enter(dumps[r], r < 4 ? coll(12, "all_reduce", 1024, "failed") : coll(12, "all_gather", 512, "failed", ""));
  Diagnosis d = diagnose(dumps);
  EXPECT_TRUE(d.problem);
  EXPECT_EQ(firstLine(d.text),
            "comm 0xabc (8 ranks, dumps from 8): ranks call different collectives as #12: ranks 0-3 called all_reduce "
            "#12 (count 1024 fp32 sum); ranks 4-7 called all_gather #12 (count 512 fp32)")
      << d.text;
}

TEST(Diagnose, MismatchedRootsAndCountsToo) {
  std::vector<ProcessDump> dumps = job(3, 2);
  enter(dumps[0], coll(3, "broadcast", 100, "running", "", 0));
  enter(dumps[1], coll(3, "broadcast", 100, "running", "", 0));
  enter(dumps[2], coll(3, "broadcast", 100, "running", "", 2));
  EXPECT_NE(diagnose(dumps).text.find("ranks 0,1 called broadcast #3 (count 100 fp32 root 0); rank 2 called broadcast "
                                      "#3 (count 100 fp32 root 2)"),
            std::string::npos)
      << diagnose(dumps).text;
  dumps = job(2, 2);
  enter(dumps[0], coll(3, "all_reduce", 100, "running"));
  enter(dumps[1], coll(3, "all_reduce", 101, "running"));
  EXPECT_NE(diagnose(dumps).text.find("rank 0 called all_reduce #3 (count 100 fp32 sum); rank 1 called all_reduce #3 "
                                      "(count 101 fp32 sum)"),
            std::string::npos)
      << diagnose(dumps).text;
}

TEST(Diagnose, BlockedSendWhenEveryRankEntered) {
  std::vector<ProcessDump> dumps = job(4, 6);
  for (int r = 0; r < 4; ++r) {
    OpEntry op = coll(7, "all_reduce", 1 << 20, "running");
    if (r == 1) op.waits = {{2, true}};
    else op.waits = {{(r + 3) % 4, false}};
    enter(dumps[r], op);
  }
  Diagnosis d = diagnose(dumps);
  EXPECT_TRUE(d.problem);
  EXPECT_NE(firstLine(d.text).find("every rank entered all_reduce #7 (count 1048576 fp32 sum); ranks 0-3 wait in it"),
            std::string::npos)
      << d.text;
  EXPECT_NE(d.text.find("rank 1 waits in all_reduce #7 (count 1048576 fp32 sum) [ring step 3/14]: send to rank 2"),
            std::string::npos)
      << d.text;
}

TEST(Diagnose, RankWithoutADump) {
  std::vector<ProcessDump> dumps = job(4, 2);
  dumps.erase(dumps.begin() + 2);  // rank 2 wrote nothing (never asked, or gone)
  for (ProcessDump& p : dumps) {
    OpEntry op = coll(3, "all_reduce", 8, "failed");
    op.waits = {{2, false}};
    enter(p, op);
  }
  Diagnosis d = diagnose(dumps);
  EXPECT_TRUE(d.problem);
  EXPECT_EQ(firstLine(d.text),
            "comm 0xabc (4 ranks, dumps from 3): no dump from rank 2 (ranks 0,1,3 wait on it); ranks 0,1,3 wait in "
            "all_reduce #3 (count 8 fp32 sum)")
      << d.text;
}

TEST(Diagnose, NothingPendingIsNoProblem) {
  Diagnosis d = diagnose(job(4, 9));
  EXPECT_FALSE(d.problem);
  EXPECT_EQ(firstLine(d.text), "comm 0xabc (4 ranks, dumps from 4): all ranks completed all_reduce #9 (count 1024 "
                               "fp32 sum); nothing pending");
}

TEST(OpRing, KeepsTheLastOperationsWithWhatTheyWaitOn) {
  OpRing ring;
  ring.attach(0x1234, 1, 4, "world");
  const CallTag shape = makeCallTag(0, kCallAllReduce, 8, strataFloat32, strataSum, kCallNoRoot);
  for (int i = 0; i < 100; ++i) {
    uint64_t seq = 0;
    uint32_t idx = ring.beginColl(shape, static_cast<uint32_t>(Algo::Ring), 6, &seq);
    EXPECT_EQ(seq, uint64_t(i + 1));
    ring.end(idx, false);
  }
  EXPECT_EQ(ring.nextSeq(), 101u);
  uint64_t seq = 0;
  uint32_t idx = ring.beginColl(makeCallTag(0, kCallBroadcast, 5, strataInt32, kCallOpNone, 3),
                                static_cast<uint32_t>(Algo::Tree), 2, &seq);
  hang::Wait waits[] = {{0, false}, {2, true}};
  ring.noteWaiting(idx, 2, waits, 2);
  uint32_t p = ring.beginP2P(4, 1);
  (void)p;
  CommDump c = ring.snapshot();
  EXPECT_EQ(c.id, "0x1234");
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.nranks, 4);
  EXPECT_EQ(c.lastSeq, 101u);
  ASSERT_EQ(c.ops.size(), size_t(OpRing::kEntries));
  EXPECT_EQ(c.ops.front().seq, 103u - OpRing::kEntries);
  const OpEntry& b = c.ops[c.ops.size() - 2];
  EXPECT_EQ(b.describe(), "broadcast #101 (count 5 int32 root 3)");
  EXPECT_EQ(b.algo, "tree");
  EXPECT_EQ(b.state, "running");
  EXPECT_EQ(b.step, 2u);
  ASSERT_EQ(b.waits.size(), 2u);
  EXPECT_TRUE(b.waits[1].send);
  EXPECT_EQ(b.waits[1].peer, 2);
  EXPECT_TRUE(c.ops.back().p2p);
  EXPECT_EQ(c.ops.back().count, 4u);
  EXPECT_EQ(c.ops[10].state, "done");
  EXPECT_EQ(c.ops[10].describe(), fmt::format("all_reduce #{} (count 8 fp32 sum)", c.ops[10].seq));
  // The process dump holds this ring and parses back.
  ProcessDump d;
  ASSERT_TRUE(parseDump(opRingDumpText("request"), &d).ok());
  bool found = false;
  for (const CommDump& x : d.comms) found = found || (x.id == "0x1234" && x.ops.size() == OpRing::kEntries);
  EXPECT_TRUE(found);
}

TEST(OpRing, SnapshotsAreConsistentWhileTheExecutorWrites) {
  OpRing ring;
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    uint64_t i = 0;
    while (!stop.load()) {
      // Every record's count equals its sequence number: a torn read would break that.
      ++i;
      uint64_t seq = 0;
      uint32_t idx = ring.beginColl(makeCallTag(0, kCallAllReduce, i, strataFloat32, strataSum, kCallNoRoot), 0, 2, &seq);
      ring.end(idx, false);
    }
  });
  for (int k = 0; k < 2000 || ring.nextSeq() < 200000; ++k) {
    CommDump c = ring.snapshot();
    for (const OpEntry& op : c.ops) {
      if (op.seq != 0) {
        ASSERT_EQ(op.count, op.seq);
      }
    }
  }
  stop = true;
  writer.join();
}
