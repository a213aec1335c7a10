/* SPDX-License-Identifier: Apache-2.0 */
/* inproc_match.c: posting sends and receives, matching them by (source,
 * tag) in order, and copying each message once, sender to receiver.
 *
 * All matching for a receiving endpoint happens under that endpoint's lock,
 * so a send locks its destination and a receive locks its own endpoint;
 * no path holds two endpoint locks. A send whose receive is posted copies
 * straight into the receiver's buffer; otherwise it is queued without a
 * copy, referencing the sender's buffer, and the receive copies from it. */
#include <string.h>

#include "core/error.h"
#include "transport/inproc/inproc.h"

/* A request still waiting for its match: not one whose copy runs. */
static int queued(const coll_match_item_t *it) {
  return inproc_state(inproc_req_of(it)) == INPROC_QUEUED;
}

/* The oldest queued request in q from src with tag. Lock held. */
static inproc_req_t *find(const coll_match_q_t *q, int src, uint32_t tag) {
  coll_match_item_t *it = coll__match_find(q, src, tag, queued);
  return it != NULL ? inproc_req_of(it) : NULL;
}

void coll__inproc_complete(inproc_req_t *r, coll_status_t s,
                           const inproc_ep_t *lost_by) {
  r->status = s;
  r->lost_by = lost_by;
  /* Signal before publishing DONE: once a waiter can see DONE without the
   * lock, it may reuse the request, so DONE is our last touch. */
  if (r->waiting) uv_cond_signal(&r->cv);
  atomic_store_explicit(&r->state, INPROC_DONE, memory_order_release);
}

/* The status a matched request ends with: its owner may have been aborted
 * while the data moved. */
static coll_status_t final_status(const inproc_req_t *r, coll_status_t s) {
  if (atomic_load_explicit(&r->owner->lost, memory_order_relaxed) ==
      INPROC_ABORTED)
    return COLL_ERR_ABORTED;
  return s;
}

/* Moves send m's data into receive r. `in_list` (m or r) is the one in
 * `list` at home; while a large copy runs without the lock it stays there,
 * BUSY, so that a close waits for it. Called with home->mu held; returns
 * with it released. */
static void transfer(inproc_ep_t *home, inproc_req_t *m, inproc_req_t *r,
                     inproc_req_t *in_list, coll_match_q_t *list) {
  size_t n = m->len;
  int fits = n <= r->len;
  if (fits && n > INPROC_INLINE_COPY) {
    atomic_store_explicit(&in_list->state, INPROC_BUSY, memory_order_relaxed);
    uv_mutex_unlock(&home->mu);
    memcpy(r->rbuf, m->sbuf, n);
    uv_mutex_lock(&home->mu);
  } else if (fits && n > 0) {
    memcpy(r->rbuf, m->sbuf, n);
  }
  coll__match_remove(list, &in_list->m);
  r->got = n;
  coll__inproc_complete(
      r, final_status(r, fits ? COLL_OK : COLL_ERR_LENGTH_MISMATCH), NULL);
  coll__inproc_complete(m, final_status(m, COLL_OK), NULL);
  if (home->idle_waiters > 0) uv_cond_broadcast(&home->idle_cv);
  uv_mutex_unlock(&home->mu);
}

static coll_status_t check_args(const inproc_ep_t *ep, const char *what,
                                int peer, const void *buf, size_t len,
                                void **req) {
  if (req == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "inproc %s: req is NULL (rank %d)",
                     what, ep->rank);
  *req = NULL;
  if (peer < 0 || peer >= ep->w->size)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "inproc %s: peer %d is out of range for world %d "
                     "(rank %d)",
                     what, peer, ep->w->size, ep->rank);
  if (buf == NULL && len > 0)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "inproc %s: buffer is NULL with length %zu (rank %d, "
                     "peer %d)",
                     what, len, ep->rank, peer);
  return COLL_OK;
}

/* Refuses a post once either side closed. The home lock is held, so a
 * close that starts later will find the request in its sweep. */
static coll_status_t check_open(inproc_ep_t *self, const inproc_ep_t *peer,
                                int is_send, uint32_t tag) {
  if (atomic_load(&self->lost) != INPROC_OPEN)
    return coll__inproc_fail_text(self, is_send, peer->rank, tag, self);
  if (atomic_load(&peer->lost) != INPROC_OPEN) {
    coll__inproc_note_origin(self, inproc_origin(peer));
    return coll__inproc_fail_text(self, is_send, peer->rank, tag, peer);
  }
  return COLL_OK;
}

static void req_init(inproc_req_t *r, inproc_ep_t *home, int is_send, int peer,
                     uint32_t tag, size_t len) {
  r->home = home;
  r->is_send = is_send;
  r->peer = peer;
  r->tag = tag;
  r->len = len;
  r->got = 0;
  r->status = COLL_OK;
  r->lost_by = NULL;
  r->waiting = 0;
  atomic_store_explicit(&r->state, INPROC_QUEUED, memory_order_relaxed);
}

coll_status_t coll__inproc_isend(void *ctx, int peer, uint32_t tag,
                                 const void *buf, size_t len, void **req) {
  inproc_ep_t *self = ctx, *dst;
  inproc_req_t *m, *r;
  coll_status_t s = check_args(self, "send to", peer, buf, len, req);
  if (s != COLL_OK) return s;
  dst = &self->w->eps[peer];
  m = coll__inproc_req_get(self);
  if (m == NULL)
    return coll__err(COLL_ERR_NO_MEMORY,
                     "inproc send to rank %d: out of memory for a request",
                     peer);
  req_init(m, dst, 1, peer, tag, len);
  m->sbuf = buf;
  m->rbuf = NULL;
  uv_mutex_lock(&dst->mu);
  s = check_open(self, dst, 1, tag);
  if (s != COLL_OK) {
    uv_mutex_unlock(&dst->mu);
    coll__inproc_req_put(self, m);
    return s;
  }
  r = find(&dst->posted, self->rank, tag);
  if (r == NULL) {
    coll__match_push(&dst->unexpected, &m->m, self->rank, tag);
    uv_mutex_unlock(&dst->mu);
  } else {
    transfer(dst, m, r, r, &dst->posted);
  }
  *req = m;
  return COLL_OK;
}

coll_status_t coll__inproc_irecv(void *ctx, int peer, uint32_t tag, void *buf,
                                 size_t cap, void **req) {
  inproc_ep_t *self = ctx;
  inproc_req_t *m, *r;
  coll_status_t s = check_args(self, "receive from", peer, buf, cap, req);
  if (s != COLL_OK) return s;
  r = coll__inproc_req_get(self);
  if (r == NULL)
    return coll__err(COLL_ERR_NO_MEMORY,
                     "inproc receive from rank %d: out of memory for a "
                     "request",
                     peer);
  req_init(r, self, 0, peer, tag, cap);
  r->sbuf = NULL;
  r->rbuf = buf;
  uv_mutex_lock(&self->mu);
  s = check_open(self, &self->w->eps[peer], 0, tag);
  if (s != COLL_OK) {
    uv_mutex_unlock(&self->mu);
    coll__inproc_req_put(self, r);
    return s;
  }
  m = find(&self->unexpected, peer, tag);
  if (m == NULL) {
    coll__match_push(&self->posted, &r->m, peer, tag);
    uv_mutex_unlock(&self->mu);
  } else {
    transfer(self, m, r, m, &self->unexpected);
  }
  *req = r;
  return COLL_OK;
}
