/* SPDX-License-Identifier: Apache-2.0 */
/* inproc_shrink.c: shrinking an in-process world. The survivors' agreement
 * (transport/common/shrink_agree.c) runs over mailboxes on a board the world's
 * endpoints share; a rank is lost to it once its owner aborted its comm
 * or destroyed it (a thread that merely stops calling is not: the others
 * wait for it until their timeout). The first member to get past the
 * agreement makes the survivors' world; each member takes its endpoint. */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "transport/common/shrink_agree.h"
#include "transport/inproc/inproc.h"
#include "transport/transport.h"

typedef struct inproc_smsg {
  struct inproc_smsg *next;
  size_t len;
  uint8_t data[];
} inproc_smsg_t;

struct inproc_board {
  uv_mutex_t mu;
  uv_cond_t cv;
  int size;
  inproc_smsg_t **head, **tail; /* [from * size + to] */
  uint8_t *gone;                /* the rank left */
  uint8_t *used;                /* the rank shrank already */
  coll_transport_t **next;      /* the survivors' endpoints, once made */
  uint8_t *taken;               /* by their rank among the survivors */
  int next_n;
};

coll_status_t coll__inproc_board_new(inproc_world_t *w) {
  struct inproc_board *b = calloc(1, sizeof *b);
  size_t n = (size_t)w->size;
  if (b == NULL) goto nomem;
  b->size = w->size;
  b->head = calloc(n * n, sizeof *b->head);
  b->tail = calloc(n * n, sizeof *b->tail);
  b->gone = calloc(n, 1);
  b->used = calloc(n, 1);
  if (b->head == NULL || b->tail == NULL || b->gone == NULL ||
      b->used == NULL || uv_mutex_init(&b->mu) != 0)
    goto nomem;
  if (uv_cond_init(&b->cv) != 0) {
    uv_mutex_destroy(&b->mu);
    goto nomem;
  }
  w->board = b;
  return COLL_OK;
nomem:
  if (b != NULL) {
    free(b->head);
    free(b->tail);
    free(b->gone);
    free(b->used);
  }
  free(b);
  return coll__err(COLL_ERR_NO_MEMORY, "inproc_create: out of memory");
}

void coll__inproc_board_free(inproc_world_t *w) {
  struct inproc_board *b = w->board;
  size_t i;
  if (b == NULL) return;
  for (i = 0; i < (size_t)b->size * (size_t)b->size; i++)
    while (b->head[i] != NULL) {
      inproc_smsg_t *m = b->head[i];
      b->head[i] = m->next;
      free(m);
    }
  /* Endpoints of the survivors' world that no member came for. */
  for (i = 0; b->next != NULL && i < (size_t)b->next_n; i++)
    if (!b->taken[i]) coll_transport_destroy(b->next[i]);
  free(b->next);
  free(b->taken);
  uv_cond_destroy(&b->cv);
  uv_mutex_destroy(&b->mu);
  free(b->head);
  free(b->tail);
  free(b->gone);
  free(b->used);
  free(b);
  w->board = NULL;
}

void coll__inproc_board_gone(inproc_world_t *w, int rank) {
  struct inproc_board *b = w->board;
  uv_mutex_lock(&b->mu);
  b->gone[rank] = 1;
  uv_cond_broadcast(&b->cv);
  uv_mutex_unlock(&b->mu);
}

void coll__inproc_leave(void *ctx) {
  inproc_ep_t *ep = ctx;
  coll__inproc_board_gone(ep->w, ep->rank);
}

typedef struct link_ctx {
  struct inproc_board *b;
  int rank;
} link_ctx_t;

static coll_status_t link_send(void *ctx, int peer, const void *msg, size_t len,
                               int64_t deadline_ms) {
  link_ctx_t *l = ctx;
  struct inproc_board *b = l->b;
  inproc_smsg_t *m = malloc(sizeof *m + len);
  size_t q = (size_t)l->rank * (size_t)b->size + (size_t)peer;
  (void)deadline_ms;
  if (m == NULL) return coll__err(COLL_ERR_NO_MEMORY, "out of memory");
  m->next = NULL;
  m->len = len;
  memcpy(m->data, msg, len);
  uv_mutex_lock(&b->mu);
  if (b->tail[q] != NULL)
    b->tail[q]->next = m;
  else
    b->head[q] = m;
  b->tail[q] = m;
  uv_cond_broadcast(&b->cv);
  uv_mutex_unlock(&b->mu);
  return COLL_OK;
}

