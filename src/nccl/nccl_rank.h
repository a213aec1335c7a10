/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_rank.h: per-rank NCCL comm creation on a chosen device. */
#ifndef COLL_NCCL_NCCL_RANK_H
#define COLL_NCCL_NCCL_RANK_H

#include "coll.h"

/* coll_comm_init_rank on CUDA device `device` (-1: the current one); the
 * caller's current device is unchanged. One thread. */
coll_status_t coll__nccl_comm_init(int rank, int world,
                                   const coll_unique_id_t *id, int device,
                                   const coll_comm_config_t *cfg,
                                   coll_comm_t **out);

#endif
