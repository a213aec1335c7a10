/* SPDX-License-Identifier: Apache-2.0 */
/* inproc_world.c: creating the endpoints of an in-process transport, their
 * request free lists, and freeing the world with its last endpoint. */
#include <stdlib.h>
#include <string.h>

#include "core/cores.h"
#include "core/error.h"
#include "core/log.h"
#include "transport/inproc/inproc.h"
#include "transport/provider.h"

/* Between threads a segment costs a lock and a wakeup (~3-5 us), and
 * 2 x 256 KiB of receive scratch stays in L2 for the reduce that follows
 * the copy: 256 KiB segments measured best. */
#define INPROC_SEGMENT_BYTES (256u << 10)

struct inproc_req_block {
  struct inproc_req_block *next;
  inproc_req_t reqs[INPROC_REQ_BLOCK];
};

static coll_pos_t *inproc_position(void *ctx) {
  return &((inproc_ep_t *)ctx)->pos;
}

static coll_rounds_t *inproc_rounds(void *ctx) {
  return coll__inproc_rounds(ctx);
}

/* The in-process provider: every capability but heartbeats, which
 * threads of one process do not need. The dissemination barrier on
 * messages serves. */
static const coll_provider_t inproc_provider = {
    .size = sizeof(coll_provider_t),
    .version = COLL_PROVIDER_VERSION,
    .name = "inproc",
    .isend = coll__inproc_isend,
    .irecv = coll__inproc_irecv,
    .wait = coll__inproc_wait,
    .abort = coll__inproc_abort,
    .destroy = coll__inproc_destroy,
    .fail = coll__inproc_fail,
    .origin = coll__inproc_origin,
    .ask = coll__inproc_ask,
    .tell = coll__inproc_tell,
    .heard = coll__inproc_heard,
    .position = inproc_position,
    .shrink = coll__inproc_shrink,
    .leave = coll__inproc_leave,
    .probe = coll__inproc_probe,
    .rounds = inproc_rounds,
    .hints = {.seg_bytes = INPROC_SEGMENT_BYTES},
};

/* A new block of requests, chained on the endpoint's free list. free_mu
 * held. Returns 0 when out of memory. */
static int grow(inproc_ep_t *ep) {
  struct inproc_req_block *b = calloc(1, sizeof *b);
  int i;
  if (b == NULL) return 0;
  for (i = 0; i < INPROC_REQ_BLOCK; i++) {
    if (uv_cond_init(&b->reqs[i].cv) != 0) {
      while (--i >= 0) uv_cond_destroy(&b->reqs[i].cv);
      free(b);
      return 0;
    }
    b->reqs[i].free_next = i + 1 < INPROC_REQ_BLOCK ? &b->reqs[i + 1] : NULL;
    b->reqs[i].owner = ep;
  }
  b->next = ep->blocks;
  ep->blocks = b;
  ep->free_reqs = &b->reqs[0];
  return 1;
}

inproc_req_t *coll__inproc_req_get(inproc_ep_t *ep) {
  inproc_req_t *r = NULL;
  uv_mutex_lock(&ep->free_mu);
  if (ep->free_reqs != NULL || grow(ep)) {
    r = ep->free_reqs;
    ep->free_reqs = r->free_next;
    r->free_next = NULL;
  }
  uv_mutex_unlock(&ep->free_mu);
  return r;
}

void coll__inproc_req_put(inproc_ep_t *ep, inproc_req_t *r) {
  atomic_store_explicit(&r->state, INPROC_FREE, memory_order_relaxed);
  uv_mutex_lock(&ep->free_mu);
  r->free_next = ep->free_reqs;
  ep->free_reqs = r;
  uv_mutex_unlock(&ep->free_mu);
}

void coll__inproc_req_free_all(inproc_ep_t *ep) {
  struct inproc_req_block *b = ep->blocks, *next;
  int i;
  for (; b != NULL; b = next) {
    next = b->next;
    for (i = 0; i < INPROC_REQ_BLOCK; i++) uv_cond_destroy(&b->reqs[i].cv);
    free(b);
  }
  ep->blocks = NULL;
  ep->free_reqs = NULL;
}

/* Frees the world and the locks of endpoints [0, n). */
static void world_free(inproc_world_t *w, int n) {
  int i;
  coll__inproc_board_free(w);
  coll__inproc_shared_free(w);
  uv_cond_destroy(&w->flag_cv);
  uv_mutex_destroy(&w->flag_mu);
  for (i = 0; i < n; i++) {
    uv_cond_destroy(&w->eps[i].idle_cv);
    uv_mutex_destroy(&w->eps[i].mu);
    uv_mutex_destroy(&w->eps[i].free_mu);
  }
  free(w->eps);
  free(w);
}

