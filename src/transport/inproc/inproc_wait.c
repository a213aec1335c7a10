/* SPDX-License-Identifier: Apache-2.0 */
/* inproc_wait.c: completing a request with a bounded wait, and the texts
 * its failures record. */
#include <stdint.h>

#include "core/error.h"
#include "transport/inproc/inproc.h"

coll_status_t coll__inproc_fail_text(const inproc_ep_t *self, int is_send,
                                     int peer, uint32_t tag,
                                     const inproc_ep_t *x) {
  const char *what = is_send ? "send to" : "receive from";
  char seen[160];
  if (x == self && x->origin.rank == self->rank)
    return coll__err(COLL_ERR_ABORTED,
                     "inproc rank %d: %s rank %d (tag %#x) failed: this "
                     "endpoint was %s",
                     self->rank, what, peer, (unsigned)tag,
                     inproc_why_text(atomic_load(&self->lost)));
  coll__origin_text(&x->origin, self->rank, seen, sizeof seen);
  return coll__err(x == self ? COLL_ERR_ABORTED : inproc_peer_status(x),
                   "inproc rank %d: %s rank %d (tag %#x) failed: %s",
                   self->rank, what, peer, (unsigned)tag, seen);
}

/* Polls r for a short while before sleeping: when the peer thread runs on
 * another core, its copy usually lands within microseconds, far sooner
 * than a sleeping thread can be woken. Returns 1 once DONE. */
static int spin(const inproc_req_t *r) {
  uint64_t spin_ns = r->owner->w->spin_ns, until;
  unsigned i;
  if (spin_ns == 0) return 0;
  until = uv_hrtime() + spin_ns;
  do {
    for (i = 0; i < 64; i++) {
      if (inproc_state(r) == INPROC_DONE) return 1;
      inproc_cpu_relax();
    }
  } while (uv_hrtime() < until);
  return 0;
}

/* Sleeps until r is DONE or timeout_ms (< 0: forever) passed. Returns 1
 * once DONE. The thread that waits on r. */
static int block(inproc_req_t *r, int64_t timeout_ms) {
  inproc_ep_t *home = r->home;
  uint64_t deadline = 0, now;
  int done;
  if (timeout_ms >= 0) {
    /* Clamped so the nanosecond deadline cannot overflow (~290 years). */
    if (timeout_ms > INT64_MAX / 1000000 / 2)
      timeout_ms = INT64_MAX / 1000000 / 2;
    deadline = uv_hrtime() + (uint64_t)timeout_ms * 1000000u;
  }
  uv_mutex_lock(&home->mu);
  while (inproc_state(r) != INPROC_DONE) {
    if (timeout_ms < 0) {
      r->waiting = 1;
      uv_cond_wait(&r->cv, &home->mu);
    } else {
      now = uv_hrtime();
      if (now >= deadline) break;
      r->waiting = 1;
      (void)uv_cond_timedwait(&r->cv, &home->mu, deadline - now);
    }
    r->waiting = 0;
  }
  done = inproc_state(r) == INPROC_DONE;
  uv_mutex_unlock(&home->mu);
  return done;
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
  if (inproc_state(r) != INPROC_DONE && (timeout_ms == 0 || !spin(r)) &&
      !block(r, timeout_ms))
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
