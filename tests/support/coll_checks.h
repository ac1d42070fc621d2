// coll_checks.h: rank-side correctness checks shared by the thread tests and the multi-process
// worker. Each check runs one collective on verifiable inputs (known exact results in every
// dtype), in place or not, and records what differed.
#pragma once

#include <string>
#include <vector>

#include "collectives/schedule.h"
#include "strata/strata.h"

namespace strata::testing {

struct CheckReport {
  int passed = 0;
  std::vector<std::string> failures;
  void fail(const std::string& what) {
    if (failures.size() < 20) failures.push_back(what);
    else if (failures.size() == 20) failures.push_back("(more failures omitted)");
  }
  bool ok() const { return failures.empty(); }
};

/// Op selector for checks: a built-in op, or kPreMulSum (scalar 2, created and destroyed here).
constexpr int kPreMulSum = -1;

/// Rank r's input element i of a reduction with `op` (kPreMulSum allowed): exact in every dtype,
/// with exact sums, products, max and min for n <= 8.
double reduceInput(int op, int r, size_t i, strataDataType_t t);
/// The exact reduction over n ranks of reduceInput (avg: truncated for integers).
double reduceExpect(int op, int n, size_t i, strataDataType_t t);
/// Distinct values for data-movement collectives, exact in the dtype.
double moveValue(strataDataType_t t, int r, size_t i);
/// `v` rounded to the dtype (stored as a `t` element and read back).
double roundToType(strataDataType_t t, double v);
/// Whether `got`, read from a `t` element, is the result `expect` of reduceExpect with `op` (any
/// op for data movement): equal to `expect` rounded to the type, or for a floating-point average
/// within two roundings of it.
bool valueMatches(strataDataType_t t, int op, double got, double expect);

/// Runs one collective on `comm` and checks this rank's result. Collective over the comm: every
/// rank must call it with the same arguments.
void checkCollective(strataComm_t comm, CollType coll, strataDataType_t dtype, int op, size_t count, int root,
                     bool inPlace, CheckReport* report);

/// Grouped sends/receives forming an all-to-all-v (rank r sends (r + p) % 3 + 1 + base elements
/// to peer p), plus a self send.
void checkAllToAllV(strataComm_t comm, strataDataType_t dtype, size_t base, CheckReport* report);

/// Grouped send and receive on one buffer (in-place ring shift): rank r sends its buffer to r+1
/// and receives r-1's into the same buffer; the result must be r-1's original data.
void checkInPlaceShift(strataComm_t comm, size_t count, CheckReport* report);

/// The sweep used by the thread and process tests: every collective x in/out of place x counts,
/// every dtype x op on all-reduce/reduce-scatter/reduce, every root on rooted collectives.
void runStandardSweep(strataComm_t comm, bool quick, CheckReport* report);

/// The sweep for communicators spread over several (virtual) nodes: every collective x counts 0,
/// 1, 7, 1031, ~64K and ~1M elements (per-rank blocks of ~64K/n and ~1M/n elements for
/// reduce-scatter, all-gather, all-to-all, gather and scatter) x in / out of place, rooted
/// collectives with a root on every node (each at a different local rank; ~64K and ~1M: the last
/// node's); every dtype x op on all-reduce, reduce-scatter and reduce at odd counts; ~1M-element
/// reductions in several dtypes and ops; grouped send/recv (all-to-all-v, in-place shift).
/// `large` false leaves out the ~1M-element cases.
void runTopologySweep(strataComm_t comm, bool large, CheckReport* report);

}  // namespace strata::testing
