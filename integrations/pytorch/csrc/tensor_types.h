// tensor_types.h: how torch tensors map onto strata buffers: element types, reductions, and the
// checks every operation runs on its tensors (CPU, dense, matching sizes) with errors that name
// the operation and what was wrong.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <optional>
#include <string>
#include <vector>

#include "strata/strata.h"

namespace strata_torch {

/// strata's element type for a torch dtype, or nullopt (int16, complex, bool and quantized types
/// have none: complex goes through its real view, bool through uint8 with logical reductions).
std::optional<strataDataType_t> elementType(at::ScalarType t);

/// A reduction as strata runs it on a contiguous buffer: the buffer's (possibly real-viewed)
/// element type and count, and strata's op. `bitwise` means strata has no such op: the caller
/// all-gathers and reduces with torch (BAND/BOR/BXOR on integers, XOR on bool).
struct Reduction {
  strataDataType_t dtype = strataFloat32;
  strataRedOp_t op = strataSum;
  size_t count = 0;
  bool bitwise = false;
  c10d::ReduceOp::RedOpType torchOp = c10d::ReduceOp::SUM;
  double premulFactor = 0;  ///< PREMUL_SUM's factor (op is created per call)
  bool premul = false;
};

/// Plans reducing `t` (contiguous) with `op` for operation `what`; throws a clear error for
/// combinations strata cannot do (e.g. MAX on complex, any reduction on int16).
Reduction planReduction(const at::Tensor& t, const c10d::ReduceOp& op, const char* what);

/// Reduces the rows of `gathered` (n copies of the input, stacked on a new dim 0) into `out`
/// with a bitwise op: the fallback for ops strata does not have.
void reduceGathered(const at::Tensor& gathered, c10d::ReduceOp::RedOpType op, at::Tensor& out);

/// Throws unless `t` is a dense CPU tensor (GPU tensors are pointed to the NCCL path).
void checkCpuDense(const at::Tensor& t, const char* what);
/// Throws unless `v` holds exactly `n` tensors.
void checkCount(const std::vector<at::Tensor>& v, size_t n, const char* what, const char* which);
/// Throws unless every tensor of `v` has the dtype and number of elements of `like`.
void checkSameShape(const std::vector<at::Tensor>& v, const at::Tensor& like, const char* what, const char* which);

/// Bytes of a tensor's data (numel * element size).
inline size_t nbytes(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

/// The strata error of the last failed call on `comm`, as one line for an exception.
std::string lastError(strataResult_t rc, strataComm_t comm);

}  // namespace strata_torch
