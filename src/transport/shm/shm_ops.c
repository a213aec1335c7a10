/* SPDX-License-Identifier: Apache-2.0 */
/* shm_ops.c: the shared-memory transport's slots other than wait: isend,
 * irecv, abort, destroy, and the provider table that holds them all. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/provider.h"
#include "transport/shm/shm_int.h"
#include "transport/shm/shm_ops.h"

/* The members of a host endpoint as comm ranks, "1, 4, 6" (the first few
 * only in a big one), for the text of a refused peer. */
static void members_text(const shm_ep_t *ep, char *buf, size_t n) {
  enum { SHOWN = 8 };
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < ep->world && i < SHOWN && used < n; i++)
    used += (size_t)snprintf(buf + used, n - used, "%s%d", i > 0 ? ", " : "",
                             ep->names[i]);
  if (ep->world > SHOWN && used < n)
    snprintf(buf + used, n - used, ", ... (%d in all)", ep->world);
}

/* Checks a post's arguments; *idx is then the peer's member index. */
static coll_status_t check_post(shm_ep_t *ep, const char *what, int peer,
                                const void *buf, size_t len, void **req,
                                int *idx) {
  if (req == NULL)
    return coll_set_last_error(COLL_ERR_INVALID_ARG, "shm %s: req is NULL",
                               what);
  *idx = coll__shm_member(ep, peer);
  if (ep->names != NULL && (*idx < 0 || *idx == ep->rank)) {
    char members[128];
    members_text(ep, members, sizeof members);
    return coll_set_last_error(
        COLL_ERR_INVALID_ARG,
        "shm %s: rank %d %s (this endpoint joins ranks %s)", what, peer,
        *idx < 0 ? "is not on this host" : "is this rank itself", members);
  }
  if (*idx < 0 || *idx == ep->rank)
    return coll_set_last_error(COLL_ERR_INVALID_ARG,
                               "shm %s: peer %d is not another rank of "
                               "0..%d (this is rank %d)",
                               what, peer, ep->world - 1, ep->rank);
  if (buf == NULL && len > 0)
    return coll_set_last_error(COLL_ERR_INVALID_ARG,
                               "shm %s: buf is NULL for %zu bytes", what, len);
  return COLL_OK;
}

/* Under ep->mu: why a post to member p is refused, or COLL_OK: a lost
 * peer's own failure, else this endpoint's close. */
static coll_status_t refused(shm_ep_t *ep, const char *what, int p) {
  shm_peer_t *pr = &ep->peers[p];
  char why[sizeof pr->why];
  if (pr->lost)
    return coll_set_last_error(pr->lost_status, "shm %s: %s", what, pr->why);
  if (!atomic_load(&ep->aborted)) return COLL_OK;
  if (!ep->closed) {
    snprintf(why, sizeof why, "rank %d aborted", coll__shm_name(ep, ep->rank));
    return coll_set_last_error(COLL_ERR_ABORTED, "shm %s: %s", what, why);
  }
  /* As the requests pending at the close failed. */
  coll__shm_closed_text(ep, why, sizeof why);
  return coll_set_last_error(ep->close_status, "shm %s: %s", what, why);
}

static shm_req_t *req_new(int kind, int peer, uint32_t tag, size_t len) {
  shm_req_t *r = calloc(1, sizeof *r);
  if (r == NULL) return NULL;
  r->kind = kind;
  r->peer = peer;
  r->tag = tag;
  r->len = len;
  return r;
}

static coll_status_t shm_isend(void *ctx, int peer, uint32_t tag,
                               const void *buf, size_t len, void **req) {
  shm_ep_t *ep = ctx;
  shm_peer_t *pr;
  shm_req_t *r;
  int p;
  coll_status_t s = check_post(ep, "isend", peer, buf, len, req, &p);
  if (s != COLL_OK) return s;
  r = req_new(SHM_SEND, p, tag, len);
  if (r == NULL)
    return coll_set_last_error(COLL_ERR_NO_MEMORY, "shm isend: out of memory");
  r->sbuf = buf;
  pr = &ep->peers[p];
  pthread_mutex_lock(&ep->mu);
  s = refused(ep, "isend", p);
  if (s != COLL_OK) {
    pthread_mutex_unlock(&ep->mu);
    free(r);
    return s;
  }
  if (pr->sq_tail != NULL)
    pr->sq_tail->next = r;
  else
    pr->sq_head = r;
  pr->sq_tail = r;
  /* The fast path: a message that fits goes into the ring right away. The
   * pass may also complete what another thread of this rank waits for:
   * wake it (on the condition variable, or in the kernel). */
  if (coll__shm_progress(ep)) {
    pthread_cond_broadcast(&ep->cv);
    if (ep->leader) {
      uint64_t one = 1;
      ssize_t n = write(ep->bell, &one, sizeof one);
      (void)n;
    }
  }
  pthread_mutex_unlock(&ep->mu);
  *req = r;
  return COLL_OK;
}

