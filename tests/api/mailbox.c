/* SPDX-License-Identifier: Apache-2.0 */
/* mailbox.c: a transport written against nothing but the public
 * coll_transport_ops_t contract, for the tests: a mutex+condvar mailbox in
 * which every send is copied into the receiver's queue (or straight into a
 * receive that is already posted). */
#include "mailbox.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct mb_msg {
  struct mb_msg *next;
  int src;
  uint32_t tag;
  size_t len;
  unsigned char data[];
} mb_msg_t;

typedef struct mb_req {
  struct mb_req *next; /* in the endpoint's posted-receive list */
  int is_recv, done;
  int peer;
  uint32_t tag;
  void *buf;
  size_t cap, len;
  coll_status_t status;
} mb_req_t;

typedef struct mb_ep {
  int rank, aborted, live;
  mb_msg_t *unexpected, *unexpected_tail; /* arrival order */
  mb_req_t *posted, *posted_tail;         /* posting order */
} mb_ep_t;

/* One world, shared by its endpoints; freed by the last destroy. All state
 * is guarded by mu; cv is broadcast on every change. */
typedef struct mb_world {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int world, live;
  int bar_count, bar_gen;
  int barrier_calls;
  mb_ep_t ep[MB_MAX_WORLD];
} mb_world_t;

typedef struct mb_ctx {
  mb_world_t *w;
  int rank;
} mb_ctx_t;

/* Delivers a message into a posted receive (caller holds mu). */
static void mb_deliver(mb_req_t *r, const void *data, size_t len) {
  r->len = len;
  if (len > r->cap) {
    r->status = COLL_ERR_LENGTH_MISMATCH; /* never written past cap */
  } else {
    if (len) memcpy(r->buf, data, len);
    r->status = COLL_OK;
  }
  r->done = 1;
}

static coll_status_t mb_isend(void *ctx, int peer, uint32_t tag,
                              const void *buf, size_t len, void **req) {
  mb_ctx_t *x = ctx;
  mb_world_t *w = x->w;
  mb_req_t *r = calloc(1, sizeof *r);
  mb_ep_t *dst;
  mb_req_t **pp, *prev = NULL;
  if (r == NULL) return coll_set_last_error(COLL_ERR_NO_MEMORY, "mailbox: oom");
  if (peer < 0 || peer >= w->world) {
    free(r);
    return coll_set_last_error(COLL_ERR_INVALID_ARG, "mailbox: bad peer %d",
                               peer);
  }
  pthread_mutex_lock(&w->mu);
  if (w->ep[x->rank].aborted) {
    pthread_mutex_unlock(&w->mu);
    free(r);
    return coll_set_last_error(COLL_ERR_ABORTED, "mailbox: rank %d aborted",
                               x->rank);
  }
  dst = &w->ep[peer];
  /* The first posted receive for (source, tag) takes it; else it queues. */
  for (pp = &dst->posted; *pp != NULL; prev = *pp, pp = &(*pp)->next)
    if ((*pp)->peer == x->rank && (*pp)->tag == tag) break;
  if (dst->aborted || !dst->live) {
    /* Dropped: that endpoint will never read again. */
  } else if (*pp != NULL) {
    mb_req_t *rr = *pp;
    *pp = rr->next;
    if (dst->posted_tail == rr) dst->posted_tail = prev;
    mb_deliver(rr, buf, len);
  } else {
    mb_msg_t *m = malloc(sizeof *m + len);
    if (m == NULL) {
      pthread_mutex_unlock(&w->mu);
      free(r);
      return coll_set_last_error(COLL_ERR_NO_MEMORY, "mailbox: oom");
    }
    m->next = NULL;
    m->src = x->rank;
    m->tag = tag;
    m->len = len;
    if (len) memcpy(m->data, buf, len);
    if (dst->unexpected_tail)
      dst->unexpected_tail->next = m;
    else
      dst->unexpected = m;
    dst->unexpected_tail = m;
  }
  r->done = 1; /* the copy is taken: the send is complete */
  r->status = COLL_OK;
  r->len = len;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  *req = r;
  return COLL_OK;
}

