/* SPDX-License-Identifier: Apache-2.0 */
/* shrink.c: coll_comm_shrink and coll_comm_shrink_exclude, the survivors'
 * comm after a failure (on the old comm's backend): the
 * arguments are checked here, everything that must happen before the
 * agreement starts (a rank must not leave the others with a comm it then
 * refuses for a bad argument), then the backend does the rest. */
#include <stdlib.h>

#include "api/api.h"
#include "core/error.h"

/* The config of the new comm: checked, and not carrying a handle that
 * already serves a comm (the old comm's own included). */
static coll_status_t check_config(const coll_comm_t *comm,
                                  const coll_comm_config_t *cfg) {
  coll_abort_handle_t *h;
  COLL_CHECK(coll__config_check(cfg, "comm_shrink"));
  h = coll__config_abort_handle(cfg);
  if (h != NULL && h == comm->abort)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "comm_shrink: the config's abort handle is the old "
                     "comm's; the new comm needs one of its own");
  if (h != NULL && atomic_load(&h->adopted))
    return coll__err(
        COLL_ERR_INVALID_ARG,
        "comm_shrink: the config's abort handle already belongs to "
        "another comm; each comm needs a handle of its own");
  return COLL_OK;
}

coll_status_t coll_comm_shrink(coll_comm_t *comm, const coll_comm_config_t *cfg,
                               coll_comm_t **newcomm) {
  coll_status_t s;
  coll__err_clear();
  if (newcomm == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "comm_shrink: newcomm is NULL");
  *newcomm = NULL;
  if (comm == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "comm_shrink: comm is NULL");
  s = check_config(comm, cfg);
  if (s != COLL_OK) return s;
  if (comm->ops->shrink == NULL)
    return coll__err(COLL_ERR_NOT_AVAILABLE,
                     "comm_shrink: the %s backend cannot shrink a comm",
                     comm->ops->name);
  s = coll__comm_enter(comm, "comm_shrink");
  if (s != COLL_OK) return s;
  s = comm->ops->shrink(comm, cfg, newcomm);
  coll__comm_leave(comm);
  if (s != COLL_OK) coll__err_prefix("comm_shrink");
  return s;
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
  if (s == COLL_OK) s = coll__comm_enter(comm, "comm_shrink");
  if (s == COLL_OK) {
    s = comm->ops->shrink_exclude(comm, sorted, nexclude, cfg, newcomm);
    coll__comm_leave(comm);
  }
  free(sorted);
  return s;
}