static coll_status_t shm_irecv(void *ctx, int peer, uint32_t tag, void *buf,
                               size_t cap, void **req) {
  shm_ep_t *ep = ctx;
  shm_req_t *r;
  int p;
  coll_status_t s = check_post(ep, "irecv", peer, buf, cap, req, &p);
  if (s != COLL_OK) return s;
  r = req_new(SHM_RECV, p, tag, cap);
  if (r == NULL)
    return coll_set_last_error(COLL_ERR_NO_MEMORY, "shm irecv: out of memory");
  r->rbuf = buf;
  pthread_mutex_lock(&ep->mu);
  /* A lost peer's whole messages stay receivable: only the close refuses. */
  if (atomic_load(&ep->aborted)) {
    s = refused(ep, "irecv", p);
    pthread_mutex_unlock(&ep->mu);
    free(r);
    return s;
  }
  /* Otherwise the receive completes with its peer's failure at the first
   * wait. */
  coll__shm_post_recv(ep, r);
  pthread_mutex_unlock(&ep->mu);
  *req = r;
  return COLL_OK;
}

/* Publishes o as where this endpoint's failure started, marks it gone and
 * hangs up every peer's socket, so peers sleeping on them wake and report
 * o. */
static void leave(shm_ep_t *ep, const coll_origin_t *o) {
  shm_hdr_t *h = ep->hdr;
  if (!atomic_load_explicit(&h->origin_set, memory_order_relaxed)) {
    h->origin_rank = o->rank;
    h->origin_cause = o->cause;
    h->origin_detail = o->detail;
    atomic_store_explicit(&h->origin_set, 1, memory_order_release);
  }
  atomic_store_explicit(&h->gone, 1, memory_order_release);
  for (int p = 0; p < ep->world; p++)
    if (p != ep->rank && ep->peers[p].sock >= 0) {
      shutdown(ep->peers[p].sock, SHUT_RDWR);
      coll__shm_ring_bell(ep, p);
    }
}

void coll__shm_close_locked(shm_ep_t *ep, const coll_origin_t *o,
                            coll_status_t s) {
  coll_origin_t use;
  uint64_t one = 1;
  ssize_t n;
  if (ep->closed) return;
  /* A failure this endpoint heard of first is what its peers hear. A
   * peer that only left (destroyed its comm) was kept apart: this rank's
   * own destroy says goodbye for itself, not for it. */
  use = coll__origins_close(&ep->origins, o);
  ep->closed = 1;
  atomic_store(&ep->aborted, 1);
  ep->close_status = s;
  coll__shm_fail_all(ep, s);
  leave(ep, &use);
  pthread_cond_broadcast(&ep->cv);
  /* Wakes this rank's own sleeper. */
  n = write(ep->bell, &one, sizeof one);
  (void)n;
}

void coll__shm_close(shm_ep_t *ep, const coll_origin_t *o) {
  pthread_mutex_lock(&ep->mu);
  coll__shm_close_locked(ep, o, COLL_ERR_ABORTED);
  pthread_mutex_unlock(&ep->mu);
}

void coll__shm_closed_text(const shm_ep_t *ep, char *buf, size_t n) {
  int me = coll__shm_name(ep, ep->rank);
  const coll_origin_t *o = coll__shm_closed_origin(ep);
  if (o->rank == me && o->cause == COLL_CAUSE_ABORTED)
    snprintf(buf, n, "rank %d aborted", me);
  else
    coll__origin_text(o, me, buf, n);
}

void coll__shm_fail(void *ctx, const coll_origin_t *o) {
  coll__shm_close(ctx, o);
}

int coll__shm_origin(void *ctx, coll_origin_t *o) {
  shm_ep_t *ep = ctx;
  return coll__origins_get(&ep->origins, o) ||
         coll__origin_cell_get(&ep->left, o);
}

static void shm_abort(void *ctx) {
  shm_ep_t *ep = ctx;
  coll_origin_t o = {coll__shm_name(ep, ep->rank), COLL_CAUSE_ABORTED, 0};
  coll__shm_close(ep, &o);
}

static void shm_destroy(void *ctx) {
  shm_ep_t *ep = ctx;
  coll_origin_t o = {coll__shm_name(ep, ep->rank), COLL_CAUSE_DESTROYED, 0};
  /* Every request was waited: the close fails nothing, it tells peers. */
  coll__shm_close(ep, &o);
  coll__shm_ep_free(ep);
}

/* Where the comm's position lives: in this rank's header, which every
 * peer maps, so asking is reading. A host endpoint inside a larger comm
 * has none of its own (the comm's position lives in its main endpoint). */
static coll_pos_t *shm_position(void *ctx) {
  shm_ep_t *ep = ctx;
  return ep->names == NULL ? &ep->hdr->pos : NULL;
}

static coll_rounds_t *shm_rounds(void *ctx) { return coll__shm_rounds(ctx); }

/* The shared-memory provider. Shared memory never shrinks. */
static const coll_provider_t shm_provider = {
    .size = sizeof(coll_provider_t),
    .version = COLL_PROVIDER_VERSION,
    .name = "shm",
    .isend = shm_isend,
    .irecv = shm_irecv,
    .wait = coll__shm_wait,
    .abort = shm_abort,
    .destroy = shm_destroy,
    .fail = coll__shm_fail,
    .origin = coll__shm_origin,
    .ask = coll__shm_ask,
    .tell = coll__shm_tell,
    .heard = coll__shm_heard,
    .position = shm_position,
    .kick = coll__shm_kick,
    .probe = coll__shm_probe,
    .rounds = shm_rounds,
    .hints = {.seg_bytes = SHM_SEGMENT_BYTES},
};

const coll_provider_t *coll__shm_provider(void) { return &shm_provider; }