/* The locks of one endpoint; 0 on success, nothing left behind otherwise. */
static int ep_init(inproc_ep_t *ep, inproc_world_t *w, int rank) {
  if (uv_mutex_init(&ep->mu) != 0) return -1;
  if (uv_mutex_init(&ep->free_mu) != 0) {
    uv_mutex_destroy(&ep->mu);
    return -1;
  }
  if (uv_cond_init(&ep->idle_cv) != 0) {
    uv_mutex_destroy(&ep->free_mu);
    uv_mutex_destroy(&ep->mu);
    return -1;
  }
  atomic_init(&ep->lost, INPROC_OPEN);
  atomic_init(&ep->closed, 0);
  atomic_init(&ep->coll_reading, 0);
  coll__origins_init(&ep->origins);
  coll__pos_init(&ep->pos);
  ep->w = w;
  ep->rank = rank;
  return 0;
}

static coll_status_t world_new(int size, inproc_world_t **out) {
  inproc_world_t *w = calloc(1, sizeof *w);
  coll_status_t s = COLL_OK;
  int i = 0;
  if (w == NULL)
    return coll__err(COLL_ERR_NO_MEMORY,
                     "inproc_create: out of memory for %d endpoints", size);
  if (uv_mutex_init(&w->flag_mu) != 0) {
    free(w);
    return coll__err(COLL_ERR_SYSTEM, "inproc_create: could not create a lock");
  }
  if (uv_cond_init(&w->flag_cv) != 0) {
    uv_mutex_destroy(&w->flag_mu);
    free(w);
    return coll__err(COLL_ERR_SYSTEM, "inproc_create: could not create a lock");
  }
  atomic_init(&w->flag_sleepers, 0);
  /* aligned_alloc wants a multiple of the alignment: sizeof already is. */
  w->eps =
      aligned_alloc(_Alignof(inproc_ep_t), (size_t)size * sizeof(inproc_ep_t));
  if (w->eps == NULL) {
    s = coll__err(COLL_ERR_NO_MEMORY,
                  "inproc_create: out of memory for %d endpoints", size);
    goto fail;
  }
  memset(w->eps, 0, (size_t)size * sizeof(inproc_ep_t));
  w->size = size;
  /* With more rank threads than cores, polling only takes the core from the
   * thread that would complete the request. */
  w->crowded = (unsigned)size > coll__cores();
  w->spin_ns = w->crowded ? 0 : INPROC_SPIN_NS;
  atomic_init(&w->live, size);
  s = coll__inproc_board_new(w);
  if (s != COLL_OK) goto fail;
  coll__report_cell_init(&w->report);
  for (i = 0; i < size; i++) {
    if (ep_init(&w->eps[i], w, i) != 0) {
      s = coll__err(COLL_ERR_SYSTEM,
                    "inproc_create: could not create the locks of endpoint "
                    "%d",
                    i);
      goto fail;
    }
  }
  /* Without the memory the ranks still talk by messages. */
  if (!coll__inproc_shared_alloc(w))
    COLL_WARN(COLL_LOG_NET,
              "inproc: no memory for the shared-memory collectives of %d "
              "ranks; using messages",
              size);
  *out = w;
  return COLL_OK;

fail:
  world_free(w, i);
  return s;
}

void coll__inproc_abort(void *ctx) {
  inproc_ep_t *ep = ctx;
  coll_origin_t o = {ep->rank, COLL_CAUSE_ABORTED, 0};
  coll__inproc_close(ep, INPROC_ABORTED, &o);
}

void coll__inproc_destroy(void *ctx) {
  inproc_ep_t *ep = ctx;
  inproc_world_t *w = ep->w;
  /* Peers learn that this rank is gone; its own requests were all waited,
   * so after the close nothing refers to its request objects. */
  coll_origin_t o = {ep->rank, COLL_CAUSE_DESTROYED, 0};
  coll__inproc_close(ep, INPROC_DESTROYED, &o);
  coll__inproc_board_gone(w, ep->rank);
  coll__inproc_req_free_all(ep);
  if (atomic_fetch_sub(&w->live, 1) == 1) world_free(w, w->size);
}

coll_status_t coll_inproc_create(int world, coll_transport_t **out) {
  inproc_world_t *w = NULL;
  coll_status_t s;
  int i, made = 0;
  coll__err_clear();
  if (out == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "inproc_create: out is NULL");
  if (world < 1 || world > INPROC_MAX_WORLD)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "inproc_create: world %d is out of range 1..%d", world,
                     INPROC_MAX_WORLD);
  for (i = 0; i < world; i++) out[i] = NULL;
  COLL_CHECK_GOTO(world_new(world, &w), s, fail);
  for (made = 0; made < world; made++) {
    COLL_CHECK_GOTO(coll__t_create(&inproc_provider, &w->eps[made], made, world,
                                   &out[made]),
                    s, fail);
  }
  COLL_TRACE(COLL_LOG_NET, "inproc: created %d endpoints", world);
  return COLL_OK;

fail:
  if (w != NULL) {
    char msg[COLL_ERRMSG_MAX];
    coll__err_save(msg);
    /* Endpoints [0, made) belong to their transports; the others, `made`
     * included (a failed coll__t_create leaves ctx to us), are
     * still ours. */
    for (i = 0; i < made; i++) {
      coll_transport_destroy(out[i]);
      out[i] = NULL;
    }
    for (i = made; i < world; i++) coll__inproc_destroy(&w->eps[i]);
    coll__err_restore(msg);
  }
  return s;
}
