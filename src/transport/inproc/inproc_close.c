/* SPDX-License-Identifier: Apache-2.0 */
/* inproc_close.c: abort and destroy of an endpoint as its peers see them:
 * every request that involves the endpoint fails, and no copy touching its
 * buffers is still running when the close returns. */
#include "core/error.h"
#include "transport/inproc/inproc.h"

/* Whether request r, in a list at endpoint `at`, involves closing `x`:
 * everything in x's own lists does, and elsewhere what x sent or what
 * waits for x. */
static int involves(const inproc_ep_t *at, const inproc_ep_t *x,
                    const inproc_req_t *r) {
  return at == x || r->m.peer == x->rank;
}

static int has_busy(const inproc_ep_t *at, const inproc_ep_t *x,
                    const coll_match_q_t *q) {
  const coll_match_item_t *it;
  for (it = q->head; it != NULL; it = it->next)
    if (inproc_state(inproc_req_of(it)) == INPROC_BUSY &&
        involves(at, x, inproc_req_of(it)))
      return 1;
  return 0;
}

static void fail_list(inproc_ep_t *at, inproc_ep_t *x, coll_match_q_t *q) {
  coll_match_item_t *it = q->head, *next;
  for (; it != NULL; it = next) {
    inproc_req_t *r = inproc_req_of(it);
    next = it->next;
    if (!involves(at, x, r)) continue;
    coll__match_remove(q, it);
    /* x's own requests are cancelled; its peers' ones end with the status
     * of x's origin, which their owners now forward. */
    if (r->owner != x) coll__inproc_note_origin(r->owner, inproc_origin(x));
    coll__inproc_complete(
        r, r->owner == x ? COLL_ERR_ABORTED : inproc_peer_status(x), x);
  }
}

/* Fails what in `at`'s lists involves x, after the copies in flight that do
 * finished. No new match involving x starts once x->lost is set, so the
 * wait ends. at->mu held. */
static void sweep(inproc_ep_t *at, inproc_ep_t *x) {
  while (has_busy(at, x, &at->posted) || has_busy(at, x, &at->unexpected))
    inproc_idle_wait(at);
  fail_list(at, x, &at->posted);
  fail_list(at, x, &at->unexpected);
}

void coll__inproc_note_origin(inproc_ep_t *ep, const coll_origin_t *o) {
  coll__origins_heard(&ep->origins, o);
}

void coll__inproc_fail(void *ctx, const coll_origin_t *o) {
  coll__inproc_close(ctx, INPROC_ABORTED, o);
}

int coll__inproc_origin(void *ctx, coll_origin_t *o) {
  return coll__origins_get(&((inproc_ep_t *)ctx)->origins, o);
}

void coll__inproc_close(inproc_ep_t *x, int why, const coll_origin_t *o) {
  inproc_world_t *w = x->w;
  int i;
  uv_mutex_lock(&x->mu);
  if (x->close_state != 0) {
    /* A second abort returns only when the first one's promise holds. */
    while (x->close_state != 2) inproc_idle_wait(x);
    uv_mutex_unlock(&x->mu);
    return;
  }
  x->close_state = 1;
  /* A failure this endpoint saw elsewhere first is what its peers hear. */
  (void)coll__origins_close(&x->origins, o);
  atomic_store(&x->lost, why);
  sweep(x, x);
  uv_mutex_unlock(&x->mu);
  /* Waits on the shared-memory collectives' flags look at `lost` too. */
  coll__inproc_shared_wake(w);
  /* One endpoint lock at a time: matching never holds two either. */
  for (i = 0; i < w->size; i++) {
    inproc_ep_t *at = &w->eps[i];
    /* A closed endpoint's lists were emptied and no post reaches them. */
    if (at == x || atomic_load_explicit(&at->closed, memory_order_acquire))
      continue;
    uv_mutex_lock(&at->mu);
    sweep(at, x);
    uv_mutex_unlock(&at->mu);
  }
  /* A peer reading this rank's buffers in the direct allreduce finishes
   * before the abort returns; it starts no other read (x is closed). */
  coll__inproc_shared_quiesce(w, x);
  uv_mutex_lock(&x->mu);
  x->close_state = 2;
  atomic_store_explicit(&x->closed, 1, memory_order_release);
  if (x->idle_waiters > 0) uv_cond_broadcast(&x->idle_cv);
  uv_mutex_unlock(&x->mu);
}
