// values.h: verifiable inputs. Every input, and every partial and final result of a reduction in any
// order, is a small integer (or power of two) that the element type holds exactly, even in fp8, so
// each element's exact expected result is known in every dtype.
#pragma once

#include <cstddef>
#include <vector>

#include "perf/common/types.h"

namespace strata::perf {

/// A cyclic sequence of values: table[k], table[k+1], ... (period entries), or, without a table,
/// the integers k, k+1, ... modulo period.
class Seq {
 public:
  Seq(const double* table, size_t period, size_t start) : table_(table), period_(period), k_(start % period) {}
  double next() {
    double v = table_ ? table_[k_] : static_cast<double>(k_);
    if (++k_ == period_) k_ = 0;
    return v;
  }

 private:
  const double* table_;
  size_t period_, k_;
};

/// The inputs and expected results of one (dtype, op, rank count).
class Values {
 public:
  Values(DType dtype, Op op, int nranks);

  /// Reduction input of rank r from element i on.
  Seq reduceInput(int r, size_t i) const { return Seq(inputs_[r].data(), period_, i); }
  /// The exact reduction over all ranks from element i on (avg: sum / n, truncated for integers).
  Seq reduced(size_t i) const { return Seq(reduced_.data(), period_, i); }
  /// Data-movement input of rank r from element i on: distinct for nearby (r, i), exact in dtype.
  Seq moveInput(int r, size_t i) const;

 private:
  DType dtype_;
  size_t period_ = 1;
  std::vector<std::vector<double>> inputs_;  // [rank][i % period]
  std::vector<double> reduced_;              // [i % period]
};

}  // namespace strata::perf
