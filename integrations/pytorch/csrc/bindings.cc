// bindings.cc: the strata_torch._C Python module: the backend creator torch.distributed calls for
// backend "strata", shutdown/abort for any strata group, the library version, and a native-API
// timing hook for perf/torch.
#include <pybind11/chrono.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/utils/pybind.h>

#include <chrono>
#include <stdexcept>

#include "backend.h"

namespace py = pybind11;

namespace {

using strata_torch::StrataBackend;

/// The strata backend behind `group`: a ProcessGroup (its CPU backend on 2.x) or, on 2.x, a
/// Backend as the creator returned it. Throws when it is not strata's.
c10::intrusive_ptr<StrataBackend> strataOf(const py::object& group, const char* what) {
  c10::intrusive_ptr<strata_torch::BackendBase> base;
#if STRATA_TORCH_BACKEND
  if (py::isinstance<c10d::ProcessGroup>(group)) {
    auto pg = group.cast<c10::intrusive_ptr<c10d::ProcessGroup>>();
    if (!pg->hasBackends()) throw std::invalid_argument(std::string(what) + ": the group has no backend");
    base = pg->getBackend(c10::DeviceType::CPU);
  } else {
    base = group.cast<c10::intrusive_ptr<c10d::Backend>>();
  }
#else
  base = group.cast<c10::intrusive_ptr<c10d::ProcessGroup>>();
#endif
  auto s = c10::dynamic_intrusive_pointer_cast<StrataBackend>(base);
  if (!s) throw std::invalid_argument(std::string(what) + ": not a strata process group");
  return s;
}

/// Seconds for `iters` in-place float sums of `t` straight through strata's C API on the group's
/// communicator, with no torch dispatch, Work or progress thread: the floor the backend is
/// measured against (perf/torch). The group must be idle.
double nativeAllReduceSeconds(const c10::intrusive_ptr<StrataBackend>& s, at::Tensor t, int iters) {
  if (!t.is_contiguous() || t.scalar_type() != at::kFloat)
    throw std::invalid_argument("native_all_reduce_seconds: needs a contiguous float32 tensor");
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    const strataResult_t rc =
        strataAllReduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), strataFloat32, strataSum, s->comm());
    if (rc != strataSuccess) throw std::runtime_error(strata_torch::lastError(rc, s->comm()));
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "strata as a torch.distributed backend (import strata_torch, then backend=\"strata\")";
  // The Store, Backend and ProcessGroup Python types are torch's; they must be registered first.
  py::module::import("torch.distributed");
  m.def("create_backend", &strata_torch::createStrataBackend, py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout"), py::call_guard<py::gil_scoped_release>(),
        "Makes a strata backend (a ProcessGroup on torch 1.x): rank 0 puts the communicator's unique id in `store`.");
  m.attr("TORCH_BACKEND_API") = py::bool_(STRATA_TORCH_BACKEND);
  m.def(
      "native_all_reduce_seconds",
      [](const py::object& group, at::Tensor t, int iters) {
        auto s = strataOf(group, "native_all_reduce_seconds");
        py::gil_scoped_release nogil;
        return nativeAllReduceSeconds(s, std::move(t), iters);
      },
      py::arg("group"), py::arg("tensor"), py::arg("iters"));
  m.def(
      "shutdown",
      [](const py::object& group) {
        auto s = strataOf(group, "shutdown");
        py::gil_scoped_release nogil;
        s->shutdown();
      },
      py::arg("group"), "Runs the group's queued operations, then frees its communicator. Idempotent.");
  m.def(
      "abort",
      [](const py::object& group) {
        auto s = strataOf(group, "abort");
        py::gil_scoped_release nogil;
        s->abort();
      },
      py::arg("group"), "Stops the group's running and queued operations (they raise), frees it. Idempotent.");
  m.def(
      "is_shut_down", [](const py::object& group) { return strataOf(group, "is_shut_down")->isShutDown(); },
      py::arg("group"));
  m.def("version", [] {
    int v = 0;
    strataGetVersion(&v);
    return v;
  });
}
