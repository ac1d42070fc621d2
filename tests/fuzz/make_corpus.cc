// make_corpus: writes the seed corpus of every fuzz target (tests/fuzz/corpus/<name>/): valid and
// near-valid inputs built from the real structs and formats, so that they stay exact. Not run by
// CI: the files it wrote are in the repository; run it again after a wire format changes:
//   build-fuzz/fuzz_make_corpus tests/fuzz/corpus
// The regress-* files beside them are not written here: they are the inputs the fuzzers found
// crashing (tests/parser_regression_test.cc replays each finding), kept so that every run starts
// from them.
#include <sys/stat.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "collectives/hang_report.h"
#include "transport/bootstrap.h"
#include "transport/bootstrap_wire.h"
#include "transport/call_tag.h"
#include "transport/config.h"
#include "transport/ib/ib_handshake.h"
#include "transport/tcp_connection.h"

using namespace strata;

namespace {

std::string root;

template <typename T>
std::string raw(const T& v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof(v));
}

void put(const std::string& target, const std::string& name, const std::string& bytes) {
  const std::string dir = root + "/" + target;
  mkdir(root.c_str(), 0755);
  mkdir(dir.c_str(), 0755);
  std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
}

// A selector byte for entry `index` of a table of `n`, never '\n' (the targets split lines on it).
char selector(size_t index, size_t n) {
  size_t b = index;
  while (b == '\n') b += n;
  return static_cast<char>(b);
}

void uniqueIds() {
  UniqueIdData d;
  d.rootAddr = 0x0100007f;
  d.rootPort = 0x3930;
  for (int i = 0; i < 16; ++i) d.secret[i] = static_cast<uint8_t>(i * 17);
  d.commTag = 0x1122334455667788ull;
  const std::string hex = uniqueIdToHex(encodeUniqueId(d));
  put("unique_id", "valid", hex);
  std::string upper = hex;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  put("unique_id", "valid_upper", upper);
  put("unique_id", "bad_magic", "00" + hex.substr(2));
  put("unique_id", "short", hex.substr(1));
  put("unique_id", "not_hex", hex.substr(0, 100) + "zz" + hex.substr(102));
}

std::string tagPair(const CallTag& a, const CallTag& b, int32_t ra, int32_t rb) {
  return raw(a.word) + raw(a.count) + raw(b.word) + raw(b.count) + raw(ra) + raw(rb);
}

void callTags() {
  const CallTag ar = makeCallTag(12, kCallAllReduce, 1024, strataFloat32, 0, kCallNoRoot);
  const CallTag ag = makeCallTag(12, kCallAllGather, 512, strataFloat32, kCallOpNone, kCallNoRoot);
  const CallTag bc = makeCallTag(3, kCallBroadcast, 10, strataFloat32, kCallOpNone, 2);
  put("call_tag", "allreduce_allgather", tagPair(ar, ag, 0, 1));
  put("call_tag", "broadcast_roots", tagPair(bc, makeCallTag(3, kCallBroadcast, 10, strataFloat32, kCallOpNone, 1), 3, 2));
  put("call_tag", "p2p", tagPair(CallTag{}, ar, 1, 0));
  put("call_tag", "premulsum", tagPair(makeCallTag(7, kCallReduceScatter, 4, strataBfloat16, kCallOpPreMulSum, kCallNoRoot),
                                       makeCallTag(7, kCallReduceScatter, 4, strataBfloat16, 4, kCallNoRoot), 0, 5));
}

wire::JoinMsg join(int rank, int nranks) {
  wire::JoinMsg m;
  std::memset(static_cast<void*>(&m), 0, sizeof(m));
  m.magic = wire::kJoinMagic;
  m.rank = rank;
  m.nranks = nranks;
  m.info.rank = rank;
  m.info.port = 0x3930;
  return m;
}

void bootstrapWire() {
  put("bootstrap_wire", "join_round", std::string("\0\2", 2) + raw(join(0, 2)) + raw(join(1, 2)));
  put("bootstrap_wire", "join_conflicts", std::string("\0\0", 2) + raw(join(1, 4)) + raw(join(1, 4)) + raw(join(2, 3)) +
                                              raw(join(-1, 4)) + raw(join(0, 1 << 23)));
  const std::string why = "rank 1 of 2 did not join within 5 s";
  put("bootstrap_wire", "reply_timeout",
      "\1" + raw(wire::JoinReply{strataTimeout, 0, static_cast<uint32_t>(why.size()), 0}) + why);
  put("bootstrap_wire", "reply_refused",
      "\1" + raw(wire::JoinReply{strataInvalidArgument, 0, 33, 0}) + "bootstrap: wrong unique id secret");
  wire::Hello h{wire::kHelloMagic, Bootstrap::kData, {}, 0, 1, 0};
  put("bootstrap_wire", "hello_data", "\2\3" + raw(h));
  h.kind = Bootstrap::kRing;
  h.index = 2;
  put("bootstrap_wire", "hello_ring", "\2\7" + raw(h));
  h.kind = 9;
  put("bootstrap_wire", "hello_bad_kind", "\2\3" + raw(h));
}

