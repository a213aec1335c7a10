/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_shrink.c: shrink and continue on NCCL comms, through ncclCommShrink
 * (NCCL 2.27.3+, looked up at run time). NCCL's comm has no host-side
 * channel that outlives a peer, so the ranks to exclude come from the
 * caller; on a healthy comm coll_comm_shrink excludes none. The new comm is
 * nonblocking like every other: NCCL answers ncclInProgress until every
 * survivor joined, and the wait for that is bounded by the new comm's
 * timeout and ended by its abort handle, as an init is. */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "cuda/cuda_util.h"
#include "nccl/nccl_async.h"
#include "nccl/nccl_comm.h"
#include "nccl/nccl_rank.h"

int coll__nccl_keep_wanted(const coll_nccl_table_t *t) {
  int64_t v = 0;
  return t->nccl_comm_shrink != NULL &&
         coll__env_int(COLL_ENV_NCCL_SHRINKABLE, &v) == 1 && v != 0;
}

static int comm_failed(coll_nccl_be_t *be) {
  return atomic_load_explicit(&be->failed, memory_order_acquire) ||
         atomic_load(&be->torn) || atomic_load(&be->comm->abort->aborted);
}

/* Why a failed comm cannot be shrunk, into this thread's error. */
static coll_status_t cannot_shrink(coll_nccl_be_t *be) {
  coll_comm_t *c = be->comm;
  const char *why = atomic_load_explicit(&be->failed, memory_order_acquire)
                        ? be->fail_why
                        : "it was aborted";
  return coll__err(COLL_ERR_UNSUPPORTED,
                   "comm_shrink: comm '%s' rank %d failed (%.300s) and NCCL's "
                   "comm was aborted with it; set COLL_NCCL_SHRINKABLE=1 "
                   "before creating NCCL comms to keep it for a shrink",
                   c->name, c->rank, why);
}

coll_status_t coll__nccl_shrink(coll_comm_t *c, const coll_comm_config_t *cfg,
                                coll_comm_t **out) {
  coll_nccl_be_t *be = c->be;
  if (comm_failed(be))
    return coll__err(
        COLL_ERR_UNSUPPORTED,
        "comm_shrink: comm '%s' rank %d has failed, and an NCCL comm has no "
        "host-side channel on which its ranks could agree who is gone: pass "
        "the same ranks to exclude on every survivor with "
        "coll_comm_shrink_exclude",
        c->name, c->rank);
  return coll__nccl_shrink_exclude(c, NULL, 0, cfg, out);
}

/* A healthy comm must have no work waiting to reach NCCL (the default
 * shrink needs a quiet parent): the same steps as before a collective. */
static coll_status_t quiesce(coll_nccl_be_t *be) {
  COLL_CHECK(coll__nccl_settle(be, "comm_shrink"));
  COLL_CHECK(coll__nccl_p2p_flush(be, 1, "comm_shrink"));
  return coll__nccl_settle(be, "comm_shrink");
}

/* Under the guard: ncclCommShrink on the comm's device; *flag tells which
 * kind it was. A torn comm that was not kept is refused. */
static coll_status_t post_shrink(coll_nccl_be_t *be, int *exclude, int n,
                                 const coll_comm_config_t *cfg,
                                 ncclComm_t *newnc, int *flag) {
  coll_abort_handle_t *h = be->comm->abort;
  ncclConfig_t config;
  ncclResult_t r;
  int saved = COLL_NO_DEVICE;
  coll_status_t s;
  uv_mutex_lock(&h->guard);
  if (atomic_load(&be->torn) && !be->parked) {
    s = cannot_shrink(be);
    goto done;
  }
  /* After a failure (torn, or a sticky error) the old comm's work may be
   * stuck on a dead peer: NCCL ends it first. */
  *flag = comm_failed(be) ? NCCL_SHRINK_ABORT : NCCL_SHRINK_DEFAULT;
  s = coll__cuda_device_enter(be->t, be->dev, &saved, "comm_shrink");
  if (s != COLL_OK) goto done;
  coll__nccl_config(&config, coll__nccl_config_name(cfg));
  r = be->t->nccl_comm_shrink(be->nc, exclude, n, newnc, &config, *flag);
  if (r != ncclSuccess && r != ncclInProgress)
    s = coll__nccl_result(be->t, r, be->nc, "comm_shrink: ncclCommShrink");
  coll__cuda_device_leave(be->t, saved);
done:
  uv_mutex_unlock(&h->guard);
  return s;
}

