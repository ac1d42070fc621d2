// hang_report.cc: op-ring dump text (write and parse) and the diagnosis over every rank's dump
// (see hang_report.h).
#include "collectives/hang_report.h"

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "transport/call_tag.h"

namespace strata::hang {
namespace {

// Most ranks a dump may claim (as many as a rendezvous takes): the diagnosis walks every rank.
constexpr long kMaxRanks = 1L << 22;

std::string orDash(const std::string& s) { return s.empty() ? "-" : s; }
std::string fromDash(const std::string& s) { return s == "-" ? std::string() : s; }

std::string noSpaces(std::string s) {
  for (char& c : s)
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') c = '_';
  return s;
}

std::string oneLine(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

std::string formatWaits(const std::vector<Wait>& w) {
  if (w.empty()) return "-";
  std::string s;
  for (const Wait& x : w) s += fmt::format("{}{}:{}", s.empty() ? "" : ",", x.send ? "send" : "recv", x.peer);
  return s;
}

/// key=value tokens of one line after its first word.
std::map<std::string, std::string> fields(const std::string& line) {
  std::map<std::string, std::string> f;
  std::istringstream in(line);
  std::string tok;
  in >> tok;  // the line's kind
  while (in >> tok) {
    size_t eq = tok.find('=');
    if (eq != std::string::npos) f[tok.substr(0, eq)] = tok.substr(eq + 1);
  }
  return f;
}

bool toU64(const std::string& s, uint64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtoull(s.c_str(), &end, 0);
  return *end == '\0';
}
bool toLong(const std::string& s, long* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtol(s.c_str(), &end, 10);
  return *end == '\0';
}
bool toDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return *end == '\0';
}

Status parseOp(const std::map<std::string, std::string>& f, OpEntry* op) {
  auto get = [&](const char* k) {
    auto it = f.find(k);
    return it == f.end() ? std::string() : it->second;
  };
  uint64_t u = 0;
  if (toU64(get("seq"), &u)) {
    op->seq = u;
  } else if (toU64(get("p2p"), &u)) {
    op->p2p = true;
    op->seq = u;
  } else {
    return invalidArgument("op without seq= or p2p=");
  }
  op->coll = get("coll");
  if (op->coll.empty()) return invalidArgument("op without coll=");
  (void)toU64(get("count"), &op->count);
  op->dtype = fromDash(get("dtype"));
  op->op = fromDash(get("op"));
  if (!toLong(get("root"), &op->root)) op->root = -1;
  op->algo = fromDash(get("algo"));
  op->state = get("state");
  if (op->state != "running" && op->state != "done" && op->state != "failed")
    return invalidArgument("op with state '{}' (running|done|failed)", op->state);
  (void)toDouble(get("start"), &op->start);
  if (!toDouble(get("end"), &op->end)) op->end = -1;
  const std::string step = get("step");
  size_t slash = step.find('/');
  uint64_t a = 0, b = 0;
  if (slash != std::string::npos && toU64(step.substr(0, slash), &a) && toU64(step.substr(slash + 1), &b)) {
    op->step = static_cast<uint32_t>(a);
    op->nsteps = static_cast<uint32_t>(b);
  }
  const std::string waits = get("wait");
  if (!waits.empty() && waits != "-") {
    std::istringstream in(waits);
    std::string w;
    while (std::getline(in, w, ',')) {
      size_t colon = w.find(':');
      long peer = 0;
      if (colon == std::string::npos || !toLong(w.substr(colon + 1), &peer) || peer < 0 || peer >= kMaxRanks)
        return invalidArgument("bad wait entry '{}' (send:PEER or recv:PEER)", w);
      op->waits.push_back(Wait{static_cast<int>(peer), w.substr(0, colon) == "send"});
    }
  }
  return OkStatus();
}

std::string plural(size_t n, const char* one, const char* many) { return n == 1 ? one : many; }

std::string ranksWord(const std::vector<int>& r) {
  return fmt::format("{} {}", plural(r.size(), "rank", "ranks"), rankList(r));
}

std::string waitText(const std::vector<Wait>& waits) {
  std::string s;
  for (const Wait& w : waits)
    s += fmt::format("{}{} rank {}", s.empty() ? "" : ", ", w.send ? "send to" : "receive from", w.peer);
  return s;
}

struct RankView {
  const CommDump* comm = nullptr;
  const ProcessDump* proc = nullptr;
  const OpEntry* pending = nullptr;    ///< its newest operation, when not done
  const OpEntry* lastColl = nullptr;   ///< its newest collective in the ring
};

std::string diagnoseComm(const std::string& id, const std::map<int, RankView>& ranks, int nranks, bool* problem) {
  std::vector<std::string> lines;
  std::vector<int> missing;
  for (int r = 0; r < nranks; ++r)
    if (!ranks.count(r)) missing.push_back(r);

  // The newest collective any rank entered, and the call it is (from the ranks that entered it).
  uint64_t newest = 0;
  for (const auto& [r, v] : ranks) newest = std::max(newest, v.comm->lastSeq);
  const OpEntry* newestCall = nullptr;
  for (const auto& [r, v] : ranks)
    if (v.lastColl && v.lastColl->seq == newest && !newestCall) newestCall = v.lastColl;

  // Mismatch: the first collective number that ranks called with different arguments.
  std::map<uint64_t, std::map<std::string, std::vector<int>>> bySeq;
  std::map<uint64_t, std::map<std::string, const OpEntry*>> example;
  for (const auto& [r, v] : ranks)
    for (const OpEntry& op : v.comm->ops)
      if (!op.p2p) {
        bySeq[op.seq][op.signature()].push_back(r);
        example[op.seq][op.signature()] = &op;
      }
  std::string mismatch;
  for (const auto& [seq, groups] : bySeq) {
    if (groups.size() < 2) continue;
    std::vector<std::pair<std::vector<int>, std::string>> byRank;  // groups in order of their lowest rank
    for (const auto& [sig, rs] : groups) byRank.emplace_back(rs, sig);
    std::sort(byRank.begin(), byRank.end());
    std::string parts;
    for (const auto& [rs, sig] : byRank)
      parts += fmt::format("{}{} called {}", parts.empty() ? "" : "; ", ranksWord(rs), example[seq][sig]->describe());
    mismatch = fmt::format("ranks call different collectives as #{}: {}", seq, parts);
    break;
  }

  // Ranks behind: they have not entered the newest collective.
  std::vector<int> behind, inNewest, doneNewest;
  for (const auto& [r, v] : ranks) {
    if (v.comm->lastSeq < newest) behind.push_back(r);
    else if (v.pending && !v.pending->p2p && v.pending->seq == newest) inNewest.push_back(r);
    else doneNewest.push_back(r);
  }
  // Ranks waiting on a rank that sent no dump.
  std::vector<int> waitOnMissing;
  for (const auto& [r, v] : ranks)
    if (v.pending)
      for (const Wait& w : v.pending->waits)
        if (std::find(missing.begin(), missing.end(), w.peer) != missing.end()) {
          waitOnMissing.push_back(r);
          break;
        }

  const std::string newestText = newestCall ? newestCall->describe() : fmt::format("collective #{}", newest);
  std::string verdict;
  if (!mismatch.empty()) {
    verdict = mismatch;
  } else if (!behind.empty() && newest > 0) {
    verdict = fmt::format("{} {} not entered {}", ranksWord(behind), plural(behind.size(), "has", "have"), newestText);
    if (!inNewest.empty()) verdict += fmt::format("; {} wait in it", ranksWord(inNewest));
    if (!doneNewest.empty()) verdict += fmt::format("; {} completed it", ranksWord(doneNewest));
  } else if (!missing.empty()) {
    verdict = fmt::format("no dump from {}", ranksWord(missing));
    if (!waitOnMissing.empty())
      verdict += fmt::format(" ({} wait on {})", ranksWord(waitOnMissing), plural(missing.size(), "it", "them"));
    if (!inNewest.empty()) verdict += fmt::format("; {} wait in {}", ranksWord(inNewest), newestText);
  } else if (!inNewest.empty()) {
    verdict = fmt::format("every rank entered {}; {} wait in it (no rank is behind: look at the waits below)",
                          newestText, ranksWord(inNewest));
  }
  if (!missing.empty() && (!mismatch.empty() || !behind.empty())) {
    std::string m = fmt::format("no dump from {}", ranksWord(missing));
    if (!waitOnMissing.empty())
      m += fmt::format("; {} wait on {}", ranksWord(waitOnMissing), plural(missing.size(), "it", "them"));
    lines.push_back(m);
  }

  // Where each behind rank stands.
  for (int r : behind) {
    const RankView& v = ranks.at(r);
    std::string where = fmt::format("rank {} (host {}, pid {}): ", r, v.proc->host, v.proc->pid);
    if (v.pending) {
      where += fmt::format("waits in {}", v.pending->describe());
      if (!v.pending->waits.empty()) where += ": " + waitText(v.pending->waits);
    } else if (v.lastColl) {
      where += fmt::format("last entered {}", v.lastColl->describe());
      if (v.lastColl->end >= 0)
        where += fmt::format(", done {:.1f} s before its dump", std::max(0.0, v.proc->now - v.lastColl->end));
    } else {
      where += v.comm->lastSeq ? fmt::format("entered {} collectives", v.comm->lastSeq) : "entered no collective";
    }
    lines.push_back(where);
  }

  // What the waiting ranks wait on (a blocked send names the peer that does not receive).
  size_t shown = 0, notShown = 0;
  for (const auto& [r, v] : ranks) {
    if (!v.pending || std::find(behind.begin(), behind.end(), r) != behind.end()) continue;
    if (shown >= 16) {
      ++notShown;
      continue;
    }
    ++shown;
    std::string line = fmt::format("rank {} waits in {}", r, v.pending->describe());
    std::string how;
    if (!v.pending->algo.empty()) how = v.pending->algo;
    if (v.pending->nsteps) how += fmt::format("{}step {}/{}", how.empty() ? "" : " ", v.pending->step, v.pending->nsteps);
    if (v.pending->state == "failed") how += how.empty() ? "failed" : ", failed";
    if (!how.empty()) line += " [" + how + "]";
    if (!v.pending->waits.empty()) line += ": " + waitText(v.pending->waits);
    lines.push_back(line);
  }
  if (notShown) lines.push_back(fmt::format("... and {} more waiting ranks", notShown));

  bool anyPending = false;
  for (const auto& [r, v] : ranks) anyPending = anyPending || v.pending;
  *problem = !mismatch.empty() || !behind.empty() || !missing.empty() || anyPending;
  if (verdict.empty()) {
    verdict = *problem ? "ranks wait (see below)"
                       : newest ? fmt::format("all ranks completed {}; nothing pending", newestText)
                                : "no collective run; nothing pending";
  }
  std::string text = fmt::format("comm {} ({} ranks, dumps from {}): {}\n", id, nranks, ranks.size(), verdict);
  for (const std::string& l : lines) text += "  " + l + "\n";
  return text;
}

}  // namespace

std::string OpEntry::signature() const {
  if (p2p) return "send/recv";
  std::string s = fmt::format("{} (count {} {}", coll, count, dtype);
  if (!op.empty()) s += " " + op;
  if (root >= 0) s += fmt::format(" root {}", root);
  return s + ")";
}

std::string OpEntry::describe() const {
  if (p2p) return fmt::format("send/recv batch {} ({} transfers)", seq, count);
  return formatCall(coll, seq, count, dtype, op, root);
}

std::string rankList(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!s.empty()) s += ",";
    if (j >= i + 2) {
      s += fmt::format("{}-{}", ranks[i], ranks[j]);
    } else {
      for (size_t k = i; k <= j; ++k) s += fmt::format("{}{}", k > i ? "," : "", ranks[k]);
    }
    i = j + 1;
  }
  return s;
}

