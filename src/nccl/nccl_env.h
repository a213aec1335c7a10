/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_env.h: what coll_comm_init_env asks of the NCCL backend. Without the
 * backend built, src/nccl provides versions that select nothing. */
#ifndef COLL_NCCL_NCCL_ENV_H
#define COLL_NCCL_NCCL_ENV_H

#include "bootstrap/store.h"
#include "coll.h"

/* 1 if coll_comm_init_env should build an NCCL comm (COLL_BACKEND=nccl, or
 * auto with NCCL loadable and a CUDA device visible for each local rank:
 * LOCAL_WORLD_SIZE, when set, is at most the device count), else 0. With
 * COLL_BACKEND=nccl and NCCL unusable or too few devices, returns -1 with
 * the reason recorded (COLL_ERR_NOT_AVAILABLE). Any thread. */
int coll__nccl_env_selected(void);

/* Builds the NCCL comm for (rank, world): rank 0 creates the unique id and
 * sets it in the store, the others wait for it (until timeout_ms). */
coll_status_t coll__nccl_comm_from_store(coll_store_t *store, int rank,
                                         int world,
                                         const coll_comm_config_t *cfg,
                                         int64_t timeout_ms,
                                         coll_comm_t **out);

#endif