coll_status_t coll__nccl_shrink_exclude(coll_comm_t *c, const int *exclude,
                                        int n, const coll_comm_config_t *cfg,
                                        coll_comm_t **out) {
  coll_nccl_be_t *be = c->be;
  const coll_nccl_table_t *t = be->t;
  coll_abort_handle_t *h = coll__config_abort_handle(cfg);
  ncclComm_t newnc = NULL;
  int *list = NULL, flag = NCCL_SHRINK_DEFAULT, rank = c->rank, i;
  int saved = COLL_NO_DEVICE;
  int64_t timeout;
  coll_status_t s;
  if (t->nccl_comm_shrink == NULL) {
    char have[32];
    coll__nccl_version_text(be->version, have, sizeof have);
    return coll__err(COLL_ERR_NOT_AVAILABLE,
                     "comm_shrink: the loaded NCCL %s has no ncclCommShrink "
                     "(2.27+)",
                     have);
  }
  if (coll__env_timeout_check() != COLL_OK) {
    coll__err_prefix("comm_shrink");
    return COLL_ERR_INVALID_ARG;
  }
  /* A comm kept for a shrink that fails here (a peer gone) is shrunk
   * with NCCL_SHRINK_ABORT all the same. */
  if (!comm_failed(be)) {
    s = quiesce(be);
    if (s != COLL_OK && !be->keep_for_shrink) return s;
  }
  /* Claimed from the start, as for an init: a handle serves one comm. */
  if (h != NULL) COLL_CHECK(coll__abort_handle_bind(h, "comm_shrink"));
  /* NCCL takes a mutable list; the caller's is const. */
  list = malloc((size_t)(n > 0 ? n : 1) * sizeof *list);
  if (list == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "comm_shrink: out of memory");
  for (i = 0; i < n; i++) {
    list[i] = exclude[i];
    if (exclude[i] < c->rank) rank--;
  }
  s = post_shrink(be, list, n, cfg, &newnc, &flag);
  free(list);
  if (s != COLL_OK) return s;
  /* The new comm is polled on its device, as an init is. */
  s = coll__cuda_device_enter(t, be->dev, &saved, "comm_shrink");
  if (s != COLL_OK) goto fail;
  COLL_INFO(
      COLL_LOG_NCCL, "comm '%s' rank %d: shrink to %d ranks (%s)", c->name,
      c->rank, c->world - n,
      flag == NCCL_SHRINK_ABORT ? "NCCL_SHRINK_ABORT" : "NCCL_SHRINK_DEFAULT");
  timeout = coll__config_timeout_ms(cfg);
  s = coll__nccl_wait_new_comm(t, newnc, h != NULL ? &h->aborted : NULL,
                               coll__deadline(timeout),
                               "comm_shrink: ncclCommShrink");
  if (s == COLL_ERR_TIMEOUT)
    s = coll__err(COLL_ERR_TIMEOUT,
                  "comm_shrink: comm '%s' rank %d: NCCL's shrink did not "
                  "finish within %lld ms (every surviving rank must call "
                  "comm_shrink with the same exclude list)",
                  c->name, c->rank, (long long)timeout);
  if (s == COLL_OK) {
    /* wrap takes newnc in all cases. */
    s = coll__nccl_comm_wrap(t, newnc, be->dev, rank, c->world - n, cfg, out);
    newnc = NULL;
  }
fail:
  /* Abort, not destroy: a half-made comm's destroy would wait for peers. */
  if (newnc != NULL) t->nccl_comm_abort(newnc);
  coll__cuda_device_leave(t, saved);
  return s;
}
