# SPDX-License-Identifier: Apache-2.0
# CollUninstall.cmake: removes what `cmake --install` wrote, as listed in
# install_manifest.txt (the uninstall target runs it with MANIFEST set),
# then the folder of libcoll's CMake package if that is left empty. Files
# already gone are reported, not errors; a file that cannot be removed is.
#
#   cmake -DMANIFEST=build/install_manifest.txt -P cmake/CollUninstall.cmake
if(NOT MANIFEST OR NOT EXISTS "${MANIFEST}")
  message(FATAL_ERROR "uninstall: no ${MANIFEST}: nothing was installed from "
                      "this build folder (run cmake --install first)")
endif()
file(STRINGS "${MANIFEST}" coll_files)
set(coll_removed 0)
set(coll_dirs "")
foreach(f IN LISTS coll_files)
  set(f "$ENV{DESTDIR}${f}")
  if(IS_SYMLINK "${f}" OR EXISTS "${f}")
    file(REMOVE "${f}")
    if(IS_SYMLINK "${f}" OR EXISTS "${f}")
      message(FATAL_ERROR "uninstall: cannot remove ${f} (as root, or with sudo?)")
    endif()
    message(STATUS "Removed: ${f}")
    math(EXPR coll_removed "${coll_removed} + 1")
  else()
    message(STATUS "Already gone: ${f}")
  endif()
  get_filename_component(d "${f}" DIRECTORY)
  get_filename_component(name "${d}" NAME)
  get_filename_component(parent "${d}" DIRECTORY)
  get_filename_component(parent_name "${parent}" NAME)
  if(name STREQUAL "coll" AND parent_name STREQUAL "cmake")
    list(APPEND coll_dirs "${d}")
  endif()
endforeach()
# lib/cmake/coll is libcoll's own: removed once empty. Shared folders
# (lib, include, bin, pkgconfig) stay.
list(REMOVE_DUPLICATES coll_dirs)
foreach(d IN LISTS coll_dirs)
  file(GLOB left "${d}/*")
  if(NOT left)
    file(REMOVE_RECURSE "${d}")
    message(STATUS "Removed: ${d}/")
  endif()
endforeach()
message(STATUS "uninstall: ${coll_removed} files removed; run ldconfig (as root) "
               "if libcoll was in the loader's cache")
