/* SPDX-License-Identifier: Apache-2.0 */
/* comm.c: coll_comm_create, a CPU ring comm over a caller's transport,
 * coll_comm_init_rank, an NCCL comm from a unique id, and coll_comm_shrink,
 * a comm of the survivors on the old comm's backend. With env_init.c this
 * is the composition root: the only place that picks a backend. */
#include <stdlib.h>

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

/* The config of the new comm: checked, and not carrying the old comm's own
 * abort handle (one handle serves one comm; a comm's own handle is not
 * marked as bound, so the bind would not catch it). */
static coll_status_t check_config(const coll_comm_t *comm,
                                  const coll_comm_config_t *cfg) {
  COLL_CHECK(coll__config_check(cfg, "comm_shrink"));
  if (coll__config_abort_handle(cfg) == comm->abort)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "comm_shrink: the config's abort handle is the old "
                     "comm's; the new comm needs one of its own");
  return COLL_OK;
}

coll_status_t coll_comm_shrink(coll_comm_t *comm, const coll_comm_config_t *cfg,
                               coll_comm_t **newcomm) {
  coll__err_clear();
  if (newcomm == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "comm_shrink: newcomm is NULL");
  *newcomm = NULL;
  if (comm == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "comm_shrink: comm is NULL");
  COLL_CHECK(check_config(comm, cfg));
  if (comm->ops->shrink == NULL)
    return coll__err(COLL_ERR_NOT_AVAILABLE,
                     "comm_shrink: the %s backend cannot shrink a comm",
                     comm->ops->name);
  return comm->ops->shrink(comm, cfg, newcomm);
}

/* INVALID_ARG unless list holds n distinct ranks of comm other than its
 * own; sorted into `sorted` (n entries). */
static coll_status_t check_exclude(const coll_comm_t *comm, const int *list,
                                   int n, int *sorted) {
  int i, j, v;
  for (i = 0; i < n; i++) {
    v = list[i];
    if (v < 0 || v >= comm->world)
      return coll__err(COLL_ERR_INVALID_ARG,
                       "comm_shrink: exclude[%d] = %d is not a rank of a "
                       "%d-rank comm",
                       i, v, comm->world);
    if (v == comm->rank)
      return coll__err(COLL_ERR_INVALID_ARG,
                       "comm_shrink: rank %d excludes itself (an excluded "
                       "rank must not call comm_shrink)",
                       v);
    /* Insertion sort: lists are short, and a duplicate shows on the way. */
    for (j = i; j > 0 && sorted[j - 1] > v; j--) sorted[j] = sorted[j - 1];
    if (j > 0 && sorted[j - 1] == v)
      return coll__err(COLL_ERR_INVALID_ARG,
                       "comm_shrink: rank %d is listed twice in exclude", v);
    sorted[j] = v;
  }
  return COLL_OK;
}

coll_status_t coll_comm_shrink_exclude(coll_comm_t *comm, const int *exclude,
                                       int nexclude,
                                       const coll_comm_config_t *cfg,
                                       coll_comm_t **newcomm) {
  int *sorted;
  coll_status_t s;
  coll__err_clear();
  if (newcomm == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "comm_shrink: newcomm is NULL");
  *newcomm = NULL;
  if (comm == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "comm_shrink: comm is NULL");
  if (nexclude < 0)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "comm_shrink: nexclude %d is negative", nexclude);
  if (exclude == NULL && nexclude > 0)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "comm_shrink: exclude is NULL but nexclude is %d",
                     nexclude);
  COLL_CHECK(check_config(comm, cfg));
  sorted = malloc((size_t)(nexclude > 0 ? nexclude : 1) * sizeof *sorted);
  if (sorted == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "comm_shrink: out of memory");
  s = check_exclude(comm, exclude, nexclude, sorted);
  if (s == COLL_OK && comm->ops->shrink_exclude == NULL)
    s = coll__err(COLL_ERR_NOT_AVAILABLE,
                  "comm_shrink: the %s backend takes no exclude list (use "
                  "coll_comm_shrink)",
                  comm->ops->name);
  if (s == COLL_OK)
    s = comm->ops->shrink_exclude(comm, sorted, nexclude, cfg, newcomm);
  free(sorted);
  return s;
}
