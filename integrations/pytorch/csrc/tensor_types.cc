// tensor_types.cc: dtype and reduction mapping between torch and strata, and tensor checks.
#include "tensor_types.h"

#include "torch_compat.h"

#include <stdexcept>

namespace strata_torch {

std::optional<strataDataType_t> elementType(at::ScalarType t) {
  switch (t) {
    case at::kByte: return strataUint8;
    case at::kChar: return strataInt8;
    case at::kInt: return strataInt32;
    case at::kLong: return strataInt64;
    case at::kHalf: return strataFloat16;
    case at::kFloat: return strataFloat32;
    case at::kDouble: return strataFloat64;
    case at::kBFloat16: return strataBfloat16;
    default: return std::nullopt;
  }
}

namespace {

[[noreturn]] void unsupported(const char* what, const at::Tensor& t, const std::string& why) {
  throw std::invalid_argument(std::string("strata ") + what + ": " + why + " (tensor dtype " +
                              std::string(c10::toString(t.scalar_type())) + ")");
}

const char* opName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

}  // namespace

Reduction planReduction(const at::Tensor& t, const c10d::ReduceOp& op, const char* what) {
  Reduction r;
  r.torchOp = op.op_;
  r.count = static_cast<size_t>(t.numel());
  const at::ScalarType st = t.scalar_type();
  const bool isComplex = at::isComplexType(st);
  const bool isBool = st == at::kBool;
  const bool isInteger = at::isIntegralType(st, /*includeBool=*/false);
  if (isComplex) {
    // Sums and averages act on real and imaginary parts alike; nothing else is defined.
    if (r.torchOp != c10d::ReduceOp::SUM && r.torchOp != c10d::ReduceOp::AVG && r.torchOp != c10d::ReduceOp::PREMUL_SUM)
      unsupported(what, t, std::string("complex tensors support SUM, AVG and PREMUL_SUM only, not ") + opName(r.torchOp));
    const auto real = elementType(c10::toRealValueType(st));
    if (!real) unsupported(what, t, "no strata element type for this complex type's real part");
    r.dtype = *real;
    r.count *= 2;
  } else if (isBool) {
    r.dtype = strataUint8;
  } else {
    const auto e = elementType(st);
    if (!e) unsupported(what, t, "strata has no element type for this dtype; use int32/int64/float types");
    r.dtype = *e;
  }
  switch (r.torchOp) {
    case c10d::ReduceOp::SUM: r.op = isBool ? strataMax : strataSum; break;  // bool sum: logical or
    case c10d::ReduceOp::AVG:
      if (isBool) unsupported(what, t, "AVG of bool tensors is not defined");
      r.op = strataAvg;
      break;
    case c10d::ReduceOp::PRODUCT: r.op = isBool ? strataMin : strataProd; break;  // bool product: logical and
    case c10d::ReduceOp::MIN: r.op = strataMin; break;
    case c10d::ReduceOp::MAX: r.op = strataMax; break;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      if (!isInteger && !isBool) unsupported(what, t, std::string(opName(r.torchOp)) + " needs an integer or bool tensor");
      if (isBool && r.torchOp == c10d::ReduceOp::BAND) r.op = strataMin;
      else if (isBool && r.torchOp == c10d::ReduceOp::BOR) r.op = strataMax;
      else r.bitwise = true;
      break;
    case c10d::ReduceOp::PREMUL_SUM: {
      if (isBool || isInteger) unsupported(what, t, "PREMUL_SUM needs a floating-point tensor");
      auto* sup = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      if (!sup) unsupported(what, t, "PREMUL_SUM without its factor");
      r.premulFactor = premulFactor(*sup);
      r.premul = true;
      r.op = strataSum;
      break;
    }
    default: unsupported(what, t, std::string("unknown reduce op ") + std::to_string(int(r.torchOp)));
  }
  return r;
}

void reduceGathered(const at::Tensor& gathered, c10d::ReduceOp::RedOpType op, at::Tensor& out) {
  at::Tensor acc = gathered[0].clone();
  for (int64_t i = 1; i < gathered.size(0); ++i) {
    if (op == c10d::ReduceOp::BAND) acc.bitwise_and_(gathered[i]);
    else if (op == c10d::ReduceOp::BOR) acc.bitwise_or_(gathered[i]);
    else acc.bitwise_xor_(gathered[i]);
  }
  out.copy_(acc.view(out.sizes()));
}

void checkCpuDense(const at::Tensor& t, const char* what) {
  if (!t.defined()) throw std::invalid_argument(std::string("strata ") + what + ": an undefined tensor");
  if (t.is_cuda())
    throw std::invalid_argument(std::string("strata ") + what +
                                ": CUDA tensors go through the NCCL path: use backend=\"nccl\" with strata's "
                                "libnccl.so.2 first on the library path; the \"strata\" backend takes CPU tensors");
  if (!t.device().is_cpu())
    throw std::invalid_argument(std::string("strata ") + what + ": tensors on device " + t.device().str() +
                                " are not supported; use CPU tensors");
  if (t.layout() != at::kStrided)
    throw std::invalid_argument(std::string("strata ") + what + ": only dense (strided) tensors are supported, not " +
                                c10::str(t.layout()));
}

void checkCount(const std::vector<at::Tensor>& v, size_t n, const char* what, const char* which) {
  if (v.size() != n)
    throw std::invalid_argument(std::string("strata ") + what + ": expected " + std::to_string(n) + " " + which +
                                " tensor(s), got " + std::to_string(v.size()));
}

void checkSameShape(const std::vector<at::Tensor>& v, const at::Tensor& like, const char* what, const char* which) {
  for (size_t i = 0; i < v.size(); ++i) {
    checkCpuDense(v[i], what);
    if (v[i].scalar_type() != like.scalar_type())
      throw std::invalid_argument(std::string("strata ") + what + ": " + which + " tensor " + std::to_string(i) +
                                  " has dtype " + c10::toString(v[i].scalar_type()) + ", expected " +
                                  c10::toString(like.scalar_type()));
    if (v[i].numel() != like.numel())
      throw std::invalid_argument(std::string("strata ") + what + ": " + which + " tensor " + std::to_string(i) +
                                  " has " + std::to_string(v[i].numel()) + " elements, expected " +
                                  std::to_string(like.numel()));
  }
}

std::string lastError(strataResult_t rc, strataComm_t comm) {
  return std::string(strataGetErrorString(rc)) + ": " + strataGetLastError(comm);
}

}  // namespace strata_torch