static coll_status_t mb_irecv(void *ctx, int peer, uint32_t tag, void *buf,
                              size_t cap, void **req) {
  mb_ctx_t *x = ctx;
  mb_world_t *w = x->w;
  mb_ep_t *me = &w->ep[x->rank];
  mb_req_t *r = calloc(1, sizeof *r);
  mb_msg_t **pp, *prev = NULL;
  if (r == NULL) return coll_set_last_error(COLL_ERR_NO_MEMORY, "mailbox: oom");
  r->is_recv = 1;
  r->peer = peer;
  r->tag = tag;
  r->buf = buf;
  r->cap = cap;
  pthread_mutex_lock(&w->mu);
  if (me->aborted) {
    pthread_mutex_unlock(&w->mu);
    free(r);
    return coll_set_last_error(COLL_ERR_ABORTED, "mailbox: rank %d aborted",
                               x->rank);
  }
  for (pp = &me->unexpected; *pp != NULL; prev = *pp, pp = &(*pp)->next)
    if ((*pp)->src == peer && (*pp)->tag == tag) break;
  if (*pp != NULL) {
    mb_msg_t *m = *pp;
    *pp = m->next;
    if (me->unexpected_tail == m) me->unexpected_tail = prev;
    mb_deliver(r, m->data, m->len);
    free(m);
  } else {
    if (me->posted_tail)
      me->posted_tail->next = r;
    else
      me->posted = r;
    me->posted_tail = r;
  }
  pthread_mutex_unlock(&w->mu);
  *req = r;
  return COLL_OK;
}