std::string formatDump(const ProcessDump& d) {
  std::string s = fmt::format("strata-dump 1 host={} pid={} reason={} now={:.6f}\n", noSpaces(orDash(d.host)), d.pid,
                              noSpaces(orDash(d.reason)), d.now);
  for (const CommDump& c : d.comms) {
    s += fmt::format("comm id={} rank={} nranks={} last_seq={} name={}\n", c.id, c.rank, c.nranks, c.lastSeq,
                     noSpaces(orDash(c.name)));
    if (!c.error.empty()) s += "error " + oneLine(c.error) + "\n";
    for (const OpEntry& op : c.ops) {
      s += fmt::format("op {}={} coll={} count={} dtype={} op={} root={} algo={} state={} start={:.6f} end={} "
                       "step={}/{} wait={}\n",
                       op.p2p ? "p2p" : "seq", op.seq, op.coll, op.count, orDash(op.dtype), orDash(op.op),
                       op.root >= 0 ? std::to_string(op.root) : "-", orDash(op.algo), op.state, op.start,
                       op.end >= 0 ? fmt::format("{:.6f}", op.end) : "-", op.step, op.nsteps, formatWaits(op.waits));
    }
  }
  return s + "end\n";
}

Status parseDump(const std::string& text, ProcessDump* out) {
  ProcessDump d;
  std::istringstream in(text);
  std::string line;
  int lineNo = 0;
  bool header = false, ended = false;
  while (std::getline(in, line)) {
    ++lineNo;
    if (line.empty()) continue;
    const std::string kind = line.substr(0, line.find(' '));
    auto bad = [&](const std::string& why) { return invalidArgument("line {}: {}: '{}'", lineNo, why, line); };
    if (!header) {
      if (kind != "strata-dump") return bad("not a strata op-ring dump (expected 'strata-dump 1 ...')");
      auto f = fields(line);
      d.host = fromDash(f["host"]);
      if (!toLong(f["pid"], &d.pid)) return bad("header without pid=");
      d.reason = fromDash(f["reason"]);
      (void)toDouble(f["now"], &d.now);
      header = true;
    } else if (kind == "comm") {
      auto f = fields(line);
      CommDump c;
      c.id = f["id"];
      long rank = -1, nranks = 0;
      if (c.id.empty() || !toLong(f["rank"], &rank) || !toLong(f["nranks"], &nranks) || rank < 0 || nranks <= rank ||
          nranks > kMaxRanks)
        return bad(fmt::format("comm needs id=, rank= and nranks= (0 <= rank < nranks <= {})", kMaxRanks));
      c.rank = static_cast<int>(rank);
      c.nranks = static_cast<int>(nranks);
      (void)toU64(f["last_seq"], &c.lastSeq);
      c.name = fromDash(f["name"]);
      d.comms.push_back(std::move(c));
    } else if (kind == "error") {
      if (d.comms.empty()) return bad("error before any comm line");
      d.comms.back().error = line.size() > 6 ? line.substr(6) : std::string();
    } else if (kind == "op") {
      if (d.comms.empty()) return bad("op before any comm line");
      OpEntry op;
      Status st = parseOp(fields(line), &op);
      if (!st.ok()) return bad(st.message());
      d.comms.back().ops.push_back(std::move(op));
    } else if (kind == "end") {
      ended = true;
      break;
    }  // other kinds: written by a newer strata, ignored
  }
  if (!header) return invalidArgument("empty dump");
  if (!ended) return invalidArgument("dump ends early (no 'end' line): it was cut short");
  *out = std::move(d);
  return OkStatus();
}

