// hang_report.h: op-ring dumps and the diagnosis made from them. Each process writes one dump
// (collectives/op_ring.h: its communicators' recent operations); strata-run and strata-diagnose
// read every rank's dump and say which rank is behind, which ranks call something different, and
// what the blocked ranks wait on. Independent of live communicators, so that it is tested on
// synthetic dumps.
//
// Dump format (line-oriented text, key=value fields, unknown keys ignored):
//   strata-dump 1 host=node1 pid=4242 reason=signal now=1234.567890
//   comm id=0x2a3b rank=1 nranks=4 last_seq=12 name=-
//   error <the communicator's failure, to the end of the line>        (only when it failed)
//   op seq=12 coll=all_reduce count=1024 dtype=fp32 op=sum root=- algo=ring state=running
//      start=1230.100000 end=- step=2/6 wait=recv:0,send:2              (one line per operation)
//   op p2p=3 coll=send/recv count=2 dtype=- op=- root=- algo=- state=done start=... end=... step=1/1 wait=-
//   end
// Times are seconds of the process's monotonic clock (compare them with its `now`); `seq` counts
// the communicator's collectives from 1, identically on every rank; `p2p` counts this rank's
// send/recv batches; `wait` lists the transfers of the current step still pending (peer ranks).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "transport/status.h"

namespace strata::hang {

struct Wait {
  int peer = 0;
  bool send = false;  ///< a send to `peer` (else a receive from it)
};

struct OpEntry {
  bool p2p = false;
  uint64_t seq = 0;       ///< collective number on the communicator; p2p: this rank's batch number
  std::string coll;       ///< "all_reduce", ..., "send/recv"
  uint64_t count = 0;     ///< elements; p2p: sends and receives in the batch
  std::string dtype, op;  ///< empty when not applicable
  long root = -1;
  std::string algo;
  std::string state;      ///< running | done | failed
  double start = 0, end = -1;  ///< end < 0: not ended
  uint32_t step = 0, nsteps = 0;  ///< current step (1-based) as last recorded
  std::vector<Wait> waits;

  /// "all_reduce #12 (count 1024 fp32 sum)"; p2p: "send/recv batch 3 (2 transfers)".
  std::string describe() const;
  /// The call without its number: equal on every rank that called the same thing.
  std::string signature() const;
  bool pending() const { return state != "done"; }
};

struct CommDump {
  std::string id;  ///< "0x..." (identical on every rank of the communicator)
  int rank = 0, nranks = 0;
  std::string name;
  uint64_t lastSeq = 0;  ///< collectives this rank entered
  std::string error;
  std::vector<OpEntry> ops;  ///< oldest first
};

struct ProcessDump {
  std::string host;
  long pid = 0;
  std::string reason;  ///< failure | signal | request
  double now = 0;
  std::string source;  ///< the file it came from
  std::vector<CommDump> comms;
};

std::string formatDump(const ProcessDump& d);
/// Parses one dump; errors name the line.
Status parseDump(const std::string& text, ProcessDump* out);
/// The dump file name of a process: "strata-<host>-<pid>.dump".
std::string dumpFileName(const std::string& host, long pid);
/// Reads every *.dump file of `dir`; files that do not parse are skipped with a note in *notes.
Status readDumpDir(const std::string& dir, std::vector<ProcessDump>* out, std::string* notes);

struct Diagnosis {
  bool problem = false;  ///< something pending, failed, mismatched or missing
  std::string text;      ///< one block per communicator, first line the verdict
};
Diagnosis diagnose(const std::vector<ProcessDump>& dumps);

/// "0-4,6,7".
std::string rankList(std::vector<int> ranks);

}  // namespace strata::hang
