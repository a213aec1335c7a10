/* SPDX-License-Identifier: Apache-2.0 */
/* inproc_wait.c: completing a request with a bounded wait, and the texts
 * its failures record. */
#include <stdint.h>

#include "core/error.h"
#include "transport/common/waiter.h"
#include "transport/inproc/inproc.h"

coll_status_t coll__inproc_fail_text(const inproc_ep_t *self, int is_send,
                                     int peer, uint32_t tag,
                                     const inproc_ep_t *x) {
  const char *what = is_send ? "send to" : "receive from";
  char seen[160];
  if (x == self && inproc_origin(x)->rank == self->rank)
    return coll__err(COLL_ERR_ABORTED,
                     "inproc rank %d: %s rank %d (tag %#x) failed: this "
                     "endpoint was %s",
                     self->rank, what, peer, (unsigned)tag,
                     inproc_why_text(atomic_load(&self->lost)));
  coll__origin_text(inproc_origin(x), self->rank, seen, sizeof seen);
  return coll__err(x == self ? COLL_ERR_ABORTED : inproc_peer_status(x),
                   "inproc rank %d: %s rank %d (tag %#x) failed: %s",
                   self->rank, what, peer, (unsigned)tag, seen);
}

static int look(void *arg) {
  return inproc_state(arg) == INPROC_DONE ? COLL_WAIT_DONE : COLL_WAIT_IDLE;
}

/* Sleeps on r's condition variable for at most ms (< 0: until signalled);
 * the copy that completes r signals it. The thread that waits on r. */
static void sleep_on(void *arg, int64_t ms) {
  inproc_req_t *r = arg;
  inproc_ep_t *home = r->home;
  uv_mutex_lock(&home->mu);
  if (inproc_state(r) != INPROC_DONE) {
    r->waiting = 1;
    if (ms < 0)
      uv_cond_wait(&r->cv, &home->mu);
    else
      (void)uv_cond_timedwait(&r->cv, &home->mu, (uint64_t)ms * 1000000u);
    r->waiting = 0;
  }
  uv_mutex_unlock(&home->mu);
}

/* Polls r for a short while before sleeping: when the peer thread runs on
 * another core, its copy usually lands within microseconds, far sooner
 * than a sleeping thread can be woken. Returns 1 once DONE. */
static int wait_done(inproc_req_t *r, int64_t timeout_ms) {
  coll_wait_policy_t pol = {r->owner->w->spin_ns, 0, -1, 0};
  return coll__wait_loop(&pol, timeout_ms, look, sleep_on, r);
}

coll_status_t coll__inproc_wait(void *ctx, void *req, int64_t timeout_ms,
                                size_t *len) {
  inproc_ep_t *self = ctx;
  inproc_req_t *r = req;
  coll_status_t s;
  if (r == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "inproc wait: req is NULL (rank %d)",
                     self->rank);
  /* Request objects live until destroy, so a stale one is still readable. */
  if (r->owner != self || inproc_state(r) == INPROC_FREE)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "inproc wait: rank %d: the request is not pending on "
                     "this endpoint (waited twice?)",
                     self->rank);
  /* DONE is published with release, so a completed request needs no lock. */
  if (inproc_state(r) != INPROC_DONE && !wait_done(r, timeout_ms))
    return coll__err(COLL_ERR_TIMEOUT,
                     "inproc rank %d: %s rank %d (tag %#x) not complete "
                     "after %lld ms",
                     self->rank, r->is_send ? "send to" : "receive from",
                     r->peer, (unsigned)r->tag, (long long)timeout_ms);
  s = r->status;
  if (len != NULL) *len = r->is_send ? r->len : r->got;
  if (s == COLL_ERR_LENGTH_MISMATCH)
    coll__err(s,
              "inproc rank %d: message from rank %d (tag %#x) is %zu bytes, "
              "longer than the %zu-byte receive buffer",
              self->rank, r->peer, (unsigned)r->tag, r->got, r->len);
  else if (s != COLL_OK)
    /* No closer recorded: this endpoint was aborted while its copy ran. */
    coll__inproc_fail_text(self, r->is_send, r->peer, r->tag,
                           r->lost_by != NULL ? r->lost_by : self);
  coll__inproc_req_put(self, r);
  return s;
}
