/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_rank.h: per-rank NCCL comm creation on a chosen device, and the
 * pieces of a comm config every NCCL init reads. */
#ifndef COLL_NCCL_NCCL_RANK_H
#define COLL_NCCL_NCCL_RANK_H

#include "coll.h"
#include "cuda/gpu_table.h"

/* coll_comm_init_rank on CUDA device `device` (-1: the current one); the
 * caller's current device is unchanged. Bounded by the config's timeout and
 * abort handle. One thread. */
coll_status_t coll__nccl_comm_init(int rank, int world,
                                   const coll_unique_id_t *id, int device,
                                   const coll_comm_config_t *cfg,
                                   coll_comm_t **out);

/* A nonblocking NCCL config named `name` (may be NULL). */
void coll__nccl_config(ncclConfig_t *out, const char *name);
/* The config's timeout for an init (0 or no config: COLL_TIMEOUT_MS). */
int64_t coll__nccl_init_timeout(const coll_comm_config_t *cfg);
/* The config's name, or NULL. */
const char *coll__nccl_config_name(const coll_comm_config_t *cfg);

#endif
