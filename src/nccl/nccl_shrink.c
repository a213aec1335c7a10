/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_shrink.c: shrink and continue on NCCL comms. Ranks to exclude go to
 * ncclCommShrink (NCCL 2.27.3+); excluding nobody is ncclCommSplit (2.18+)
 * with one color, since ncclCommShrink refuses an empty list (init.cc:2562,
 * N3 of the second review). NCCL's comm has no host-side channel that
 * outlives a peer, so the ranks to exclude come from the caller.
 *
 * How NCCL 2.28 runs both (init.cc:2545-2680, N2): the call sets *newcomm to
 * NULL and hands the making of the child to a job on a thread of its own,
 * carried by the PARENT, which stays ncclInProgress until the job ends; the
 * job then writes the child into *newcomm (init.cc:1611-1615), a failed one
 * included. So NCCL gets a slot on the heap that lives as long as the
 * parent, libcoll polls the parent (bounded by the new comm's timeout, ended
 * by its abort handle or the old comm's), then reads the slot. A shrink that
 * does not finish aborts the parent, which joins the job, and then the
 * child it may have written.
 *
 * After a failure the parent's stuck work must end first: on 2.28 the abort
 * revoked it (ncclCommRevoke) and the shrink waits for that to finish, then
 * shrinks as on a healthy comm; on 2.27 a parent kept with
 * COLL_NCCL_SHRINKABLE=1 is shrunk with NCCL_SHRINK_ABORT. */
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
  return t->nccl_comm_shrink != NULL && t->nccl_comm_revoke == NULL &&
         coll__knob(COLL_ENV_NCCL_SHRINKABLE) != 0;
}

static int comm_failed(coll_nccl_be_t *be) {
  return atomic_load_explicit(&be->failed, memory_order_acquire) ||
         atomic_load(&be->torn) || atomic_load(&be->comm->abort->aborted);
}

