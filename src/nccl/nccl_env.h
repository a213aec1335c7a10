/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_env.h: what the comm constructors of the API layer
 * (coll_comm_init_rank, coll_comm_init_env) ask of the NCCL backend.
 * Without the backend built, nccl_off.c provides versions that select
 * nothing and build nothing. */
#ifndef COLL_NCCL_NCCL_ENV_H
#define COLL_NCCL_NCCL_ENV_H

#include "coll.h"

/* 1 if coll_comm_init_env should build an NCCL comm (COLL_BACKEND=nccl, or
 * auto with NCCL loadable and a CUDA device visible for each local rank:
 * the local world size (LOCAL_WORLD_SIZE or the launcher's, see
 * core/launch.h), when known, is at most the device count), else 0. With
 * COLL_BACKEND=nccl and NCCL unusable, returns -1 with the reason recorded
 * (COLL_ERR_NOT_AVAILABLE); ranks on one GPU are NCCL's to refuse. Any
 * thread. */
int coll__nccl_env_selected(void);

/* COLL_OK when libnccl and the CUDA runtime are loaded and usable, else
 * COLL_ERR_NOT_AVAILABLE naming `what` and the missing piece. Any thread. */
coll_status_t coll__nccl_available(const char *what);

/* coll_comm_init_rank on CUDA device `device` (-1: the current one); the
 * caller's current device is unchanged. Bounded by the config's timeout and
 * abort handle. One thread. */
coll_status_t coll__nccl_comm_init(int rank, int world,
                                   const coll_unique_id_t *id, int device,
                                   const coll_comm_config_t *cfg,
                                   coll_comm_t **out);

/* coll_comm_init_rank on the device of the local rank (LOCAL_RANK or the
 * launcher's, see core/launch.h; modulo the visible devices, like
 * torchrun's one-process-per-GPU launch; without one the current device). The
 * caller's current device is unchanged. One thread. */
coll_status_t coll__nccl_comm_init_local(int rank, int world,
                                         const coll_unique_id_t *id,
                                         const coll_comm_config_t *cfg,
                                         coll_comm_t **out);

#endif
