/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_rank.h: the pieces of a comm config every NCCL init reads. Per-rank
 * comm creation is declared in nccl_env.h, for the API layer. */
#ifndef COLL_NCCL_NCCL_RANK_H
#define COLL_NCCL_NCCL_RANK_H

#include "coll.h"
#include "cuda/gpu_table.h"

/* COLL_OK, or INVALID_ARG naming `what` when NCCL_COMM_BLOCKING=1 would
 * make the NCCL comm blocking (N7 of the second review). Before every NCCL
 * comm is made, and again once NCCL read its config files. */
coll_status_t coll__nccl_env_check(const char *what);
/* A nonblocking NCCL config named `name` (may be NULL). */
void coll__nccl_config(ncclConfig_t *out, const char *name);
/* The config's name, or NULL. */
const char *coll__nccl_config_name(const coll_comm_config_t *cfg);

#endif
