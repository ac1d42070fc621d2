// bindings.cc: the strata_torch._C Python module: the process-group creator torch.distributed
// calls for backend "strata", and the library version.
#include <pybind11/chrono.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/utils/pybind.h>

#include "process_group.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "strata as a torch.distributed backend (import strata_torch, then backend=\"strata\")";
  // The Store and ProcessGroup Python types are torch's; they must be registered first.
  py::module::import("torch.distributed");
  m.def("create_process_group", &strata_torch::createProcessGroupStrata, py::arg("store"), py::arg("rank"),
        py::arg("size"), py::arg("timeout"), py::call_guard<py::gil_scoped_release>(),
        "Makes a strata process group: rank 0 puts the communicator's unique id in `store`.");
  m.def("version", [] {
    int v = 0;
    strataGetVersion(&v);
    return v;
  });
}
