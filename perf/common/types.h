// types.h: the collectives, element types and reduction ops the perf tools sweep, named as nccl-tests names them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "strata/strata.h"

namespace strata::perf {

enum class Coll { AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, AllToAll, Gather, Scatter, SendRecv };

/// Element types use strata's enum (same values as ncclDataType_t); peers map them to their own.
using DType = strataDataType_t;

/// Reduction ops in nccl-tests' order; MulSum is a pre-multiplied sum (scalar 2 here).
enum class Op { Sum, Prod, Max, Min, Avg, MulSum };

/// "all_reduce", "reduce_scatter", ... (the tool's name without "_perf").
const char* collName(Coll c);
bool collReduces(Coll c);  ///< has a reduction op (all-reduce, reduce-scatter, reduce)
bool collHasRoot(Coll c);  ///< broadcast, reduce, gather, scatter

/// nccl-tests' names: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2.
const char* dtypeName(DType t);
size_t dtypeSize(DType t);
bool dtypeIsFloat(DType t);
std::vector<DType> allDtypes();

/// sum prod max min avg mulsum.
const char* opName(Op op);
std::vector<Op> allOps();

}  // namespace strata::perf