// fuzz_tcp_frames' input: the receiving side, then each socket's bytes.
struct TcpCase {
  uint8_t nsock = 1, chunkSel = 0;  // chunk = 8 * (1 + chunkSel)
  uint8_t flags = 0;  // 1: peekCallTag, 2: peerFailed before posting, 4: a send to a peer that is gone
  struct Recv {
    uint8_t kind;  // bit 0: reduce; bits 1-2: op
    uint8_t dtype;
    uint16_t countSel;  // elements - 1
    CallTag call;
  };
  std::vector<Recv> recvs;
  std::vector<std::string> socks;
  std::string bytes() const {
    std::string s;
    s += static_cast<char>(nsock - 1);
    s += static_cast<char>(chunkSel);
    s += static_cast<char>(recvs.size() - 1);
    s += static_cast<char>(flags);
    for (const Recv& r : recvs)
      s += raw(r.kind) + raw(r.dtype) + raw(r.countSel) + raw(r.call.word) + raw(r.call.count);
    for (size_t i = 0; i < socks.size(); ++i) {
      if (i + 1 < socks.size()) s += raw(static_cast<uint16_t>(socks[i].size()));
      s += socks[i];
    }
    return s;
  }
};

std::string chunkFrame(uint64_t seq, uint64_t msg, uint64_t chunk, const CallTag& call, char fill) {
  TcpConnection::Header h{0x43484e4b, 0, seq, msg, chunk, call};
  return raw(h) + std::string(chunk, fill);
}

void tcpFrames() {
  const CallTag call = makeCallTag(1, kCallAllReduce, 16, strataFloat32, 0, kCallNoRoot);
  {  // one socket, a 64-byte message in chunks of 32
    TcpCase c;
    c.chunkSel = 3;
    c.recvs.push_back({0, strataUint8, 63, call});
    c.socks = {chunkFrame(0, 64, 32, call, 'a') + chunkFrame(1, 64, 32, call, 'b')};
    put("tcp_frames", "two_chunks", c.bytes());
  }
  {  // two sockets, chunk g on socket g % 2; a reducing receive of 16 floats
    TcpCase c;
    c.nsock = 2;
    c.chunkSel = 3;
    c.recvs.push_back({1, strataFloat32, 15, call});
    c.socks = {chunkFrame(0, 64, 32, call, 0), chunkFrame(1, 64, 32, call, 0)};
    put("tcp_frames", "two_sockets_reduce", c.bytes());
  }
  {  // the peer failed: FAIL frame with its reason
    TcpCase c;
    c.recvs.push_back({0, strataUint8, 7, call});
    const std::string why = "rank 1 timed out";
    TcpConnection::Header h{0x4641494c, 0, 0, why.size(), why.size(), CallTag{}};
    c.socks = {raw(h) + why};
    put("tcp_frames", "fail_frame", c.bytes());
  }
  {  // another call: the mismatch names both
    TcpCase c;
    c.recvs.push_back({0, strataUint8, 7, call});
    c.socks = {chunkFrame(0, 8, 8, makeCallTag(1, kCallAllGather, 2, strataFloat32, kCallOpNone, kCallNoRoot), 'x')};
    put("tcp_frames", "call_mismatch", c.bytes());
  }
  {  // a size mismatch, and a peek before posting
    TcpCase c;
    c.flags = 1;
    c.recvs.push_back({0, strataUint8, 15, call});
    c.socks = {chunkFrame(0, 8, 8, call, 'x')};
    put("tcp_frames", "size_mismatch_peek", c.bytes());
  }
  {  // a FAIL notice waiting before any receive is posted (peerFailed finds it)
    TcpCase c;
    c.flags = 2;
    c.recvs.push_back({0, strataUint8, 7, call});
    const std::string why = "rank 1 aborted";
    TcpConnection::Header h{0x4641494c, 0, 0, why.size(), why.size(), CallTag{}};
    c.socks = {raw(h) + why};
    put("tcp_frames", "fail_notice_unposted", c.bytes());
  }
  {  // the peer sent a chunk nobody receives, then its FAIL notice, and left: our send breaks and
     // finds the notice behind the chunk
    TcpCase c;
    c.flags = 4;
    c.recvs.push_back({0, strataUint8, 7, makeCallTag(9, kCallAllReduce, 2, strataFloat32, 0, kCallNoRoot)});
    const std::string why = "rank 1 timed out";
    TcpConnection::Header h{0x4641494c, 0, 0, why.size(), why.size(), CallTag{}};
    c.socks = {chunkFrame(0, 64, 64, call, 'z') + raw(h) + why};
    put("tcp_frames", "broken_send_notice", c.bytes());
  }
  {  // two receives back to back, the second with another tag
    TcpCase c;
    c.recvs.push_back({0, strataUint8, 7, call});
    const CallTag next = makeCallTag(2, kCallAllReduce, 2, strataFloat32, 0, kCallNoRoot);
    c.recvs.push_back({0, strataUint8, 7, next});
    c.socks = {chunkFrame(0, 8, 8, call, 'x') + chunkFrame(1, 8, 8, next, 'y')};
    put("tcp_frames", "two_receives", c.bytes());
  }
}

