/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_off.c: libcoll built without the NCCL backend. Every NCCL function is
 * still there and says so. */
#include <stddef.h>

#include "core/env.h"
#include "core/error.h"
#include "nccl/nccl_env.h"

#define NO_NCCL "libcoll was built without the NCCL backend"

static coll_status_t not_built(const char *what) {
  return coll__err(COLL_ERR_NOT_AVAILABLE, "%s: " NO_NCCL, what);
}

coll_status_t coll_unique_id_create(coll_unique_id_t *out) {
  coll__err_clear();
  (void)out;
  return not_built("unique_id_create");
}

coll_status_t coll__nccl_comm_init(int rank, int world,
                                   const coll_unique_id_t *id, int device,
                                   const coll_comm_config_t *cfg,
                                   coll_comm_t **out) {
  (void)rank, (void)world, (void)id, (void)device, (void)cfg;
  if (out != NULL) *out = NULL;
  return not_built("comm_init_rank");
}

coll_status_t coll_group_create(const int *devices, int ndev,
                                coll_group_t **out) {
  coll__err_clear();
  (void)devices, (void)ndev;
  if (out != NULL) *out = NULL;
  return not_built("group_create");
}

coll_status_t coll_group_create_config(const int *devices, int ndev,
                                       const coll_comm_config_t *cfg,
                                       coll_group_t **out) {
  coll__err_clear();
  (void)devices, (void)ndev, (void)cfg;
  if (out != NULL) *out = NULL;
  return not_built("group_create");
}

coll_status_t coll_group_abort_handle(coll_group_t *g,
                                      coll_abort_handle_t **out) {
  coll__err_clear();
  (void)g;
  if (out != NULL) *out = NULL;
  return not_built("group_abort_handle");
}

coll_status_t coll_group_allreduce(coll_group_t *g, void *const *bufs,
                                   int nbufs, size_t count, coll_dtype_t dt,
                                   coll_op_t op, void *const *streams,
                                   int nstreams) {
  coll__err_clear();
  (void)g, (void)bufs, (void)nbufs, (void)count, (void)dt, (void)op;
  (void)streams, (void)nstreams;
  return not_built("group_allreduce");
}

coll_status_t coll_group_broadcast(coll_group_t *g, void *const *bufs,
                                   int nbufs, size_t count, coll_dtype_t dt,
                                   int root, void *const *streams,
                                   int nstreams) {
  coll__err_clear();
  (void)g, (void)bufs, (void)nbufs, (void)count, (void)dt, (void)root;
  (void)streams, (void)nstreams;
  return not_built("group_broadcast");
}

int coll_group_size(const coll_group_t *g) {
  (void)g;
  return 0;
}

const int *coll_group_devices(const coll_group_t *g) {
  (void)g;
  return NULL;
}

coll_status_t coll_group_split(coll_group_t *g, coll_comm_t **comms) {
  coll__err_clear();
  (void)g, (void)comms;
  return not_built("group_split");
}

/* No group can exist, so there is nothing to destroy. */
coll_status_t coll_group_destroy(coll_group_t *g) {
  coll__err_clear();
  (void)g;
  return COLL_OK;
}

int coll__nccl_env_selected(void) {
  if (coll__knob(COLL_ENV_BACKEND) == COLL_BACKEND_NCCL) {
    not_built("COLL_BACKEND=nccl");
    return -1;
  }
  return 0;
}

coll_status_t coll__nccl_env_gpu(char *out, size_t cap) {
  if (cap > 0) out[0] = '\0';
  return not_built("COLL_BACKEND=auto");
}

coll_status_t coll__nccl_available(const char *what) { return not_built(what); }

coll_status_t coll__nccl_comm_init_local(int rank, int world,
                                         const coll_unique_id_t *id,
                                         const coll_comm_config_t *cfg,
                                         coll_comm_t **out) {
  (void)rank, (void)world, (void)id, (void)cfg;
  if (out != NULL) *out = NULL;
  return not_built("comm_init_rank");
}
