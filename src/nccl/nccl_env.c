/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_env.c: what coll_comm_init_env asks of the NCCL backend: whether to
 * build an NCCL comm (COLL_BACKEND), and the comm itself from a unique id
 * on the device LOCAL_RANK picks. How the id reaches every rank (the
 * rendezvous store) is the API layer's business. */
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "core/error.h"
#include "core/launch.h"
#include "core/log.h"
#include "cuda/gpu_table.h"
#include "nccl/nccl_env.h"
#include "nccl/nccl_rank.h"

/* NCCL refuses two ranks of one comm on one device ("Duplicate GPU
 * detected" at init, init.cc:903-907). env:// puts every rank of the host
 * in one comm, so under auto a host that runs more local ranks
 * (LOCAL_WORLD_SIZE, set by torchrun and coll-run, or mpirun's or srun's
 * count: core/launch.h) than this process sees CUDA devices gets the CPU
 * ring. That cannot tell ranks sharing a GPU from ranks that each see only
 * their own (srun --gpus-per-task=1, a CUDA_VISIBLE_DEVICES per rank), so
 * COLL_BACKEND=nccl does not ask: NCCL's own check decides, and its refusal
 * reads clearly (nccl_rank.c). Returns 1 and the numbers when the ranks
 * outnumber the devices, 0 otherwise (also when LOCAL_WORLD_SIZE is
 * unset). */
static int ranks_exceed_devices(const coll_nccl_table_t *t, int64_t *ranks,
                                const char **var, int *devices) {
  int count = 0;
  if (coll__launch_local_world(ranks, var) != 1 || *ranks <= 1) return 0;
  if (t->cuda_get_device_count(&count) != cudaSuccess || count <= 0) return 0;
  *devices = count;
  return *ranks > count;
}

int coll__nccl_env_selected(void) {
  const coll_nccl_table_t *t;
  int64_t choice = coll__knob(COLL_ENV_BACKEND);
  char why[COLL_ERRMSG_MAX];
  coll_status_t s;
  int64_t ranks = 0;
  const char *var = "LOCAL_WORLD_SIZE";
  int devices = 0;
  if (choice == COLL_BACKEND_CPU) return 0;
  if (choice == COLL_BACKEND_NCCL) {
    s = coll__nccl_ready("COLL_BACKEND=nccl", &t);
    return s == COLL_OK ? 1 : -1;
  }
  /* auto: NCCL when it is loadable and every local rank has a device of its
   * own. Asking must not leave an error behind for a caller that goes on
   * with the CPU ring. */
  coll__err_save(why);
  s = coll__nccl_ready("COLL_BACKEND=auto", &t);
  coll__err_restore(why);
  if (s != COLL_OK) {
    COLL_INFO(COLL_LOG_INIT, "COLL_BACKEND=auto: CPU ring (NCCL not usable)");
    return 0;
  }
  if (ranks_exceed_devices(t, &ranks, &var, &devices)) {
    COLL_INFO(COLL_LOG_INIT,
              "COLL_BACKEND=auto: %lld local ranks (%s) share %d CUDA "
              "device(s); CPU ring with staging (NCCL needs a device per "
              "rank; where each rank sees only its own GPU, set "
              "COLL_BACKEND=nccl)",
              (long long)ranks, var, devices);
    return 0;
  }
  return 1;
}

/* The device of this process: its local rank (LOCAL_RANK, or the
 * launcher's: core/launch.h) modulo the visible devices, like torchrun's
 * one-process-per-GPU launch; without one the current device. */
static int env_device(void) {
  const coll_nccl_table_t *t = coll__nccl_table();
  int64_t local = -1;
  int count = 0;
  if (coll__launch_local_rank(&local, NULL) != 1) return -1;
  if (t->cuda_get_device_count(&count) != cudaSuccess || count <= 0) return -1;
  return (int)(local % count);
}

coll_status_t coll__nccl_available(const char *what) {
  const coll_nccl_table_t *t;
  return coll__nccl_ready(what, &t);
}

coll_status_t coll__nccl_comm_init_local(int rank, int world,
                                         const coll_unique_id_t *id,
                                         const coll_comm_config_t *cfg,
                                         coll_comm_t **out) {
  return coll__nccl_comm_init(rank, world, id, env_device(), cfg, out);
}