std::string ibFrame(uint32_t type, const std::string& payload) {
  const uint32_t h[3] = {0x5349424f, type, static_cast<uint32_t>(payload.size())};
  return std::string(reinterpret_cast<const char*>(h), sizeof(h)) + payload;
}

void ibHandshake() {
  using ib::Handshake;
  const ib::Hello hello{Handshake::kVersion, 1, 1, 1, 16, 4096};
  ib::Info info;
  info.rails = 1;
  info.qps = 1;
  const std::string all = ibFrame(Handshake::kHello, raw(hello)) + ibFrame(Handshake::kInfo, raw(info)) +
                          ibFrame(Handshake::kReady, "");
  put("ib_handshake", "full", std::string("\0", 1) + all);
  put("ib_handshake", "full_then_eof_fail", std::string("\x0c", 1) + all);
  put("ib_handshake", "fail_frame", "\4" + ibFrame(Handshake::kFail, "rank 1: out of memory"));
  put("ib_handshake", "refused_hello", "\1" + ibFrame(Handshake::kHello, raw(hello)));
  ib::Hello other = hello;
  other.rank = 7;
  put("ib_handshake", "wrong_rank", "\4" + ibFrame(Handshake::kHello, raw(other)));
  put("ib_handshake", "info_first", std::string(1, '\0') + ibFrame(Handshake::kInfo, raw(info)));
}

void topoFiles() {
  put("topo_file", "minimal", R"({"version": 1, "nodes": [{}]})");
  put("topo_file", "virtual_2x2", R"({
  "version": 1,
  "rails": 2,
  "link_classes": {"rail": {"latency_us": 50, "bandwidth_GB_s": 0.125}, "cross-rail": {"latency_us": 50, "bandwidth_GB_s": 0.125}},
  "node_types": {"vnode": {"nics": [{"name": "vnic0", "kind": "eth", "rate_Gbit_s": 1, "rail": 0},
                                    {"name": "vnic1", "kind": "eth", "rate_Gbit_s": 1, "rail": 1}]}},
  "nodes": [{"hostname": "vnode0", "type": "vnode"}, {"hostname": "vnode1", "type": "vnode"}],
  "placement": [0, 0, "vnode1", 1]
})");
  put("topo_file", "count_type_ppn", R"({"version": 1, "rails": 1,
  "node_types": {"t": {"cores": 8, "cpus": 16, "numa": [{"id": 0, "cpus": "0-7", "memory_GiB": 64}],
    "gpus": [{"name": "g", "pci_bus_id": "0000:3b:00.0", "numa": 0, "memory_GiB": 80, "peak_tflops": 989,
              "nvlinks": 18, "nvswitch": true, "nvlink_peers": [1]},
             {"name": "g", "numa": 0, "nvlink_peers": [0]}],
    "nics": [{"name": "mlx5_0", "netdev": "ib0", "kind": "ib", "port": 1, "up": true, "rate_Gbit_s": 400,
              "pci_bus_id": "3c:00.0", "numa": 0, "rail": 0, "ipv4": "10.0.0.1"}]}},
  "nodes": {"count": 3, "type": "t", "hostname_prefix": "gpu"},
  "placement": {"ranks_per_node": 2}})");
  put("topo_file", "errors", R"({"version": 1, "rails": 1, "nodes": [{"hostname": "a", "nics": [{"name": "x", "rail": 3}]},
  {"hostname": "a", "gpus": [{"numa": 5}]}], "placement": [7]})");
  put("topo_file", "syntax", "{\"version\": 1, \"nodes\": [\n  {\"hostname\": \"a\",}\n]}");
  put("topo_file", "hwloc_xml", R"({"version": 1, "nodes": [{"hwloc_xml": "node.xml", "cores": 4}]})");
}

