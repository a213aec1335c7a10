/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_rank.c: unique ids and per-rank NCCL comms (one per process or worker
 * thread, ranks meeting through the id's bytes). */
#include <string.h>

#include "core/error.h"
#include "cuda/cuda_util.h"
#include "nccl/nccl_comm.h"
#include "nccl/nccl_rank.h"

_Static_assert(sizeof(coll_unique_id_t) == sizeof(ncclUniqueId),
               "coll_unique_id_t must hold an ncclUniqueId");

COLL_API coll_status_t coll_unique_id_create(coll_unique_id_t *out) {
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

coll_status_t coll__nccl_comm_init(int rank, int world,
                                   const coll_unique_id_t *id, int device,
                                   const coll_comm_config_t *cfg,
                                   coll_comm_t **out) {
  const coll_nccl_table_t *t;
  ncclUniqueId nid;
  ncclComm_t nc = NULL;
  ncclResult_t r;
  int saved = -1, dev = device;
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
  COLL_CHECK(coll__nccl_ready("comm_init_rank", &t));
  if (dev < 0) {
    cudaError_t e = t->cuda_get_device(&dev);
    if (e != cudaSuccess) return coll__cuda_result(t, e, "comm_init_rank");
  }
  COLL_CHECK_GOTO(coll__cuda_device_enter(t, dev, &saved, "comm_init_rank"), s,
                  done);
  memcpy(nid.internal, id->internal, sizeof nid.internal);
  /* Blocks until all `world` ranks called it with the same id (NCCL's
   * bootstrap). */
  r = t->nccl_comm_init_rank(&nc, world, nid, rank);
  if (r != ncclSuccess) {
    s = coll__nccl_result(t, r, NULL, "ncclCommInitRank");
    coll__err_prefix("comm_init_rank");
    goto done;
  }
  s = coll__nccl_comm_wrap(t, nc, dev, rank, world, cfg, out);
done:
  coll__cuda_device_leave(t, saved);
  return s;
}

COLL_API coll_status_t coll_comm_init_rank(int rank, int world,
                                           const coll_unique_id_t *id,
                                           const coll_comm_config_t *cfg,
                                           coll_comm_t **out) {
  coll__err_clear();
  return coll__nccl_comm_init(rank, world, id, -1, cfg, out);
}
