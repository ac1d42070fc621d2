// types.cc: names and sizes of the collectives, element types and ops.
#include "perf/common/types.h"

namespace strata::perf {

const char* collName(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "all_reduce";
    case Coll::ReduceScatter: return "reduce_scatter";
    case Coll::AllGather: return "all_gather";
    case Coll::Broadcast: return "broadcast";
    case Coll::Reduce: return "reduce";
    case Coll::AllToAll: return "alltoall";
    case Coll::Gather: return "gather";
    case Coll::Scatter: return "scatter";
    case Coll::SendRecv: return "sendrecv";
  }
  return "?";
}

bool collReduces(Coll c) { return c == Coll::AllReduce || c == Coll::ReduceScatter || c == Coll::Reduce; }

bool collHasRoot(Coll c) {
  return c == Coll::Broadcast || c == Coll::Reduce || c == Coll::Gather || c == Coll::Scatter;
}

const char* dtypeName(DType t) {
  static constexpr const char* kNames[strataNumTypes] = {"int8",   "uint8", "int32",  "uint32",   "int64",  "uint64",
                                                         "half",   "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  return (t >= 0 && t < strataNumTypes) ? kNames[t] : "?";
}

size_t dtypeSize(DType t) {
  switch (t) {
    case strataInt8: case strataUint8: case strataFloat8e4m3: case strataFloat8e5m2: return 1;
    case strataFloat16: case strataBfloat16: return 2;
    case strataInt32: case strataUint32: case strataFloat32: return 4;
    case strataInt64: case strataUint64: case strataFloat64: return 8;
    default: return 0;
  }
}

bool dtypeIsFloat(DType t) { return t >= strataFloat16 && t < strataNumTypes; }

std::vector<DType> allDtypes() {
  std::vector<DType> v;
  for (int t = 0; t < strataNumTypes; ++t) v.push_back(static_cast<DType>(t));
  return v;
}

const char* opName(Op op) {
  static constexpr const char* kNames[] = {"sum", "prod", "max", "min", "avg", "mulsum"};
  return kNames[static_cast<int>(op)];
}

std::vector<Op> allOps() { return {Op::Sum, Op::Prod, Op::Max, Op::Min, Op::Avg, Op::MulSum}; }

}  // namespace strata::perf
