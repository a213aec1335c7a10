# SPDX-License-Identifier: Apache-2.0
# Findlibuv: libuv through pkg-config, else a plain header/library search.
# Defines libuv::libuv.
if(TARGET libuv::libuv)
  set(libuv_FOUND TRUE)
  return()
endif()
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_LIBUV QUIET libuv)
endif()
find_path(LIBUV_INCLUDE_DIR uv.h HINTS ${PC_LIBUV_INCLUDE_DIRS})
find_library(LIBUV_LIBRARY NAMES uv libuv HINTS ${PC_LIBUV_LIBRARY_DIRS})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(libuv REQUIRED_VARS LIBUV_LIBRARY LIBUV_INCLUDE_DIR
  VERSION_VAR PC_LIBUV_VERSION)
if(libuv_FOUND)
  add_library(libuv::libuv UNKNOWN IMPORTED)
  set_target_properties(libuv::libuv PROPERTIES
    IMPORTED_LOCATION "${LIBUV_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${LIBUV_INCLUDE_DIR}")
endif()
mark_as_advanced(LIBUV_INCLUDE_DIR LIBUV_LIBRARY)
