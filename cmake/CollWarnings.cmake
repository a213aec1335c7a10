# SPDX-License-Identifier: Apache-2.0
# CollWarnings: the warning flags of libcoll's own targets. Each flag is
# added only when the compiler accepts it (gcc and clang both do today), and
# only to libcoll's targets, never directory-wide, so a project that embeds
# libcoll with add_subdirectory keeps its own flags. COLL_WERROR adds
# -Werror: CI turns it on, a user building a release does not need it.
include(CheckCCompilerFlag)

set(COLL_WARNING_FLAGS "")
foreach(flag -Wall -Wextra -Wshadow -Wstrict-prototypes)
  string(MAKE_C_IDENTIFIER "COLL_CC_HAS${flag}" var)
  check_c_compiler_flag(${flag} ${var})
  if(${var})
    list(APPEND COLL_WARNING_FLAGS ${flag})
  endif()
endforeach()
if(COLL_WERROR)
  check_c_compiler_flag(-Werror COLL_CC_HAS_Werror)
  if(NOT COLL_CC_HAS_Werror)
    message(FATAL_ERROR "COLL_WERROR=ON, but ${CMAKE_C_COMPILER} does not accept -Werror")
  endif()
  list(APPEND COLL_WARNING_FLAGS -Werror)
endif()

# C++ (the torch extension only) gets the flags both languages share.
set(COLL_CXX_WARNING_FLAGS ${COLL_WARNING_FLAGS})
list(REMOVE_ITEM COLL_CXX_WARNING_FLAGS -Wstrict-prototypes)

# coll_target_warnings(target...): the flags on each target's own sources.
function(coll_target_warnings)
  foreach(t IN LISTS ARGN)
    target_compile_options(${t} PRIVATE
      $<$<COMPILE_LANGUAGE:C>:${COLL_WARNING_FLAGS}>
      $<$<COMPILE_LANGUAGE:CXX>:${COLL_CXX_WARNING_FLAGS}>)
  endforeach()
endfunction()

# coll_target_warnings_in(dir): the flags on every target that compiles C
# (or C++), defined in `dir` or below it. Called once, after every
# subdirectory was added, so that no new test, tool or example can be left without them.
function(coll_target_warnings_in dir)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY)$")
      coll_target_warnings(${t})
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    coll_target_warnings_in(${sub})
  endforeach()
endfunction()
