/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_env.h: what the comm constructors of the API layer
 * (coll_comm_init_rank, coll_comm_init_env) ask of the NCCL backend.
 * Without the backend built, nccl_off.c provides versions that select
 * nothing and build nothing. */
#ifndef COLL_NCCL_NCCL_ENV_H
#define COLL_NCCL_NCCL_ENV_H

#include <stddef.h>

#include "coll.h"

/* What coll__nccl_env_selected answers. */
enum {
  COLL_NCCL_PICK_CPU = 0,  /* the CPU ring (COLL_BACKEND=cpu, or auto
                              without a usable NCCL here) */
  COLL_NCCL_PICK_NCCL = 1, /* NCCL (COLL_BACKEND=nccl) */
  /* auto with NCCL usable here: NCCL where every rank of the comm has a
   * GPU of its own, which the ranks learn together by comparing the GPU
   * each would use (coll__nccl_env_gpu, bootstrap/rendezvous/
   * gpu_verdict.h), else the CPU ring. A GPU count cannot tell: where
   * each rank sees only its own GPU (srun --gpus-per-task=1, a
   * CUDA_VISIBLE_DEVICES per rank), every rank calls it device 0. */
  COLL_NCCL_PICK_ASK = 2
};

/* The backend COLL_BACKEND picks for coll_comm_init_env and
 * coll_comm_init_store, as far as this rank can tell alone (above). With
 * COLL_BACKEND=nccl and NCCL unusable, returns -1 with the reason recorded
 * (COLL_ERR_NOT_AVAILABLE); ranks on one GPU are then NCCL's to refuse.
 * Leaves no error text behind otherwise. Any thread. */
int coll__nccl_env_selected(void);

/* The PCI bus id ("0000:3b:00.0") of the GPU this rank would run NCCL on:
 * the device its local rank picks (coll__nccl_comm_init_local), else the
 * current one; at most cap bytes with the NUL. COLL_ERR_NOT_AVAILABLE or
 * COLL_ERR_BACKEND with the reason when there is none. Leaves the
 * thread's current device as it was. Any thread. */
coll_status_t coll__nccl_env_gpu(char *out, size_t cap);

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
