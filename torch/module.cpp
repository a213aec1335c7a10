// SPDX-License-Identifier: Apache-2.0
// module.cpp: the Python module _coll_torch, which python/coll/distributed.py
// loads to register the "coll" backend with torch.distributed.
#include <torch/python.h>

#include <chrono>
#include <functional>

#include "process_group_coll.hpp"

namespace py = pybind11;

namespace {

// A group dropped by Python is destroyed with the GIL held; its progress
// thread may need the GIL to finish (a future's Python callback).
void runWithoutGil(const std::function<void()> &f) {
  if (Py_IsInitialized() && PyGILState_Check()) {
    py::gil_scoped_release release;
    f();
  } else {
    f();
  }
}

}  // namespace

PYBIND11_MODULE(_coll_torch, m) {
  m.doc() = "libcoll's torch.distributed process group";
  coll_torch::ProcessGroupColl::runBlocking = runWithoutGil;
  // torch's ProcessGroup type, so the group is accepted wherever torch
  // takes one (dist.all_reduce(group=...), DistributedDataParallel).
  py::object base =
      py::module::import("torch.distributed").attr("ProcessGroup");
  py::class_<coll_torch::ProcessGroupColl,
             c10::intrusive_ptr<coll_torch::ProcessGroupColl>>(
      m, "ProcessGroupColl", base)
      .def(py::init([](const c10::intrusive_ptr<c10d::Store> &store, int rank,
                       int size, int64_t timeout_ms) {
             return c10::make_intrusive<coll_torch::ProcessGroupColl>(
                 store, rank, size, std::chrono::milliseconds(timeout_ms));
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"),
           py::arg("timeout_ms"),
           // The rendezvous waits for the other ranks.
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("comm_backend",
                             &coll_torch::ProcessGroupColl::commBackend)
      // As torch's own groups answer it: the backend's name and the
      // timeout calls default to.
      .def_property_readonly(
          "options", [](const coll_torch::ProcessGroupColl &pg) {
            return c10::make_intrusive<c10d::ProcessGroup::Options>(
                "coll", pg.timeout());
          });
  m.def("version", &coll_version, "libcoll's version, as coll_version()");
}