/* Why a failed comm cannot be shrunk, into this thread's error. */
static coll_status_t cannot_shrink(coll_nccl_be_t *be, const char *how) {
  coll_comm_t *c = be->comm;
  const char *why = atomic_load_explicit(&be->failed, memory_order_acquire)
                        ? be->fail_why
                        : "it was aborted";
  return coll__err(COLL_ERR_UNSUPPORTED,
                   "comm_shrink: comm '%s' rank %d failed (%.300s) and %s",
                   c->name, c->rank, why, how);
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

/* A healthy comm must have no work waiting to reach NCCL: the same steps
 * as before a collective. */
static coll_status_t quiesce(coll_nccl_be_t *be) {
  COLL_CHECK(coll__nccl_settle(be, "comm_shrink"));
  COLL_CHECK(coll__nccl_p2p_flush(be, 1, "comm_shrink"));
  return coll__nccl_settle(be, "comm_shrink");
}

/* NOT_AVAILABLE when the loaded NCCL lacks what this shrink needs. */
static coll_status_t can_make(const coll_nccl_be_t *be, int n) {
  char have[32];
  coll__nccl_version_text(be->version, have, sizeof have);
  if (n > 0 && be->t->nccl_comm_shrink == NULL)
    return coll__err(COLL_ERR_NOT_AVAILABLE,
                     "comm_shrink: the loaded NCCL %s has no ncclCommShrink "
                     "(2.27+)",
                     have);
  if (n == 0 && be->t->nccl_comm_split == NULL)
    return coll__err(COLL_ERR_NOT_AVAILABLE,
                     "comm_shrink: the loaded NCCL %s has no ncclCommSplit "
                     "(2.18+), which a shrink that excludes nobody needs",
                     have);
  return COLL_OK;
}

/* Polls the parent until its job (a revoke, a split, a shrink) ended. The
 * old comm's torn flag ends it too, unless the parent was torn already (it
 * is this thread's then). */
static coll_status_t wait_parent(coll_nccl_be_t *be, coll_abort_handle_t *h,
                                 int64_t deadline, int owned,
                                 const char *what) {
  coll_nccl_watch_t w;
  memset(&w, 0, sizeof w);
  w.t = be->t;
  w.nc = be->nc;
  w.mu = &be->mu;
  w.torn = owned ? NULL : &be->torn;
  w.aborted = h != NULL ? &h->aborted : NULL;
  w.deadline_ms = deadline;
  return coll__nccl_watch_wait(&w, what);
}

/* Gives NCCL a slot of the parent's and starts the split or shrink; *flag
 * says which shrink. */
static coll_status_t post_child(coll_nccl_be_t *be, int *exclude, int n,
                                const coll_comm_config_t *cfg, int flag) {
  ncclConfig_t config;
  ncclResult_t r;
  free(be->child_slot);
  be->child_slot = calloc(1, sizeof *be->child_slot);
  if (be->child_slot == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "comm_shrink: out of memory");
  coll__nccl_config(&config, coll__nccl_config_name(cfg));
  if (n > 0)
    r = be->t->nccl_comm_shrink(be->nc, exclude, n, be->child_slot, &config,
                                flag);
  else
    r = be->t->nccl_comm_split(be->nc, 0, be->comm->rank, be->child_slot,
                               &config);
  if (r != ncclSuccess && r != ncclInProgress)
    return coll__nccl_result(
        be->t, r, be->nc,
        n > 0 ? "comm_shrink: ncclCommShrink" : "comm_shrink: ncclCommSplit");
  return COLL_OK;
}

/* The child NCCL wrote, once the parent's job ended well. */
static coll_status_t take_child(coll_nccl_be_t *be, ncclComm_t *child) {
  ncclResult_t state = ncclSuccess, r;
  *child = __atomic_exchange_n(be->child_slot, NULL, __ATOMIC_ACQ_REL);
  if (*child == NULL)
    return coll__err(COLL_ERR_BACKEND,
                     "comm_shrink: NCCL ended its job without a new comm");
  r = be->t->nccl_comm_get_async_error(*child, &state);
  if (r == ncclSuccess) r = state;
  if (r == ncclSuccess) return COLL_OK;
  coll__nccl_result(be->t, r, *child, "comm_shrink: the new comm");
  be->t->nccl_comm_abort(*child);
  *child = NULL;
  return COLL_ERR_BACKEND;
}

/* A split or shrink that did not finish: NCCL's job may still run on the
 * parent, and may write a child later. The old comm fails (its abort stops
 * the job: ncclCommRevoke joins it with the abort flags set, which reach
 * the child's init); then this thread, which owns NCCL's comm from then on,
 * aborts it (joining what is left) and the child, if any. The reaper of an
 * NCCL without revoke does that instead, and destroy the child. Keeps this
 * thread's error text. */
static void end_child(coll_nccl_be_t *be) {
  char why[COLL_ERRMSG_MAX];
  ncclComm_t child;
  int own;
  coll__err_save(why);
  if (!atomic_load_explicit(&be->failed, memory_order_acquire))
    coll__nccl_fail(be, COLL_ERR_ABORTED, 0);
  uv_mutex_lock(&be->mu);
  atomic_store(&be->torn, 1);
  own = !be->nc_gone && !be->reaping;
  if (own) be->nc_gone = 1;
  uv_mutex_unlock(&be->mu);
  if (own) {
    be->t->nccl_comm_abort(be->nc);
    child = __atomic_exchange_n(be->child_slot, NULL, __ATOMIC_ACQ_REL);
    if (child != NULL) be->t->nccl_comm_abort(child);
  }
  coll__err_restore(why);
}

/* After a failure: how NCCL's comm is brought to a state it can be shrunk
 * from; *flag is the shrink's flag. */
static coll_status_t prepare_failed(coll_nccl_be_t *be, int n,
                                    coll_abort_handle_t *h, int64_t deadline,
                                    int *flag) {
  coll_status_t s;
  if (be->revoked) {
    /* The revoke ends once the streams passed the comm's stopped work. */
    s = wait_parent(be, h, deadline, 1, "comm_shrink: ncclCommRevoke");
    if (s == COLL_ERR_TIMEOUT)
      s = coll__err(COLL_ERR_TIMEOUT,
                    "comm_shrink: NCCL's revoke of the old comm did not "
                    "finish in time: its stream is still held by earlier "
                    "work");
    return s;
  }
  if (be->parked && n > 0) {
    *flag = NCCL_SHRINK_ABORT;
    return COLL_OK;
  }
  if (be->parked)
    return cannot_shrink(be,
                         "the loaded NCCL cannot revoke it (2.28+): name the "
                         "ranks that are gone");
  return cannot_shrink(be,
                       "NCCL's comm was aborted with it; with an NCCL older "
                       "than 2.28, set COLL_NCCL_SHRINKABLE=1 before creating "
                       "NCCL comms to keep it for a shrink");
}

coll_status_t coll__nccl_shrink_exclude(coll_comm_t *c, const int *exclude,
                                        int n, const coll_comm_config_t *cfg,
                                        coll_comm_t **out) {
  coll_nccl_be_t *be = c->be;
  const coll_nccl_table_t *t = be->t;
  coll_abort_handle_t *h = coll__config_abort_handle(cfg);
  ncclComm_t child = NULL;
  int *list = NULL, flag = NCCL_SHRINK_DEFAULT, rank = c->rank, i, failed;
  coll_cuda_saved_t saved = COLL_CUDA_SAVED_INIT;
  int guarded = 0;
  int64_t timeout, deadline;
  coll_status_t s;
  COLL_CHECK(can_make(be, n));
  if (coll__knobs_load() != COLL_OK) {
    coll__err_prefix("comm_shrink");
    return COLL_ERR_INVALID_ARG;
  }
  COLL_CHECK(coll__nccl_env_check("comm_shrink"));
  /* A comm that fails here (a peer gone) is shrunk as a failed one. */
  if (!comm_failed(be)) {
    s = quiesce(be);
    if (s != COLL_OK && !comm_failed(be)) return s;
  }
  failed = comm_failed(be);
  if (failed) {
    /* An abort under way on another thread (its flag seen, its teardown
     * not yet) finishes under the guard: after this, how it left NCCL's
     * comm (revoked, parked, reaped) is final. */
    uv_mutex_lock(&c->abort->guard);
    uv_mutex_unlock(&c->abort->guard);
  }
  /* Claimed from the start, as for an init: a handle serves one comm. */
  if (h != NULL) COLL_CHECK(coll__abort_handle_bind(h, "comm_shrink"));
  timeout = coll__config_timeout_ms(cfg);
  deadline = coll__deadline(timeout);
  if (failed) COLL_CHECK(prepare_failed(be, n, h, deadline, &flag));
  /* NCCL takes a mutable list; the caller's is const. */
  list = malloc((size_t)(n > 0 ? n : 1) * sizeof *list);
  if (list == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "comm_shrink: out of memory");
  for (i = 0; i < n; i++) {
    list[i] = exclude[i];
    if (exclude[i] < c->rank) rank--;
  }
  s = coll__cuda_device_enter(t, be->dev, &saved, "comm_shrink");
  if (s != COLL_OK) goto out;
  /* A healthy comm may be aborted by another thread meanwhile: the call is
   * made under the guard. A failed one is this thread's alone. */
  if (!failed) {
    uv_mutex_lock(&c->abort->guard);
    guarded = 1;
    s = coll__nccl_usable(be, "comm_shrink");
  }
  COLL_INFO(COLL_LOG_NCCL, "comm '%s' rank %d: %s to %d ranks%s", c->name,
            c->rank, n > 0 ? "shrink" : "split", c->world - n,
            flag == NCCL_SHRINK_ABORT ? " (NCCL_SHRINK_ABORT)" : "");
  if (s == COLL_OK) s = post_child(be, list, n, cfg, flag);
  if (guarded) uv_mutex_unlock(&c->abort->guard);
  if (s != COLL_OK) goto out;
  s = wait_parent(
      be, h, deadline, failed,
      n > 0 ? "comm_shrink: ncclCommShrink" : "comm_shrink: ncclCommSplit");
  if (s == COLL_ERR_TIMEOUT)
    s = coll__err(COLL_ERR_TIMEOUT,
                  "comm_shrink: comm '%s' rank %d: NCCL's %s did not finish "
                  "within %lld ms (every surviving rank must call comm_shrink "
                  "with the same exclude list)",
                  c->name, c->rank, n > 0 ? "shrink" : "split",
                  (long long)timeout);
  if (s == COLL_OK) s = take_child(be, &child);
  if (s != COLL_OK) {
    end_child(be);
    goto out;
  }
  /* wrap takes the child in all cases. */
  s = coll__nccl_comm_wrap(t, child, be->dev, rank, c->world - n, cfg, out);
out:
  coll__cuda_device_leave(t, saved);
  free(list);
  return s;
}
