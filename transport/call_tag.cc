// call_tag.cc: packing, unpacking and naming of call tags (see call_tag.h).
#include "transport/call_tag.h"

#include "kernels/host_reduce.h"

namespace strata {

CallTag makeCallTag(uint64_t seq, uint32_t code, uint64_t count, uint32_t dtype, uint32_t op, uint32_t root) {
  CallTag t;
  t.word = ((seq & ((uint64_t{1} << kCallSeqBits) - 1)) << 36) | (uint64_t{code & 0xf} << 32) |
           (uint64_t{dtype & 0x3f} << 26) | (uint64_t{op & 0xf} << 22) | (root & kCallNoRoot);
  t.count = count;
  return t;
}

CallFields decodeCallTag(const CallTag& t) {
  CallFields f;
  f.seq = t.word >> 36;
  f.code = static_cast<uint32_t>(t.word >> 32) & 0xf;
  f.dtype = static_cast<uint32_t>(t.word >> 26) & 0x3f;
  f.op = static_cast<uint32_t>(t.word >> 22) & 0xf;
  f.root = static_cast<uint32_t>(t.word) & kCallNoRoot;
  f.count = t.count;
  return f;
}

const char* callCodeName(uint32_t code) {
  static constexpr const char* kNames[kCallCodes] = {"send/recv", "all_reduce", "reduce_scatter",
                                                     "all_gather", "broadcast",  "reduce",
                                                     "all_to_all", "gather",     "scatter"};
  return code < kCallCodes ? kNames[code] : "unknown call";
}

const char* callOpName(uint32_t op) {
  static constexpr const char* kNames[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  if (op == kCallOpNone) return nullptr;
  return op < sizeof(kNames) / sizeof(kNames[0]) ? kNames[op] : "op?";
}

std::string formatCall(const std::string& coll, uint64_t seq, uint64_t count, const std::string& dtype,
                       const std::string& op, long root) {
  std::string s = fmt::format("{} #{} (count {} {}", coll, seq, count, dtype);
  if (!op.empty()) s += " " + op;
  if (root >= 0) s += fmt::format(" root {}", root);
  return s + ")";
}

std::string describeCall(const CallTag& t) {
  const CallFields f = decodeCallTag(t);
  if (f.code == kCallSendRecv) return "send/recv";
  const char* op = callOpName(f.op);
  // The field has 6 bits, the enum fewer values: a peer's tag may hold any of them.
  const std::string dtype = f.dtype < strataNumTypes ? kernels::dtypeName(static_cast<strataDataType_t>(f.dtype))
                                                     : fmt::format("dtype?{}", f.dtype);
  return formatCall(callCodeName(f.code), f.seq, f.count, dtype, op ? op : "",
                    f.root == kCallNoRoot ? -1L : static_cast<long>(f.root));
}

Status callMismatch(int sender, const CallTag& sent, int receiver, const CallTag& expected) {
  const bool senderFirst = sender < receiver;
  const int a = senderFirst ? sender : receiver, b = senderFirst ? receiver : sender;
  const CallTag& ta = senderFirst ? sent : expected;
  const CallTag& tb = senderFirst ? expected : sent;
  return invalidUsage("mismatched calls: rank {} called {}, rank {} called {}", a, describeCall(ta), b,
                      describeCall(tb));
}

bool isCallMismatch(const Status& st) {
  return st.code() == strataInvalidUsage && st.message().rfind("mismatched calls: ", 0) == 0;
}

}  // namespace strata
