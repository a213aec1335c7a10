/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_exchange.h: gather, scatter and all-to-all on NCCL comms, which NCCL
 * has no collective for: sends and receives inside the work item's NCCL
 * group (nccl_enqueue.c), a rank's own block copied on the stream. */
#ifndef COLL_NCCL_NCCL_EXCHANGE_H
#define COLL_NCCL_NCCL_EXCHANGE_H

#include "nccl/nccl_comm.h"

/* 1 for the work kinds below. */
int coll__nccl_is_exchange(coll_work_kind_t kind);
/* Checks that the loaded NCCL can run w (point-to-point: NCCL 2.7) and
 * maps its dtype into *dt. Before the group opens. */
coll_status_t coll__nccl_map_exchange(const coll_nccl_be_t *be,
                                      const coll_work_t *w, ncclDataType_t *dt,
                                      const char *what);
/* The calls, inside the open group, on stream st. */
ncclResult_t coll__nccl_exchange_calls(const coll_nccl_be_t *be,
                                       const coll_work_t *w, ncclDataType_t dt,
                                       cudaStream_t st);

#endif
