/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_env.c: what coll_comm_init_env asks of the NCCL backend: whether to
 * build an NCCL comm (COLL_BACKEND), which GPU this rank would run it on
 * (under auto the ranks compare their GPUs before they pick NCCL), and the
 * comm itself from a unique id on the device LOCAL_RANK picks. How the id
 * and the GPUs travel between ranks (the rendezvous store) is the API
 * layer's business. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "core/error.h"
#include "core/launch.h"
#include "core/log.h"
#include "cuda/gpu_table.h"
#include "nccl/nccl_env.h"
#include "nccl/nccl_rank.h"

int coll__nccl_env_selected(void) {
  const coll_nccl_table_t *t;
  int64_t choice = coll__knob(COLL_ENV_BACKEND);
  char why[COLL_ERRMSG_MAX];
  coll_status_t s;
  if (choice == COLL_BACKEND_CPU) return COLL_NCCL_PICK_CPU;
  if (choice == COLL_BACKEND_NCCL) {
    s = coll__nccl_ready("COLL_BACKEND=nccl", &t);
    return s == COLL_OK ? COLL_NCCL_PICK_NCCL : -1;
  }
  /* auto: NCCL when it is usable here and every rank has a GPU of its own
   * (NCCL refuses two ranks of one comm on one GPU, init.cc:903-907), which
   * only the ranks together can tell. Asking must not leave an error
   * behind for a caller that goes on with the CPU ring. */
  coll__err_save(why);
  s = coll__nccl_ready("COLL_BACKEND=auto", &t);
  coll__err_restore(why);
  if (s != COLL_OK) {
    COLL_INFO(COLL_LOG_INIT, "COLL_BACKEND=auto: CPU ring (NCCL not usable)");
    return COLL_NCCL_PICK_CPU;
  }
  return COLL_NCCL_PICK_ASK;
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

coll_status_t coll__nccl_env_gpu(char *out, size_t cap) {
  const coll_nccl_table_t *t;
  char id[64] = "";
  int dev;
  cudaError_t e;
  COLL_CHECK(coll__nccl_ready("COLL_BACKEND=auto", &t));
  dev = env_device();
  /* A thread that never chose a device reads device 0, and no context is
   * made by asking. */
  if (dev < 0 && (e = t->cuda_get_device(&dev)) != cudaSuccess)
    return coll__cuda_result(t, e, "cudaGetDevice");
  e = t->cuda_device_get_pci_bus_id(id, (int)sizeof id, dev);
  if (e != cudaSuccess) return coll__cuda_result(t, e, "cudaDeviceGetPCIBusId");
  id[sizeof id - 1] = '\0';
  snprintf(out, cap, "%s", id);
  return COLL_OK;
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
