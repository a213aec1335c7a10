/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_rank.c: unique ids and per-rank NCCL comms (one per process or worker
 * thread, ranks meeting through the id's bytes). Every comm is nonblocking:
 * ncclCommInitRankConfig returns at once and its state is polled with the
 * comm's timeout and abort handle, so a rank that never comes is a
 * COLL_ERR_TIMEOUT (or COLL_ERR_ABORTED), never a hang. */
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/env.h"
#include "core/error.h"
#include "cuda/cuda_util.h"
#include "nccl/nccl_async.h"
#include "nccl/nccl_comm.h"
#include "nccl/nccl_env.h"
#include "nccl/nccl_rank.h"

_Static_assert(sizeof(coll_unique_id_t) == sizeof(ncclUniqueId),
               "coll_unique_id_t must hold an ncclUniqueId");

coll_status_t coll_unique_id_create(coll_unique_id_t *out) {
  const coll_nccl_table_t *t;
  ncclUniqueId id;
  ncclResult_t r;
  coll__err_clear();
  if (out == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "unique_id_create: out is NULL");
  COLL_CHECK(coll__nccl_ready("unique_id_create", &t));
  r = t->nccl_get_unique_id(&id);
  if (r != ncclSuccess) return coll__nccl_result(t, r, NULL, "ncclGetUniqueId");
  memcpy(out->internal, id.internal, sizeof id.internal);
  return COLL_OK;
}

coll_status_t coll__nccl_env_check(const char *what) {
  int64_t v = 0;
  /* NCCL reads it as a number (param.cc) and takes 0 or 1; NCCL's own
   * config files reach the environment once NCCL initialised
   * (param.cc:27-70), so a later check sees them too. */
  if (coll__env_parse_int(COLL_ENV_NCCL_COMM_BLOCKING, &v) != 1 || v != 1)
    return COLL_OK;
  return coll__err(COLL_ERR_INVALID_ARG,
                   "%s: NCCL_COMM_BLOCKING=1 is set, which makes NCCL comms "
                   "blocking: a blocking NCCL comm waits for "
                   "peers inside NCCL, where neither the comm's timeout nor "
                   "coll_abort can end it; unset it (or set 0) for this "
                   "process",
                   what);
}

void coll__nccl_config(ncclConfig_t *out, const char *name) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.blocking = 0;
#if NCCL_VERSION_CODE >= 21700
  if (name != NULL && name[0] != '\0') c.commName = name;
#else
  (void)name;
#endif
  *out = c;
}

const char *coll__nccl_config_name(const coll_comm_config_t *cfg) {
  if (cfg != NULL &&
      cfg->size >= offsetof(coll_comm_config_t, name) + sizeof(char *))
    return cfg->name;
  return NULL;
}

coll_status_t coll__nccl_comm_init(int rank, int world,
                                   const coll_unique_id_t *id, int device,
                                   const coll_comm_config_t *cfg,
                                   coll_comm_t **out) {
  const coll_nccl_table_t *t;
  coll_abort_handle_t *h = coll__config_abort_handle(cfg);
  ncclConfig_t config;
  ncclUniqueId nid;
  ncclComm_t nc = NULL;
  ncclResult_t r;
  coll_cuda_saved_t saved = COLL_CUDA_SAVED_INIT;
  int dev = device;
  int64_t timeout;
  coll_status_t s;
  if (out == NULL || id == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "comm_init_rank: %s is NULL",
                     out == NULL ? "out" : "id");
  *out = NULL;
  if (world < 1)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "comm_init_rank: world %d must be at least 1", world);
  if (rank < 0 || rank >= world)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "comm_init_rank: rank %d is out of range for world %d",
                     rank, world);
  COLL_CHECK(coll__config_check(cfg, "comm_init_rank"));
  if (coll__knobs_load() != COLL_OK) {
    coll__err_prefix("comm_init_rank");
    return COLL_ERR_INVALID_ARG;
  }
  COLL_CHECK(coll__nccl_ready("comm_init_rank", &t));
  COLL_CHECK(coll__nccl_env_check("comm_init_rank"));
  /* Claimed for this init from the start: a handle serves one init. */
  if (h != NULL) COLL_CHECK(coll__abort_handle_bind(h, "comm_init_rank"));
  if (dev < 0) {
    cudaError_t e = t->cuda_get_device(&dev);
    if (e != cudaSuccess) return coll__cuda_result(t, e, "comm_init_rank");
  }
  timeout = coll__config_timeout_ms(cfg);
  COLL_CHECK_GOTO(coll__cuda_device_enter(t, dev, &saved, "comm_init_rank"), s,
                  done);
  memcpy(nid.internal, id->internal, sizeof nid.internal);
  coll__nccl_config(&config, coll__nccl_config_name(cfg));
  r = t->nccl_comm_init_rank_config(&nc, world, nid, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    s = coll__nccl_result(t, r, nc, "ncclCommInitRankConfig");
    goto fail;
  }
  s = coll__nccl_env_check("comm_init_rank");
  if (s == COLL_OK)
    s = coll__nccl_wait_new_comm(t, nc, h != NULL ? &h->aborted : NULL,
                                 coll__deadline(timeout),
                                 "ncclCommInitRankConfig");
  if (s == COLL_ERR_TIMEOUT)
    s = coll__err(COLL_ERR_TIMEOUT,
                  "rank %d of %d on CUDA device %d: NCCL's init did not finish "
                  "within %lld ms (every rank must call comm_init_rank with "
                  "the same id)",
                  rank, world, dev, (long long)timeout);
  if (s == COLL_ERR_BACKEND &&
      strstr(coll_last_error(), "Duplicate GPU") != NULL) {
    /* Every rank sees its own GPU but two of them are the same one (N10 of
     * the second review: NCCL's check decides, init.cc:903-907). */
    char why[COLL_ERRMSG_MAX];
    coll__err_save(why);
    s = coll__err(COLL_ERR_BACKEND,
                  "rank %d of %d: NCCL found two ranks of this comm on one "
                  "GPU (CUDA device %d here); NCCL needs a GPU per rank "
                  "(several ranks per GPU: COLL_BACKEND=cpu or auto runs the "
                  "CPU ring with staging): %.300s",
                  rank, world, dev, why);
  }
  if (s != COLL_OK) goto fail;
  s = coll__nccl_comm_wrap(t, nc, dev, rank, world, cfg, out);
  goto done;
fail:
  /* Abort does not wait for peers; destroy of a half-made comm would. */
  if (nc != NULL) t->nccl_comm_abort(nc);
done:
  if (s != COLL_OK) coll__err_prefix("comm_init_rank");
  coll__cuda_device_leave(t, saved);
  return s;
}