/* What was sent before a rank left is still delivered: the queue first,
 * then its departure. */
static coll_status_t link_recv(void *ctx, int peer, void *buf, size_t cap,
                               size_t *len, int64_t deadline_ms) {
  link_ctx_t *l = ctx;
  struct inproc_board *b = l->b;
  size_t q = (size_t)peer * (size_t)b->size + (size_t)l->rank;
  inproc_smsg_t *m;
  coll_status_t s = COLL_OK;
  int gone;
  uv_mutex_lock(&b->mu);
  while ((m = b->head[q]) == NULL && !b->gone[peer]) {
    int64_t left = coll__remaining_ms(deadline_ms);
    if (deadline_ms >= 0 && left <= 0) break;
    if (deadline_ms < 0)
      uv_cond_wait(&b->cv, &b->mu);
    else
      (void)uv_cond_timedwait(&b->cv, &b->mu, (uint64_t)left * 1000000u);
  }
  if (m != NULL) {
    b->head[q] = m->next;
    if (b->head[q] == NULL) b->tail[q] = NULL;
  }
  gone = b->gone[peer];
  uv_mutex_unlock(&b->mu);
  if (m == NULL)
    return gone ? coll__err(COLL_ERR_PEER_LOST, "rank %d left", peer)
                : coll__err(COLL_ERR_TIMEOUT, "rank %d: nothing in time", peer);
  if (m->len > cap)
    s = coll__err(COLL_ERR_PROTOCOL, "rank %d: message too long", peer);
  else
    memcpy(buf, m->data, m->len);
  *len = m->len;
  free(m);
  return s;
}

/* The survivors' endpoint of this member: the first to get here makes
 * them all. */
static coll_status_t take_endpoint(struct inproc_board *b, int n, int newrank,
                                   coll_transport_t **out) {
  coll_status_t s = COLL_OK;
  uv_mutex_lock(&b->mu);
  if (b->next == NULL) {
    b->next = calloc((size_t)n, sizeof *b->next);
    b->taken = calloc((size_t)n, 1);
    if (b->next == NULL || b->taken == NULL)
      s = coll__err(COLL_ERR_NO_MEMORY, "out of memory");
    else
      s = coll_inproc_create(n, b->next);
    if (s != COLL_OK) {
      free(b->next);
      free(b->taken);
      b->next = NULL;
      b->taken = NULL;
    } else {
      b->next_n = n;
    }
  }
  if (s == COLL_OK) {
    *out = b->next[newrank];
    b->taken[newrank] = 1;
  }
  uv_mutex_unlock(&b->mu);
  return s;
}

coll_status_t coll__inproc_shrink(void *ctx, int64_t deadline_ms,
                                  coll_transport_t **out) {
  inproc_ep_t *ep = ctx;
  struct inproc_board *b = ep->w->board;
  coll_origin_t o = {ep->rank, COLL_CAUSE_ABORTED, 0};
  link_ctx_t lc = {b, ep->rank};
  coll_shrink_links_t links = {&lc, ep->rank, ep->w->size, link_send,
                               link_recv};
  coll_shrink_view_t v;
  int64_t hello_dl;
  int gone, used;
  coll_status_t s;
  uv_mutex_lock(&b->mu);
  gone = b->gone[ep->rank];
  used = b->used[ep->rank];
  b->used[ep->rank] = 1;
  uv_mutex_unlock(&b->mu);
  if (gone)
    return coll__err(COLL_ERR_ABORTED,
                     "rank %d was aborted by its owner and left the comm",
                     ep->rank);
  if (used)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "this comm was shrunk before: shrink the comm that "
                     "shrink returned");
  /* This rank's part in the old world ends: what waits on it fails. */
  coll__inproc_close(ep, INPROC_ABORTED, &o);
  COLL_CHECK(coll__shrink_view_init(&v, ep->w->size));
  hello_dl = deadline_ms < 0
                 ? coll__now_ms() + 30000
                 : coll__now_ms() + coll__remaining_ms(deadline_ms) / 2;
  s = coll__shrink_agree(&links, "", hello_dl, deadline_ms, &v);
  if (s == COLL_OK && !v.member[ep->rank])
    s = coll__err(COLL_ERR_PEER_LOST,
                  "the survivors left rank %d out: it joined their agreement "
                  "too late",
                  ep->rank);
  if (s == COLL_OK)
    s = take_endpoint(b, coll__shrink_view_count(&v),
                      coll__shrink_view_rank(&v, ep->rank), out);
  coll__shrink_view_free(&v);
  return s;
}
