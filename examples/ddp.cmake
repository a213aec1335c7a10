# SPDX-License-Identifier: Apache-2.0
# ddp_tcp: data-parallel SGD, one process per rank over TCP. Run it with
# `coll-run -n 4 ./ddp_tcp` (tests/tools runs it so).
add_executable(ddp_tcp ${CMAKE_CURRENT_LIST_DIR}/ddp_tcp.c)
target_link_libraries(ddp_tcp PRIVATE coll m)
