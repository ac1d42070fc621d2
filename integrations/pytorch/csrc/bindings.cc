// bindings.cc: the strata_torch._C Python module: the process-group creator torch.distributed
// calls for backend "strata", and the library version.
#include <pybind11/chrono.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/utils/pybind.h>

#include <chrono>
#include <stdexcept>

#include "process_group.h"

namespace py = pybind11;

namespace {

/// Seconds for `iters` in-place float sums of `t` straight through strata's C API on the group's
/// communicator, with no torch dispatch, Work or progress thread: the floor the backend is
/// measured against (perf/torch). The group must be idle.
double nativeAllReduceSeconds(const c10::intrusive_ptr<c10d::ProcessGroup>& pg, at::Tensor t, int iters) {
  auto* s = dynamic_cast<strata_torch::ProcessGroupStrata*>(pg.get());
  if (!s) throw std::invalid_argument("native_all_reduce_seconds: not a strata process group");
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
  // The Store and ProcessGroup Python types are torch's; they must be registered first.
  py::module::import("torch.distributed");
  m.def("create_process_group", &strata_torch::createProcessGroupStrata, py::arg("store"), py::arg("rank"),
        py::arg("size"), py::arg("timeout"), py::call_guard<py::gil_scoped_release>(),
        "Makes a strata process group: rank 0 puts the communicator's unique id in `store`.");
  m.def("native_all_reduce_seconds", &nativeAllReduceSeconds, py::arg("group"), py::arg("tensor"), py::arg("iters"),
        py::call_guard<py::gil_scoped_release>());
  m.def("version", [] {
    int v = 0;
    strataGetVersion(&v);
    return v;
  });
}