void configs() {
  const std::vector<ConfigEntry> table = describeConfig(Config{});
  auto line = [&](const std::string& name, const std::string& value) {
    for (size_t i = 0; i < table.size(); ++i)
      if (table[i].name == name) return std::string(1, selector(i, table.size())) + value + "\n";
    std::fprintf(stderr, "make_corpus: no variable %s\n", name.c_str());
    std::exit(1);
  };
  put("config", "valid", line("STRATA_ALGO", "ring") + line("STRATA_TIMEOUT", "30") + line("STRATA_LOCAL_SLOT_BYTES", "256K") +
                             line("STRATA_TCP_SOCKETS", "4") + line("STRATA_TCP_CHUNK_BYTES", "1M") +
                             line("STRATA_LOG_LEVEL", "debug") + line("STRATA_LOCAL_CMA", "on"));
  put("config", "numbers", line("STRATA_JOIN_TIMEOUT", "0.5") + line("STRATA_SPIN_US", "1e3") +
                               line("STRATA_VCLUSTER_RAIL_RATE", "1000000000") + line("STRATA_ROOT_PORT", "29500") +
                               line("STRATA_IB_GID_INDEX", "-1") + line("STRATA_CUDA_THREADS", "256"));
  put("config", "bad_size", line("STRATA_CMA_MIN_BYTES", "12Q"));
  put("config", "bad_double", line("STRATA_TIMEOUT", "soon"));
  put("config", "bad_choice", line("STRATA_TRANSPORT", "carrier-pigeon"));
  put("config", "bounds", line("STRATA_LOCAL_SLOTS", "65") + line("STRATA_IB_SLOT_BYTES", "4100") +
                              line("STRATA_CUDA_SLOT_BYTES", "1000"));
}

void launchEnv() {
  static const char* const vars[] = {"STRATA_UNIQUE_ID", "STRATA_RANK", "STRATA_WORLD_SIZE", "RANK", "WORLD_SIZE",
                                     "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_RANK",
                                     "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_NAMESPACE",
                                     "OMPI_MCA_ess_base_jobid", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_ID",
                                     "SLURM_STEP_ID", "SLURM_STEP_NODELIST"};
  const size_t n = sizeof(vars) / sizeof(vars[0]);
  auto line = [&](const std::string& name, const std::string& value) {
    for (size_t i = 0; i < n; ++i)
      if (name == vars[i]) return std::string(1, selector(i, n)) + value + "\n";
    std::fprintf(stderr, "make_corpus: no launcher variable %s\n", name.c_str());
    std::exit(1);
  };
  UniqueIdData d;
  put("launch_env", "strata_run", std::string(1, '\0') + line("STRATA_UNIQUE_ID", uniqueIdToHex(encodeUniqueId(d))) +
                                      line("STRATA_RANK", "1") + line("STRATA_WORLD_SIZE", "4"));
  put("launch_env", "torchrun", std::string(1, '\0') + line("RANK", "3") + line("WORLD_SIZE", "8") +
                                    line("MASTER_ADDR", "10.0.0.1") + line("MASTER_PORT", "29500") +
                                    line("TORCHELASTIC_RUN_ID", "job42"));
  put("launch_env", "mpirun", std::string(1, '\0') + line("OMPI_COMM_WORLD_RANK", "0") +
                                  line("OMPI_COMM_WORLD_SIZE", "2") + line("OMPI_COMM_WORLD_LOCAL_SIZE", "2") +
                                  line("PMIX_NAMESPACE", "prterun-host-1234@1"));
  put("launch_env", "srun", std::string(1, '\0') + line("SLURM_PROCID", "5") + line("SLURM_NTASKS", "16") +
                                line("SLURM_JOB_ID", "777") + line("SLURM_STEP_ID", "0") +
                                line("SLURM_STEP_NODELIST", "rack[1-2]-node[01-04,07],gpu2"));
  put("launch_env", "root_port_bad_rank", std::string(1, '\x07') + line("RANK", "9") + line("WORLD_SIZE", "8") +
                                              line("MASTER_ADDR", "node0"));
}

