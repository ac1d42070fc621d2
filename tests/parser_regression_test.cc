// parser_regression_test.cc: the inputs the fuzzers (tests/fuzz, scripts/fuzz.sh) found crashing
// or misread a parser of outside input, each fed to the parser again: it must now give a clean
// error or the right value. One test per finding; the comment names the fuzz target and what it
// reported before the fix.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "collectives/hang_report.h"
#include "collectives/job_topology.h"
#include "collectives/launch_env.h"
#include "topology/topo_file.h"
#include "transport/bootstrap.h"
#include "transport/bootstrap_wire.h"
#include "transport/call_tag.h"
#include "transport/config.h"
#include "transport/tcp_connection.h"

using namespace strata;

namespace {

#define EXPECT_CONTAINS(s, part) EXPECT_NE(std::string(s).find(part), std::string::npos) << (s)

std::function<const char*(const char*)> lookupIn(const std::map<std::string, std::string>& env) {
  return [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

}  // namespace

// fuzz_call_tag: a peer's call tag whose 6-bit dtype field holds a value strataDataType_t does not
// have (input d5 53 0a f5 53: dtype 61) was cast to the enum to be named: UBSan, "load of value
// 61, which is not a valid value for type 'strataDataType_t'". Now it is named as a number.
TEST(ParserRegression, CallTagWithUnknownDtype) {
  const unsigned char input[] = {0xd5, 0x53, 0x0a, 0xf5, 0x53};
  CallTag sent;
  std::memcpy(&sent.word, input, sizeof(input));
  ASSERT_EQ(decodeCallTag(sent).dtype, 61u);
  const std::string d = describeCall(sent);
  EXPECT_CONTAINS(d, "dtype?61");
  const Status st = callMismatch(1, sent, 0, makeCallTag(1, kCallAllReduce, 4, strataFloat32, 0, kCallNoRoot));
  EXPECT_TRUE(isCallMismatch(st)) << st.message();
  EXPECT_CONTAINS(st.message(), "dtype?61");
}

// fuzz_tcp_frames: the same tag arriving in a tcp chunk header reached that cast through the
// receive's mismatch error. Now the receive fails naming both calls.
TEST(ParserRegression, TcpChunkWithUnknownDtypeFailsCleanly) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  const CallTag mine = makeCallTag(1, kCallAllReduce, 2, strataFloat32, 0, kCallNoRoot);
  const CallTag theirs = makeCallTag(1, kCallAllReduce, 2, /*dtype=*/36, 0, kCallNoRoot);
  const TcpConnection::Header h{0x43484e4b, 0, 0, 8, 8, theirs};
  std::string frame(reinterpret_cast<const char*>(&h), sizeof(h));
  frame += std::string(8, 'x');
  ASSERT_EQ(::write(sv[1], frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
  ::shutdown(sv[1], SHUT_WR);
  std::vector<char> dst(8);
  Transfer t = Transfer::recvOf(dst.data(), dst.size());
  t.call = mine;
  Status st;
  {
    TcpConnection conn(0, 1, {sv[0]}, 4096);
    conn.postRecv(&t);
    for (int i = 0; i < 100 && st.ok() && !t.complete; ++i) {
      bool progressed = false;
      st = conn.progress(&progressed);
    }
  }
  ::close(sv[1]);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(isCallMismatch(st)) << st.message();
  EXPECT_CONTAINS(st.message(), "dtype?36");
}

// fuzz_bootstrap_wire: a join reply whose status is not a strataResult_t (input "=\n": status 10,
// one past the last code) became one by a cast (UB; the C API would return a code callers cannot
// know). Now it is a remote error naming the value.
TEST(ParserRegression, JoinReplyWithUnknownStatus) {
  for (int32_t status : {10, 99, -1, 0x7fffffff}) {
    const wire::JoinReply r{status, 0, 5, 0};
    const Status st = wire::joinReplyError(r, "hello");
    EXPECT_EQ(st.code(), strataRemoteError) << status;
    EXPECT_CONTAINS(st.message(), "unknown status " + std::to_string(status));
  }
  const Status known = wire::joinReplyError(wire::JoinReply{strataTimeout, 0, 4, 0}, "late");
  EXPECT_EQ(known.code(), strataTimeout);
  EXPECT_EQ(known.message(), "late");
}

// fuzz_config: STRATA_SPIN_US='0000000000000000000000000000000000008000000000000000000000000' (about
// 8e29) was taken, and so (found reading the parser then) were NaN and infinity for any number of
// seconds: timeouts that overflow the clocks they are added to (a float-to-integer conversion that
// is UB) or never expire. Now every such value is refused naming the variable.
TEST(ParserRegression, ConfigRefusesNonFiniteAndHugeNumbers) {
  const std::string fuzzed = "0000000000000000000000000000000000008000000000000000000000000";
  for (const char* var : {"STRATA_SPIN_US", "STRATA_TIMEOUT", "STRATA_JOIN_TIMEOUT", "STRATA_VCLUSTER_RAIL_RATE"}) {
    for (const std::string& value : {fuzzed, std::string("nan"), std::string("inf"), std::string("-nan"),
                                     std::string("1e30")}) {
      const std::map<std::string, std::string> env{{var, value}};
      Config c;
      const Status st = parseConfig(lookupIn(env), &c);
      EXPECT_FALSE(st.ok()) << var << "=" << value;
      EXPECT_CONTAINS(st.message(), var);
    }
  }
  const std::map<std::string, std::string> ok{{"STRATA_TIMEOUT", "1e6"}, {"STRATA_VCLUSTER_RAIL_RATE", "4e11"}};
  Config c;
  ASSERT_TRUE(parseConfig(lookupIn(ok), &c).ok());
  EXPECT_EQ(c.timeoutSec, 1e6);
  EXPECT_EQ(c.vclusterRailBitsPerSec, 4e11);
}

// Found reading the parser while writing fuzz_config's checks: a size with a K/M suffix that wraps 64 bits
// ('18014398509481984K' = 2^64 became 0) and a negative size behind a space (' -1' became 2^64 - 1)
// were taken. Now sizes are digits with an optional suffix, without wrapping.
TEST(ParserRegression, ConfigRefusesWrappedAndNegativeSizes) {
  for (const char* value : {"18014398509481984K", "17592186044416M", " -1", "-1", "+5", " 5", ""}) {
    const std::map<std::string, std::string> env{{"STRATA_CMA_MIN_BYTES", value}};
    Config c;
    const Status st = parseConfig(lookupIn(env), &c);
    if (*value == '\0') {
      EXPECT_TRUE(st.ok());  // empty is unset
      continue;
    }
    EXPECT_FALSE(st.ok()) << "'" << value << "' taken as " << c.cmaMinBytes;
    EXPECT_CONTAINS(st.message(), "STRATA_CMA_MIN_BYTES");
  }
  const std::map<std::string, std::string> ok{{"STRATA_CMA_MIN_BYTES", "17592186044415M"}, {"STRATA_TCP_SOCKETS", "16"}};
  Config c;
  ASSERT_TRUE(parseConfig(lookupIn(ok), &c).ok());
  EXPECT_EQ(c.cmaMinBytes, size_t{17592186044415} << 20);
  EXPECT_EQ(c.tcpSockets, 16);
}

// fuzz_rank_infos: a peer's RankInfo whose node name (or hostname) fills its 64 bytes without a
// terminating zero made layoutFromInfos read past it (ASan: heap-buffer-overflow in strlen, off the
// end of the table for the last rank). Now the name is read up to the array's end.
TEST(ParserRegression, LayoutFromUnterminatedNames) {
  std::vector<RankInfo> infos(2);
  for (size_t r = 0; r < infos.size(); ++r) {
    infos[r].rank = static_cast<int>(r);
    infos[r].hostHash = 7;
    infos[r].processHash = r;
    std::memset(infos[r].hostname, 'h', sizeof(infos[r].hostname));
  }
  std::memset(infos[1].nodeName, 'n', sizeof(infos[1].nodeName));
  infos[1].nodeHash = 9;
  const topology::CommLayout layout = layoutFromInfos(infos);
  ASSERT_EQ(layout.nnodes(), 2);
  EXPECT_EQ(layout.nodeName(0), std::string(64, 'h'));
  EXPECT_EQ(layout.nodeName(1), std::string(64, 'n'));
}

// fuzz_launch_env: under strata-run variables, STRATA_RANK=9 STRATA_WORLD_SIZE=4 was accepted
// (rank 9 of 4; the C API refused it later, naming CommInitRank instead of the environment).
TEST(ParserRegression, StrataRunRankOutOfRange) {
  const std::string id = uniqueIdToHex(encodeUniqueId(UniqueIdData{}));
  for (const auto& [rank, size] : std::vector<std::pair<const char*, const char*>>{{"9", "4"}, {"4", "4"}, {"0", "0"}}) {
    const std::map<std::string, std::string> env{{"STRATA_RANK", rank}, {"STRATA_WORLD_SIZE", size}};
    LaunchVars v;
    const Status st = parseLaunchVars(lookupIn(env), id, 0, &v);
    EXPECT_FALSE(st.ok()) << rank << " of " << size;
    EXPECT_CONTAINS(st.message(), "strata-run environment gives rank");
  }
  const std::map<std::string, std::string> env{{"STRATA_RANK", "3"}, {"STRATA_WORLD_SIZE", "4"}};
  LaunchVars v;
  ASSERT_TRUE(parseLaunchVars(lookupIn(env), id, 0, &v).ok());
  EXPECT_TRUE(v.haveId);
  EXPECT_EQ(v.rank, 3);
  EXPECT_EQ(v.nranks, 4);
}

// fuzz_launch_env: the Slurm node list "[[" gave the root host "[" (list syntax taken for a name).
// Reviewing that parser also showed that text after a bracket was dropped: Slurm writes
// "rack[1-2]-node[01-04]", whose first host is rack1-node01, not rack1.
TEST(ParserRegression, FirstSlurmHost) {
  EXPECT_EQ(firstSlurmHost("[["), "");
  EXPECT_EQ(firstSlurmHost("node[01-04,07],gpu2"), "node01");
  EXPECT_EQ(firstSlurmHost("rack[1-2]-node[01-04]"), "rack1-node01");
  EXPECT_EQ(firstSlurmHost("n[3]x,y"), "n3x");
  EXPECT_EQ(firstSlurmHost("gpu2,gpu3"), "gpu2");
  EXPECT_EQ(firstSlurmHost("a[1"), "a1");
  EXPECT_EQ(firstSlurmHost(""), "");
  const std::map<std::string, std::string> env{{"SLURM_PROCID", "0"},
                                               {"SLURM_NTASKS", "2"},
                                               {"SLURM_STEP_NODELIST", "[["}};
  LaunchVars v;
  const Status st = parseLaunchVars(lookupIn(env), "", 0, &v);
  EXPECT_FALSE(st.ok());
  EXPECT_CONTAINS(st.message(), "cannot tell where rank 0 is");
}

// fuzz_topo_file: 110 bytes of topology file placed 2^20 ranks on each of 2^20 nodes: the reader
// went for 2^40 entries (libFuzzer: out-of-memory, malloc(2147483648)). Likewise "count" copies a
// node type without bound on its size. Both are now refused before anything is allocated.
TEST(ParserRegression, TopologyFileAmplification) {
  topology::Cluster c;
  Status st = topology::parseTopologyJson(
      R"({"version":1,"node_types":{"t":{}},"nodes":{"count":1048576,"type":"t"},"placement":{"ranks_per_node":1048576}})",
      "big.json", ".", &c);
  ASSERT_FALSE(st.ok());
  EXPECT_CONTAINS(st.message(), "placement.ranks_per_node");
  EXPECT_CONTAINS(st.message(), "more than 4194304 ranks");
  std::string nics;
  for (int i = 0; i < 64; ++i) nics += std::string(i ? "," : "") + R"({"name": "mlx5_)" + std::to_string(i) + R"("})";
  st = topology::parseTopologyJson(R"({"version":1,"node_types":{"t":{"nics":[)" + nics +
                                       R"(]}},"nodes":{"count":1048576,"type":"t"}})",
                                   "wide.json", ".", &c);
  ASSERT_FALSE(st.ok());
  EXPECT_CONTAINS(st.message(), "nodes.count");
  EXPECT_CONTAINS(st.message(), "at most 256 MiB");
  // Large real clusters still read: 4096 nodes of 8 GPUs, 8 ranks each.
  std::string gpus;
  for (int i = 0; i < 8; ++i) gpus += std::string(i ? "," : "") + R"({"name": "H100", "memory_GiB": 80})";
  st = topology::parseTopologyJson(R"({"version":1,"node_types":{"t":{"gpus":[)" + gpus +
                                       R"(]}},"nodes":{"count":4096,"type":"t"},"placement":{"ranks_per_node":8}})",
                                   "dgx.json", ".", &c);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(c.nodes.size(), 4096u);
  EXPECT_EQ(c.rankNode.size(), 4096u * 8);
}

// fuzz_hang_report: a dump's "comm ... nranks=42222222222223" was parsed into an int (truncated to
// -1601264753, which the dump's own writer then wrote back unreadable), and nranks=2147483647 was
// taken as it is: the diagnosis walks every rank, so strata-diagnose on such a dump ran 2^31 steps
// and collected gigabytes of missing ranks. Now rank counts above 2^22 and wait peers outside
// [0, 2^22) are refused naming the line.
TEST(ParserRegression, HangDumpRankCounts) {
  const std::string head = "strata-dump 1 host=node1 pid=4242 reason=signal now=1234.500000\n";
  for (const char* nranks : {"42222222222223", "2147483647", "4194305"}) {
    hang::ProcessDump d;
    const Status st = hang::parseDump(head + "comm id=0x2a3b rank=1 nranks=" + nranks + " last_seq=0 name=-\nend\n", &d);
    ASSERT_FALSE(st.ok()) << nranks;
    EXPECT_CONTAINS(st.message(), "line 2");
  }
  hang::ProcessDump d;
  Status st = hang::parseDump(head + "comm id=0x1 rank=0 nranks=2 last_seq=1 name=-\n"
                                     "op seq=1 coll=all_reduce count=1 dtype=fp32 op=sum root=- algo=ring state=running "
                                     "start=1 end=- step=1/2 wait=recv:4294967297\nend\n",
                              &d);
  ASSERT_FALSE(st.ok());
  EXPECT_CONTAINS(st.message(), "bad wait entry");
  st = hang::parseDump(head + "comm id=0x1 rank=0 nranks=4194304 last_seq=0 name=-\nend\n", &d);
  ASSERT_TRUE(st.ok()) << st.message();
  const hang::Diagnosis diag = hang::diagnose({d});
  EXPECT_TRUE(diag.problem);
  EXPECT_CONTAINS(diag.text, "no dump from ranks 1-4194303");
}