static void deadline_ts(struct timespec *ts, int64_t ms) {
  clock_gettime(CLOCK_MONOTONIC, ts);
  ts->tv_sec += ms / 1000;
  ts->tv_nsec += (ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
}

static coll_status_t mb_wait(void *ctx, void *req, int64_t timeout_ms,
                             size_t *len) {
  mb_ctx_t *x = ctx;
  mb_world_t *w = x->w;
  mb_req_t *r = req;
  struct timespec dl;
  coll_status_t s;
  if (timeout_ms >= 0) deadline_ts(&dl, timeout_ms);
  pthread_mutex_lock(&w->mu);
  while (!r->done) {
    if (timeout_ms < 0) {
      pthread_cond_wait(&w->cv, &w->mu);
    } else if (pthread_cond_timedwait(&w->cv, &w->mu, &dl) == ETIMEDOUT &&
               !r->done) {
      pthread_mutex_unlock(&w->mu);
      return coll_set_last_error(COLL_ERR_TIMEOUT,
                                 "mailbox: rank %d waited %lld ms for rank %d",
                                 x->rank, (long long)timeout_ms, r->peer);
    }
  }
  pthread_mutex_unlock(&w->mu);
  s = r->status;
  *len = r->len;
  if (s == COLL_ERR_ABORTED)
    coll_set_last_error(s, "mailbox: rank %d aborted", x->rank);
  else if (s == COLL_ERR_LENGTH_MISMATCH)
    coll_set_last_error(s, "mailbox: %zu bytes for a %zu-byte buffer", r->len,
                        r->cap);
  free(r);
  return s;
}

static void mb_abort(void *ctx) {
  mb_ctx_t *x = ctx;
  mb_world_t *w = x->w;
  mb_ep_t *me = &w->ep[x->rank];
  mb_req_t *r;
  pthread_mutex_lock(&w->mu);
  me->aborted = 1;
  /* Fail every posted receive: their buffers are never touched again. */
  for (r = me->posted; r != NULL; r = r->next) {
    r->status = COLL_ERR_ABORTED;
    r->done = 1;
  }
  me->posted = me->posted_tail = NULL;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static void mb_free_msgs(mb_ep_t *e) {
  while (e->unexpected != NULL) {
    mb_msg_t *m = e->unexpected;
    e->unexpected = m->next;
    free(m);
  }
  e->unexpected_tail = NULL;
}

static void mb_destroy(void *ctx) {
  mb_ctx_t *x = ctx;
  mb_world_t *w = x->w;
  int last;
  pthread_mutex_lock(&w->mu);
  w->ep[x->rank].live = 0;
  w->ep[x->rank].aborted = 1;
  mb_free_msgs(&w->ep[x->rank]);
  last = --w->live == 0;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  free(x);
  if (last) {
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
  }
}

/* A counting barrier over the whole world (generation-numbered). */
static coll_status_t mb_barrier(void *ctx, int64_t timeout_ms) {
  mb_ctx_t *x = ctx;
  mb_world_t *w = x->w;
  struct timespec dl;
  int gen;
  if (timeout_ms >= 0) deadline_ts(&dl, timeout_ms);
  pthread_mutex_lock(&w->mu);
  w->barrier_calls++;
  gen = w->bar_gen;
  if (++w->bar_count == w->world) {
    w->bar_count = 0;
    w->bar_gen++;
    pthread_cond_broadcast(&w->cv);
  }
  while (w->bar_gen == gen) {
    if (w->ep[x->rank].aborted) {
      pthread_mutex_unlock(&w->mu);
      return coll_set_last_error(COLL_ERR_ABORTED, "mailbox barrier: aborted");
    }
    if (timeout_ms < 0) {
      pthread_cond_wait(&w->cv, &w->mu);
    } else if (pthread_cond_timedwait(&w->cv, &w->mu, &dl) == ETIMEDOUT &&
               w->bar_gen == gen) {
      pthread_mutex_unlock(&w->mu);
      return coll_set_last_error(COLL_ERR_TIMEOUT, "mailbox barrier: timeout");
    }
  }
  pthread_mutex_unlock(&w->mu);
  return COLL_OK;
}

/* Called in place of a slot that lies past the table's size. */
static int g_poison_calls;

int mb_poison_calls(void) {
  return __atomic_load_n(&g_poison_calls, __ATOMIC_RELAXED);
}
void mb_poison_reset(void) {
  __atomic_store_n(&g_poison_calls, 0, __ATOMIC_RELAXED);
}
static coll_status_t poison_barrier(void *ctx, int64_t timeout_ms) {
  (void)ctx, (void)timeout_ms;
  __atomic_add_fetch(&g_poison_calls, 1, __ATOMIC_RELAXED);
  return COLL_ERR_INTERNAL;
}

/* Version 2 slots: a version 1 table's are never read. */
static void poison_fail(void *ctx, const coll_fail_origin_t *o) {
  (void)ctx, (void)o;
  __atomic_add_fetch(&g_poison_calls, 1, __ATOMIC_RELAXED);
}
static int poison_origin(void *ctx, coll_fail_origin_t *o) {
  (void)ctx, (void)o;
  __atomic_add_fetch(&g_poison_calls, 1, __ATOMIC_RELAXED);
  return 0;
}
static void poison_bind(void *ctx, coll_transport_t *t) {
  (void)ctx, (void)t;
  __atomic_add_fetch(&g_poison_calls, 1, __ATOMIC_RELAXED);
}
static void poison_leave(void *ctx) {
  (void)ctx;
  __atomic_add_fetch(&g_poison_calls, 1, __ATOMIC_RELAXED);
}

const char *mb_variant_name(mb_variant_t v) {
  static const char *const names[] = {
      "full table, no barrier", "older table (no barrier slot in size)",
      "full table with barrier", "version 1 table with version 2 slots set"};
  return (unsigned)v < 4 ? names[v] : "?";
}

static mb_world_t *mb_world_new(int world) {
  mb_world_t *w = calloc(1, sizeof *w);
  pthread_condattr_t ca;
  int i;
  if (w == NULL) return NULL;
  pthread_mutex_init(&w->mu, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&w->cv, &ca);
  pthread_condattr_destroy(&ca);
  w->world = w->live = world;
  for (i = 0; i < world; i++) {
    w->ep[i].rank = i;
    w->ep[i].live = 1;
  }
  return w;
}

int mb_comms(int world, mb_variant_t v, int64_t timeout_ms,
             coll_comm_t **comms) {
  coll_transport_ops_t ops;
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  mb_world_t *w;
  int i;
  if (world < 1 || world > MB_MAX_WORLD) return -1;
  w = mb_world_new(world);
  if (w == NULL) return -1;
  memset(&ops, 0, sizeof ops);
  ops.size = sizeof ops;
  ops.version = COLL_TRANSPORT_OPS_VERSION;
  ops.name = "mailbox";
  ops.isend = mb_isend;
  ops.irecv = mb_irecv;
  ops.wait = mb_wait;
  ops.abort = mb_abort;
  ops.destroy = mb_destroy;
  if (v == MB_OLD_SIZE) {
    /* A version 1 table as a provider compiled it before the barrier slot
     * came. */
    ops.version = 1;
    ops.size = offsetof(coll_transport_ops_t, barrier);
    ops.barrier = poison_barrier; /* past size: must never be called */
  } else if (v == MB_WITH_BARRIER) {
    ops.barrier = mb_barrier;
  } else if (v == MB_V1_POISONED) {
    ops.version = 1;
    ops.fail = poison_fail;
    ops.origin = poison_origin;
    ops.bind = poison_bind;
    ops.leave = poison_leave;
  }
  cfg.timeout_ms = timeout_ms;
  cfg.name = "mailbox";
  for (i = 0; i < world; i++) {
    coll_transport_t *t = NULL;
    mb_ctx_t *x = malloc(sizeof *x);
    if (x == NULL) return -1;
    x->w = w;
    x->rank = i;
    if (coll_transport_create(&ops, x, i, world, &t) != COLL_OK) {
      fprintf(stderr, "coll_transport_create: %s\n", coll_last_error());
      return -1;
    }
    if (coll_comm_create(t, &cfg, &comms[i]) != COLL_OK) {
      fprintf(stderr, "coll_comm_create: %s\n", coll_last_error());
      return -1;
    }
  }
  return 0;
}