void hangReports() {
  hang::ProcessDump d;
  d.host = "node1";
  d.pid = 4242;
  d.reason = "signal";
  d.now = 1234.5;
  hang::CommDump c;
  c.id = "0x2a3b";
  c.rank = 1;
  c.nranks = 4;
  c.lastSeq = 12;
  hang::OpEntry op;
  op.seq = 12;
  op.coll = "all_reduce";
  op.count = 1024;
  op.dtype = "fp32";
  op.op = "sum";
  op.algo = "ring";
  op.state = "running";
  op.start = 1230.1;
  op.step = 2;
  op.nsteps = 6;
  op.waits = {{0, false}, {2, true}};
  c.ops.push_back(op);
  hang::OpEntry p2p;
  p2p.p2p = true;
  p2p.seq = 3;
  p2p.coll = "send/recv";
  p2p.count = 2;
  p2p.state = "done";
  p2p.start = 1.0;
  p2p.end = 2.0;
  c.ops.insert(c.ops.begin(), p2p);
  d.comms.push_back(c);
  const std::string one = hang::formatDump(d);
  d.comms[0].rank = 0;
  d.comms[0].lastSeq = 11;
  d.comms[0].error = "rank 0: timed out after 600 s waiting in all_reduce #11";
  d.comms[0].ops.back().seq = 11;
  d.comms[0].ops.back().state = "failed";
  d.pid = 4241;
  const std::string two = hang::formatDump(d);
  put("hang_report", "one_rank", one);
  put("hang_report", "two_ranks", one + "\f" + two);
  put("hang_report", "cut_short", one.substr(0, one.size() - 4));
  put("hang_report", "bad_lines", "strata-dump 1 host=x pid=1\ncomm id=0x1 rank=3 nranks=2\nop seq=1 coll=x state=odd\nend\n");
}

RankInfo info(int rank, uint64_t host, const char* name, int ifs) {
  RankInfo i;
  i.rank = rank;
  i.pid = 100 + rank;
  i.hostHash = host;
  i.processHash = host * 31 + static_cast<uint64_t>(rank);
  i.addr = 0x0100000a + (static_cast<uint32_t>(host) << 24);
  i.port = 0x3930;
  std::snprintf(i.hostname, sizeof(i.hostname), "%s", name);
  i.cpuMask[0] = ~0ull;
  i.nodeHash = host;
  std::snprintf(i.nodeName, sizeof(i.nodeName), "%s", name);
  i.nifs = static_cast<uint32_t>(ifs);
  for (int k = 0; k < ifs; ++k) {
    i.ifAddr[k] = (static_cast<uint32_t>(host) << 24) | (static_cast<uint32_t>(k) << 16) | 0x12c6;
    i.ifMask[k] = 0x0000ffff;
    i.ifMbps[k] = 100000;
    i.ifNuma[k] = k % 2;
  }
  i.numa = rank % 2;
  return i;
}

void rankInfos() {
  put("rank_infos", "one_node_two_ranks", raw(info(0, 1, "node0", 0)) + raw(info(1, 1, "node0", 0)));
  put("rank_infos", "two_nodes_two_rails", raw(info(0, 1, "node0", 2)) + raw(info(1, 1, "node0", 2)) +
                                              raw(info(2, 2, "node1", 2)) + raw(info(3, 2, "node1", 2)));
  RankInfo bound = info(1, 1, "node0", 1);
  bound.cpuMask[0] = 2;
  bound.homeRail = 0;
  RankInfo self = info(0, 1, "node0", 1);
  self.cpuMask[0] = 1;
  put("rank_infos", "bound_home_rail", raw(self) + raw(bound) + raw(info(2, 3, "node2", 1)));
}

void ifaceLists() {
  put("iface_list", "prefixes", "eth,ib\neth0\nib0\nlo\nenp3s0");
  put("iface_list", "exclude", "^lo,docker\nlo\ndocker0\nst1234r0\neth0");
  put("iface_list", "exact", "=eth0,rail1\neth0\neth01\nrail1\n0000:3b:00.0");
  put("iface_list", "pci", "3B:00.1\n00000000:3b:00.1");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_corpus DIR (tests/fuzz/corpus)\n");
    return 2;
  }
  root = argv[1];
  uniqueIds();
  callTags();
  bootstrapWire();
  tcpFrames();
  ibHandshake();
  topoFiles();
  configs();
  launchEnv();
  hangReports();
  rankInfos();
  ifaceLists();
  return 0;
}
