/* SPDX-License-Identifier: Apache-2.0 */
/* comm.c: coll_comm_create, a CPU ring comm over a caller's transport,
 * and coll_comm_init_rank, an NCCL comm from a unique id. With env_init.c
 * and shrink.c this is the composition root: the only place that picks a
 * backend. */
#include "core/comm.h"
#include "core/error.h"
#include "cpu/cpu_comm.h"
#include "nccl/nccl_env.h"

coll_status_t coll_comm_create(coll_transport_t *t,
                               const coll_comm_config_t *cfg,
                               coll_comm_t **out) {
  coll_status_t s;
  coll__err_clear();
  if (out == NULL) {
    coll_transport_destroy(t);
    return coll__err(COLL_ERR_INVALID_ARG, "comm_create: out is NULL");
  }
  *out = NULL;
  if (t == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "comm_create: transport is NULL");
  s = coll__cpu_comm_create(t, cfg, out);
  if (s != COLL_OK) coll__err_prefix("comm_create");
  return s;
}

coll_status_t coll_comm_init_rank(int rank, int world,
                                  const coll_unique_id_t *id,
                                  const coll_comm_config_t *cfg,
                                  coll_comm_t **out) {
  coll__err_clear();
  return coll__nccl_comm_init(rank, world, id, -1, cfg, out);
}
