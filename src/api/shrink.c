/* SPDX-License-Identifier: Apache-2.0 */
/* shrink.c: coll_comm_shrink, the survivors' comm after a failure: the
 * arguments are checked here, everything that must happen before the
 * agreement starts (a rank must not leave the others with a comm it then
 * refuses for a bad argument), then the backend does the rest. */
#include "core/comm.h"
#include "core/error.h"

coll_status_t coll_comm_shrink(coll_comm_t *comm, const coll_comm_config_t *cfg,
                               coll_comm_t **newcomm) {
  coll_abort_handle_t *h;
  coll_status_t s;
  coll__err_clear();
  if (newcomm == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "comm_shrink: newcomm is NULL");
  *newcomm = NULL;
  if (comm == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "comm_shrink: comm is NULL");
  s = coll__config_check(cfg, "comm_shrink");
  if (s != COLL_OK) return s;
  h = coll__config_abort_handle(cfg);
  if (h != NULL && (atomic_load(&h->adopted) || h == comm->abort))
    return coll__err(COLL_ERR_INVALID_ARG,
                     "comm_shrink: the config's abort handle belongs to a "
                     "comm already; each comm needs a handle of its own");
  if (comm->ops->shrink == NULL)
    return coll__err(COLL_ERR_NOT_AVAILABLE,
                     "comm_shrink: the %s backend cannot shrink a comm",
                     comm->ops->name);
  if (coll_is_aborted(comm->abort))
    return coll__err(COLL_ERR_ABORTED,
                     "comm_shrink: this rank's comm (%s) was aborted: an "
                     "aborted rank leaves the group and cannot shrink",
                     comm->name);
  s = comm->ops->shrink(comm, cfg, newcomm);
  if (s != COLL_OK) coll__err_prefix("comm_shrink");
  return s;
}
