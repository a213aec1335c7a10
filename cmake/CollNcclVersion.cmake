# SPDX-License-Identifier: Apache-2.0
# coll_nccl_header_version: the NCCL version that an nccl.h declares.

# coll_nccl_header_version(HEADER CODE_VAR TEXT_VAR)
# Sets CODE_VAR to the version code as NCCL encodes it (2.14.3 is 21403;
# up to 2.8, major*1000 + minor*100 + patch, so 2.8.4 is 2804) and TEXT_VAR
# to "major.minor.patch". NCCL_VERSION_CODE is taken when the header has it,
# else the code is computed from NCCL_MAJOR, NCCL_MINOR and NCCL_PATCH. Both
# are 0 / "unknown" when the header declares neither (an unconfigured
# nccl.h.in, say).
function(coll_nccl_header_version header code_var text_var)
  file(STRINGS "${header}" defines
       REGEX "^[ \t]*#[ \t]*define[ \t]+NCCL_(MAJOR|MINOR|PATCH|VERSION_CODE)[ \t]+[0-9]+")
  foreach(part MAJOR MINOR PATCH VERSION_CODE)
    set(${part} "")
    foreach(line IN LISTS defines)
      if(line MATCHES "define[ \t]+NCCL_${part}[ \t]+([0-9]+)")
        set(${part} ${CMAKE_MATCH_1})
      endif()
    endforeach()
  endforeach()

  set(code 0)
  if(NOT VERSION_CODE STREQUAL "")
    set(code ${VERSION_CODE})
  elseif(NOT MAJOR STREQUAL "" AND NOT MINOR STREQUAL "" AND NOT PATCH STREQUAL "")
    if(MAJOR LESS_EQUAL 2 AND MINOR LESS_EQUAL 8)
      math(EXPR code "${MAJOR} * 1000 + ${MINOR} * 100 + ${PATCH}")
    else()
      math(EXPR code "${MAJOR} * 10000 + ${MINOR} * 100 + ${PATCH}")
    endif()
  endif()

  if(NOT MAJOR STREQUAL "" AND NOT MINOR STREQUAL "" AND NOT PATCH STREQUAL "")
    set(text "${MAJOR}.${MINOR}.${PATCH}")
  elseif(code GREATER_EQUAL 10000)
    math(EXPR MAJOR "${code} / 10000")
    math(EXPR MINOR "${code} % 10000 / 100")
    math(EXPR PATCH "${code} % 100")
    set(text "${MAJOR}.${MINOR}.${PATCH}")
  elseif(code GREATER 0)
    math(EXPR MAJOR "${code} / 1000")
    math(EXPR MINOR "${code} % 1000 / 100")
    math(EXPR PATCH "${code} % 100")
    set(text "${MAJOR}.${MINOR}.${PATCH}")
  else()
    set(text "unknown")
  endif()

  set(${code_var} ${code} PARENT_SCOPE)
  set(${text_var} ${text} PARENT_SCOPE)
endfunction()
