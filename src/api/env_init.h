/* SPDX-License-Identifier: Apache-2.0 */
/* env_init.h: the pieces of coll_comm_init_env that tests reach on their
 * own. */
#ifndef COLL_API_ENV_INIT_H
#define COLL_API_ENV_INIT_H

#include <stdint.h>

#include "coll.h"

/* Builds the NCCL comm for (rank, world) through the store (libcoll's own,
 * wrapped by coll__store_client_ops, or the caller's): rank 0 creates the
 * unique id and sets it under COLL_KV_UID_KEY, the others wait for it
 * (until timeout_ms; < 0: no bound); then every rank joins on the device
 * LOCAL_RANK picks. COLL_ERR_NOT_AVAILABLE at once when NCCL is not
 * usable. One thread. */
coll_status_t coll__env_nccl_comm(const coll_store_ops_t *store, int rank,
                                  int world, const coll_comm_config_t *cfg,
                                  int64_t timeout_ms, coll_comm_t **out);

/* Where this rank is in the job: what coll_comm_init_env reads from the
 * launcher's variables. */
typedef struct coll_env_job {
  int rank;
  int world;
  const char *master_addr; /* MASTER_ADDR */
  int master_port;         /* MASTER_PORT */
} coll_env_job_t;

/* coll_comm_init_env once the variables are read (knobs loaded): the
 * backend COLL_BACKEND picks (nccl/nccl_env.h; under auto the ranks
 * compare their GPUs at the rendezvous) for rank j->rank. Errors carry no
 * "comm_init_env" prefix yet. Tests call it from rank threads, which
 * share one environment. One thread per rank. */
coll_status_t coll__env_comm_create(const coll_env_job_t *j,
                                    const coll_comm_config_t *cfg,
                                    coll_comm_t **out);

/* Why the ranks of an auto job run the CPU ring, from the verdict on
 * their GPUs (bootstrap/rendezvous/gpu_verdict.h). Rank 0 warns where two
 * ranks share a GPU (a launch that meant to give each its own would
 * otherwise run slower unnoticed); every other line is INFO. Any
 * thread. */
struct coll_gpus;
void coll__env_say_cpu(int rank, const struct coll_gpus *g);

#endif
