// schedule.cc: names of collectives and algorithms, and the Schedule helpers (compact, toString).
// The builders themselves live in collectives/algorithms/ (registry.cc dispatches).
#include "collectives/schedule.h"

#include <cctype>
#include <string>

#include "collectives/simulator.h"

namespace strata {

const char* collName(CollType c) {
  switch (c) {
    case CollType::AllReduce: return "allreduce";
    case CollType::ReduceScatter: return "reducescatter";
    case CollType::AllGather: return "allgather";
    case CollType::Broadcast: return "broadcast";
    case CollType::Reduce: return "reduce";
    case CollType::AllToAll: return "alltoall";
    case CollType::Gather: return "gather";
    case CollType::Scatter: return "scatter";
  }
  return "?";
}

const char* algoName(Algo a) {
  switch (a) {
    case Algo::Auto: return "auto";
    case Algo::Ring: return "ring";
    case Algo::Rhd: return "rhd";
    case Algo::Tree: return "tree";
    case Algo::Direct: return "direct";
    case Algo::OneShot: return "oneshot";
    case Algo::Pairwise: return "pairwise";
    case Algo::Bruck: return "bruck";
    case Algo::Linear: return "linear";
    case Algo::Hier: return "hier";
  }
  return "?";
}

bool parseAlgo(const std::string& name, Algo* out) {
  std::string lower;
  lower.reserve(name.size());
  for (char ch : name) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  static constexpr Algo kAll[] = {Algo::Auto,    Algo::Ring,     Algo::Rhd,   Algo::Tree,  Algo::Direct,
                                  Algo::OneShot, Algo::Pairwise, Algo::Bruck, Algo::Linear,
                                  Algo::Hier};
  for (Algo a : kAll) {
    if (lower == algoName(a)) {
      if (out) *out = a;
      return true;
    }
  }
  return false;
}

void Schedule::compact() {
  size_t w = 0;
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i].numOps != 0) steps[w++] = steps[i];
  steps.resize(w);
}

namespace {

const char* bufName(BufId b) {
  switch (b) {
    case BufId::Input: return "in";
    case BufId::Output: return "out";
    case BufId::Scratch: return "scr";
  }
  return "?";
}

std::string sliceStr(const Slice& s) { return std::string(bufName(s.buf)) + "[" + std::to_string(s.offset) + "]"; }

}  // namespace

std::string opToString(const Op& op) {
  const std::string n = std::to_string(op.count);
  const std::string p = std::to_string(op.peer);
  switch (op.code) {
    case OpCode::Send: return "send(to " + p + ", " + sliceStr(op.src) + ", " + n + ")";
    case OpCode::Recv: return "recv(from " + p + ", " + sliceStr(op.dst) + ", " + n + ")";
    case OpCode::RecvReduce:
      return "recvReduce(from " + p + ", " + sliceStr(op.src) + " -> " + sliceStr(op.dst) + ", " + n + ")";
    case OpCode::Copy: return "copy(" + sliceStr(op.src) + " -> " + sliceStr(op.dst) + ", " + n + ")";
    case OpCode::Reduce:
      return "reduce(" + sliceStr(op.src) + ", " + sliceStr(op.src2) + " -> " + sliceStr(op.dst) + ", " + n + ")";
  }
  return "?";
}

std::string Schedule::toString() const {
  std::string s = "schedule: " + std::to_string(steps.size()) + " steps, scratch " + std::to_string(scratchElems) + "\n";
  for (size_t i = 0; i < steps.size(); ++i) {
    s += "  step " + std::to_string(i) + ":";
    for (uint32_t k = 0; k < steps[i].numOps; ++k) s += " " + opToString(ops[steps[i].firstOp + k]);
    s += "\n";
  }
  return s;
}

}  // namespace strata