std::string dumpFileName(const std::string& host, long pid) {
  return fmt::format("strata-{}-{}.dump", noSpaces(orDash(host)), pid);
}

Status readDumpDir(const std::string& dir, std::vector<ProcessDump>* out, std::string* notes) {
  DIR* dp = opendir(dir.c_str());
  if (!dp) return invalidArgument("cannot open dump directory '{}': {}", dir, strerror(errno));
  std::vector<std::string> names;
  while (dirent* e = readdir(dp)) {
    std::string n = e->d_name;
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".dump") == 0) names.push_back(n);
  }
  closedir(dp);
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    std::ifstream f(dir + "/" + n);
    std::stringstream ss;
    ss << f.rdbuf();
    ProcessDump d;
    Status st = parseDump(ss.str(), &d);
    if (!st.ok()) {
      if (notes) *notes += fmt::format("skipped {}: {}\n", n, st.message());
      continue;
    }
    d.source = n;
    out->push_back(std::move(d));
  }
  return OkStatus();
}

Diagnosis diagnose(const std::vector<ProcessDump>& dumps) {
  Diagnosis out;
  std::vector<std::string> order;
  std::map<std::string, std::map<int, RankView>> comms;
  std::map<std::string, int> sizes;
  for (const ProcessDump& p : dumps)
    for (const CommDump& c : p.comms) {
      if (!comms.count(c.id)) order.push_back(c.id);
      RankView& v = comms[c.id][c.rank];
      if (v.comm && v.comm->lastSeq > c.lastSeq) continue;  // two dumps of one rank: the further one
      v = RankView{&c, &p, nullptr, nullptr};
      if (!c.ops.empty() && c.ops.back().pending()) v.pending = &c.ops.back();
      for (const OpEntry& op : c.ops)
        if (!op.p2p && (!v.lastColl || op.seq >= v.lastColl->seq)) v.lastColl = &op;
      sizes[c.id] = std::max(sizes[c.id], c.nranks);
    }
  if (order.empty()) {
    out.text = "no communicator in the dumps\n";
    return out;
  }
  for (const std::string& id : order) {
    bool problem = false;
    out.text += diagnoseComm(id, comms[id], sizes[id], &problem);
    out.problem = out.problem || problem;
  }
  return out;
}

}  // namespace strata::hang
