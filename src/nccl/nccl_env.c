/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_env.c: what coll_comm_init_env asks of the NCCL backend: whether to
 * build an NCCL comm (COLL_BACKEND), and the comm itself, its unique id
 * travelling through the rendezvous store. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "nccl/nccl_backend_choice.h"
#include "nccl/nccl_env.h"
#include "nccl/nccl_rank.h"
#include "cuda/gpu_table.h"

#define UID_KEY "coll/nccl/unique_id"

int coll__nccl_env_selected(void) {
  const coll_nccl_table_t *t;
  const char *v = coll__backend_choice();
  char why[COLL_ERRMSG_MAX];
  coll_status_t s;
  if (v != NULL && strcasecmp(v, "cpu") == 0) return 0;
  if (v != NULL && strcasecmp(v, "nccl") == 0) {
    s = coll__nccl_ready("COLL_BACKEND=nccl", &t);
    return s == COLL_OK ? 1 : -1;
  }
  if (v != NULL && strcasecmp(v, "auto") != 0)
    COLL_WARN(COLL_LOG_INIT,
              "COLL_BACKEND=%s is not auto, cpu or nccl; "
              "taken as auto",
              v);
  /* auto: NCCL when it is loadable and a device is visible. Asking must not
   * leave an error behind for a caller that goes on with the CPU ring. */
  coll__err_save(why);
  s = coll__nccl_ready("COLL_BACKEND=auto", &t);
  coll__err_restore(why);
  if (s != COLL_OK) {
    COLL_INFO(COLL_LOG_INIT, "COLL_BACKEND=auto: CPU ring (NCCL not usable)");
    return 0;
  }
  return 1;
}

/* The device of this process: LOCAL_RANK modulo the visible devices, like
 * torchrun's one-process-per-GPU launch; without LOCAL_RANK the current. */
static int env_device(void) {
  const coll_nccl_table_t *t = coll__nccl_table();
  int64_t local = -1;
  int count = 0;
  if (coll__env_int(COLL_ENV_LOCAL_RANK, &local) != 1 || local < 0) return -1;
  if (t->cuda_get_device_count(&count) != cudaSuccess || count <= 0) return -1;
  return (int)(local % count);
}

coll_status_t coll__nccl_comm_from_store(coll_store_t *store, int rank,
                                         int world,
                                         const coll_comm_config_t *cfg,
                                         int64_t timeout_ms,
                                         coll_comm_t **out) {
  const coll_nccl_table_t *t;
  coll_unique_id_t id;
  size_t len = 0;
  coll_status_t s;
  if (store == NULL || out == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "nccl init: %s is NULL",
                     store == NULL ? "store" : "out");
  COLL_CHECK(coll__nccl_ready("nccl init", &t));
  if (rank == 0) {
    s = coll_unique_id_create(&id);
    if (s == COLL_OK) s = coll__store_set(store, UID_KEY, &id, sizeof id);
  } else {
    s = coll__store_get(store, UID_KEY, &id, sizeof id, &len, timeout_ms);
    if (s == COLL_OK && len != sizeof id)
      s = coll__err(COLL_ERR_PROTOCOL,
                    "nccl init: the unique id in the store is %zu bytes, "
                    "expected %zu",
                    len, sizeof id);
  }
  if (s != COLL_OK) {
    coll__err_prefix("nccl init");
    return s;
  }
  return coll__nccl_comm_init(rank, world, &id, env_device(), cfg, out);
}
