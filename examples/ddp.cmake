# SPDX-License-Identifier: Apache-2.0
# ddp_tcp: data-parallel SGD, one process per rank over TCP. Run it with
# `coll-run -n 4 ./ddp_tcp` (tests/tools runs it so).
add_executable(ddp_tcp ${CMAKE_CURRENT_LIST_DIR}/ddp_tcp.c)
target_link_libraries(ddp_tcp PRIVATE coll m)

# elastic_tcp: the same kind of training, surviving the loss of a rank
# with coll_comm_shrink. Run it with `coll-run -n 4 --keep-going`.
add_executable(elastic_tcp ${CMAKE_CURRENT_LIST_DIR}/elastic_tcp.c)
target_link_libraries(elastic_tcp PRIVATE coll m)
