// torch_compat.h: what differs between the PyTorch versions the backend builds against, in one
// place. PyTorch 1.x: a third-party backend is a c10d::ProcessGroup. PyTorch 2.x: it is a
// c10d::Backend, which a ProcessGroup dispatches to by device. Members that only newer 2.x
// versions declare (split, shutdown, abort, getBackendOptions) are detected from the headers
// themselves, so that one source serves every version whose headers could be read.
#pragma once

#include <torch/version.h>

#include <type_traits>
#include <vector>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#define STRATA_TORCH_BACKEND 1  // a c10d::Backend subclass
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#define STRATA_TORCH_BACKEND 0  // a c10d::ProcessGroup subclass
#endif
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

namespace strata_torch {

#if STRATA_TORCH_BACKEND
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

/// PREMUL_SUM's factor, as the running PyTorch stores it (1.13: tensor_factors, a vector; 2.x:
/// tensor_factor, one tensor), or its double when no tensor was given.
inline double premulFactor(const c10d::NCCLPreMulSumSupplement& sup) {
#if STRATA_TORCH_BACKEND
  return sup.tensor_factor.defined() ? sup.tensor_factor.item<double>() : sup.double_factor;
#else
  return sup.tensor_factors.empty() ? sup.double_factor : sup.tensor_factors[0].item<double>();
#endif
}

#if STRATA_TORCH_BACKEND
/// True when c10d::Backend declares `split(store, ranks, options)` (newer 2.x): the backend then
/// implements it (and says supportsSplitting); older versions split through new_group only.
template <class B, class = void>
struct HasSplit : std::false_type {};
template <class B>
struct HasSplit<B, std::void_t<decltype(static_cast<c10::intrusive_ptr<B> (B::*)(
                                            const c10::intrusive_ptr<c10d::Store>&, const std::vector<int>&,
                                            const c10::intrusive_ptr<typename B::Options>&)>(&B::split))>>
    : std::true_type {};
constexpr bool kBackendHasSplit = HasSplit<c10d::Backend>::value;
#else
constexpr bool kBackendHasSplit = false;
#endif

}  // namespace strata_torch
