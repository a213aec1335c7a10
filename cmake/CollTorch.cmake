# SPDX-License-Identifier: Apache-2.0
# CollTorch: decides whether to build the torch.distributed backend
# (torch/), and finds what it needs: libtorch's CMake package (Debian's
# libtorch-dev), libtorch_python, Python 3's headers and pybind11. AUTO
# builds it when all of them are found, libcoll is the top-level project and
# no sanitizer is on (torch's libraries are not built with them); ON
# requires them; OFF never. Sets COLL_HAVE_TORCH.
set(COLL_HAVE_TORCH OFF)
if(COLL_BUILD_TORCH STREQUAL "OFF")
  return()
endif()
set(coll_torch_why "")
if(COLL_BUILD_TORCH STREQUAL "AUTO" AND NOT PROJECT_IS_TOP_LEVEL)
  set(coll_torch_why "libcoll is embedded in another project")
elseif(COLL_BUILD_TORCH STREQUAL "AUTO" AND COLL_SANITIZE)
  set(coll_torch_why "COLL_SANITIZE is set")
endif()
if(coll_torch_why STREQUAL "")
  enable_language(CXX)
  # The interpreter torch is installed for: Debian's, not one first on PATH.
  if(NOT Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python3_EXECUTABLE /usr/bin/python3)
  endif()
  find_package(Python3 QUIET COMPONENTS Interpreter Development.Module)
  find_package(Torch QUIET)
  set(PYBIND11_FINDPYTHON ON)
  find_package(pybind11 CONFIG QUIET)
  find_library(COLL_TORCH_PYTHON_LIBRARY torch_python
               HINTS ${TORCH_INSTALL_PREFIX}/lib
               DOC "libtorch_python, for the bindings of torch's types")
  if(NOT Python3_Development.Module_FOUND)
    set(coll_torch_why "Python 3's headers were not found (python3-dev)")
  elseif(NOT Torch_FOUND)
    set(coll_torch_why "libtorch's CMake package was not found (libtorch-dev)")
  elseif(NOT pybind11_FOUND)
    set(coll_torch_why "pybind11 was not found (pybind11-dev)")
  elseif(NOT COLL_TORCH_PYTHON_LIBRARY)
    set(coll_torch_why "libtorch_python was not found (libtorch-dev)")
  endif()
endif()
if(coll_torch_why STREQUAL "")
  set(COLL_HAVE_TORCH ON)
  message(STATUS "libcoll: torch backend ON (torch ${Torch_VERSION}, Python ${Python3_VERSION} at ${Python3_EXECUTABLE})")
elseif(COLL_BUILD_TORCH STREQUAL "ON")
  message(FATAL_ERROR "COLL_BUILD_TORCH=ON but ${coll_torch_why}")
else()
  message(STATUS "libcoll: torch backend OFF (${coll_torch_why})")
endif()
