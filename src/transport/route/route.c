/* SPDX-License-Identifier: Apache-2.0 */
/* route.c: the per-host composite as a provider over two endpoints: the
 * comm's own (every rank, e.g. TCP) and this host's (its ranks, e.g.
 * shared memory, speaking comm ranks). A message to a rank of this host
 * goes through the host endpoint; its request carries that endpoint's
 * request with the low pointer bit set (providers' requests are pointers
 * to their own objects, never odd). A failure of either endpoint is the
 * comm's: the comm's endpoint fails first, so the peers on other hosts
 * learn of it, then the host endpoint with the origin the comm's one
 * holds, so this host's ranks report the same failure as everyone else.
 * An endpoint that fails on its own (TCP's loop thread, a shared-memory
 * peer found dead) does not tell the other: every wait looks at the other
 * one between its turns and passes the failure on. */
#include "transport/route/route.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "transport/endpoint.h"

#define ROUTED ((uintptr_t)1)

/* The spin, then the turns, of a wait on the comm's own endpoint while
 * routed requests are pending (wait_both). */
#define ROUTE_SPIN_NS 50000
#define ROUTE_TURN_MS 1
/* The longest a wait in shared memory goes without looking whether the
 * comm's endpoint failed: a failure that started on another host (a rank
 * lost, aborted or unresponsive there) ends a wait on this host's ranks
 * within it. */
#define ROUTE_WATCH_MS 5

typedef struct route {
  coll_transport_t *main; /* every rank */
  coll_transport_t *host; /* this host's ranks */
  unsigned char *local;   /* local[r]: rank r is on this host, not this one */
  int world;
  /* The requests routed to the host endpoint and not yet reaped. While
   * any are, waits on the comm's own endpoint also kick the host one. */
  atomic_int routed;
} route_t;

static int is_routed(void *req) { return ((uintptr_t)req & ROUTED) != 0; }

static void *unrouted(void *req) { return (void *)((uintptr_t)req & ~ROUTED); }

static coll_transport_t *via(const route_t *r, int peer) {
  return peer >= 0 && peer < r->world && r->local[peer] ? r->host : r->main;
}

/* Marks a request the host endpoint took, and reports its carrier to the
 * send test hook (the composite reports for itself: transport.c). */
static coll_status_t posted(route_t *r, coll_transport_t *v, coll_status_t s,
                            void **req) {
  if (s == COLL_OK && v == r->host) {
    *req = (void *)((uintptr_t)*req | ROUTED);
    atomic_fetch_add(&r->routed, 1);
  }
  return s;
}

static coll_status_t route_isend(void *ctx, int peer, uint32_t tag,
                                 const void *buf, size_t len, void **req) {
  route_t *r = ctx;
  coll_transport_t *v = via(r, peer);
  coll_status_t s =
      posted(r, v, v->p.isend(v->ctx, peer, tag, buf, len, req), req);
  if (s == COLL_OK && coll__t_send_test_hook != NULL)
    coll__t_send_test_hook(v, peer, len);
  return s;
}

static coll_status_t route_irecv(void *ctx, int peer, uint32_t tag, void *buf,
                                 size_t cap, void **req) {
  route_t *r = ctx;
  coll_transport_t *v = via(r, peer);
  return posted(r, v, v->p.irecv(v->ctx, peer, tag, buf, cap, req), req);
}

static void kick(coll_transport_t *t) {
  if (t->p.kick != NULL) t->p.kick(t->ctx);
}

/* 1 and *o when endpoint t knows of a failure of the comm: not a peer
 * that only left (destroyed its comm), which ends only the work that
 * involves it. */
static int failed(coll_transport_t *t, coll_origin_t *o) {
  return coll__t_origin(t, o) && o->cause != COLL_CAUSE_DESTROYED;
}

/* A failure one endpoint found on its own (its loop thread, its progress)
 * is the other's too: neither endpoint tells the other, so every wait
 * looks. */
static void spread(coll_transport_t *from, coll_transport_t *to) {
  coll_origin_t o;
  if (!coll__t_aborted(to) && failed(from, &o)) coll__t_fail_at(to, &o);
}

/* A wait on the comm's own endpoint while requests routed to the host
 * endpoint are pending. Shared memory moves only while a thread of its
 * rank works on it, so this wait moves them too: otherwise a rank of this
 * host waiting for a routed send could wait on this rank, while this rank
 * waits on a rank of another host that waits on it (a cycle no single
 * endpoint sees). Turns on the own endpoint, each followed by a pass over
 * the host endpoint: looks at first (yielding the core between them),
 * then ROUTE_TURN_MS sleeps, so a routed transfer is held up at most that
 * long once this endpoint sleeps. */
static coll_status_t wait_both(route_t *r, void *req, int64_t timeout_ms,
                               size_t *len) {
  coll_transport_t *m = r->main;
  int64_t end = timeout_ms < 0 ? -1 : coll__now_ms() + timeout_ms;
  uint64_t spin_end = coll__now_ns() + ROUTE_SPIN_NS;
  for (;;) {
    int64_t turn = coll__now_ns() < spin_end ? 0 : ROUTE_TURN_MS, left = -1;
    coll_status_t s;
    kick(r->host);
    spread(r->host, m);
    if (atomic_load(&r->routed) == 0)
      return m->p.wait(m->ctx, req, coll__remaining_ms(end), len);
    if (end >= 0) {
      left = coll__remaining_ms(end);
      if (left < turn) turn = left;
    }
    s = m->p.wait(m->ctx, req, turn, len);
    if (s != COLL_ERR_TIMEOUT || left == turn) return s;
    coll__err_clear();
    if (turn == 0) sched_yield();
  }
}

/* A wait on the host endpoint, in turns of at most ROUTE_WATCH_MS: between
 * them it looks whether the comm's endpoint failed (a rank on another host
 * died while this one waits on a late rank of its own host), and ends the
 * host endpoint with that failure, so the wait ends with it. */
static coll_status_t wait_routed(route_t *r, void *req, int64_t timeout_ms,
                                 size_t *len) {
  coll_transport_t *h = r->host;
  int64_t end = timeout_ms < 0 ? -1 : coll__now_ms() + timeout_ms;
  for (;;) {
    int64_t left = end < 0 ? -1 : coll__remaining_ms(end);
    int64_t turn = left >= 0 && left < ROUTE_WATCH_MS ? left : ROUTE_WATCH_MS;
    coll_status_t s = h->p.wait(h->ctx, req, turn, len);
    if (s != COLL_ERR_TIMEOUT || turn == left) return s;
    coll__err_clear();
    spread(r->main, h);
  }
}

static coll_status_t route_wait(void *ctx, void *req, int64_t timeout_ms,
                                size_t *len) {
  route_t *r = ctx;
  coll_status_t s;
  if (is_routed(req)) {
    /* The caller's thread waits in shared memory from here: what it left
     * pending on the comm's endpoint must move meanwhile. */
    kick(r->main);
    s = wait_routed(r, unrouted(req), timeout_ms, len);
    /* Requests never end with TIMEOUT: it means still pending. */
    if (s != COLL_ERR_TIMEOUT) atomic_fetch_sub(&r->routed, 1);
    return s;
  }
  if (r->host->p.kick != NULL && atomic_load(&r->routed) > 0)
    return wait_both(r, req, timeout_ms, len);
  return r->main->p.wait(r->main->ctx, req, timeout_ms, len);
}

static int route_origin(void *ctx, coll_origin_t *o) {
  route_t *r = ctx;
  /* A failure a routed request met started where the host endpoint heard
   * (a rank of this host lost), unless the comm's endpoint heard first. */
  return coll__t_origin(r->main, o) || coll__t_origin(r->host, o);
}

static void route_fail(void *ctx, const coll_origin_t *o) {
  route_t *r = ctx;
  coll_origin_t use = *o, held;
  if (route_origin(r, &held)) use = held;
  coll__t_fail_at(r->main, &use);
  if (coll__t_origin(r->main, &held)) use = held;
  coll__t_fail_at(r->host, &use);
}

static void route_abort(void *ctx) {
  route_t *r = ctx;
  coll_origin_t o = {r->main->rank, COLL_CAUSE_ABORTED, 0};
  route_fail(r, &o);
}

static void route_destroy(void *ctx) {
  route_t *r = ctx;
  coll_transport_destroy(r->host);
  coll_transport_destroy(r->main);
  free(r->local);
  free(r);
}

/* The desync report, shrink and leave are the comm's endpoint's: the
 * host endpoint speaks for a part of the comm only. */
static void route_ask(void *ctx, int64_t budget_ms, coll_pos_snap_t *out,
                      unsigned char *answered) {
  coll_transport_t *m = ((route_t *)ctx)->main;
  m->p.ask(m->ctx, budget_ms, out, answered);
}

static void route_tell(void *ctx, const char *report) {
  coll_transport_t *m = ((route_t *)ctx)->main;
  m->p.tell(m->ctx, report);
}

static int route_heard(void *ctx, char *buf, size_t n) {
  coll_transport_t *m = ((route_t *)ctx)->main;
  return m->p.heard(m->ctx, buf, n);
}

static coll_pos_t *route_position(void *ctx) {
  return coll__t_position(((route_t *)ctx)->main);
}

static coll_status_t route_shrink(void *ctx, int64_t deadline_ms,
                                  coll_transport_t **out) {
  return coll__t_shrink(((route_t *)ctx)->main, deadline_ms, out);
}

static void route_leave(void *ctx) {
  route_t *r = ctx;
  coll__t_leave(r->main);
  coll__t_leave(r->host);
}

static int route_probe(void *ctx, int peer, uint32_t tag) {
  route_t *r = ctx;
  coll_transport_t *v = via(r, peer);
  return v->p.probe != NULL && v->p.probe(v->ctx, peer, tag);
}

static void route_kick(void *ctx) {
  route_t *r = ctx;
  kick(r->main);
  kick(r->host);
}

/* The table of a route over m and h: the optional slots m lacks stay
 * NULL, the hints are m's, with h's segment between this host's ranks. */
static coll_provider_t route_table(const coll_transport_t *m,
                                   const coll_transport_t *h, char *name,
                                   size_t cap) {
  coll_provider_t p = {.size = sizeof p,
                       .version = COLL_PROVIDER_VERSION,
                       .name = name,
                       .isend = route_isend,
                       .irecv = route_irecv,
                       .wait = route_wait,
                       .abort = route_abort,
                       .destroy = route_destroy,
                       .fail = route_fail,
                       .origin = route_origin,
                       .position = route_position,
                       .leave = route_leave,
                       .kick = route_kick,
                       .hints = m->p.hints};
  /* "tcp+shm": cut to what an endpoint keeps of a name. */
  snprintf(name, cap, "%.15s+%.15s", m->name, h->name);
  if (m->p.ask != NULL && m->p.tell != NULL && m->p.heard != NULL) {
    p.ask = route_ask;
    p.tell = route_tell;
    p.heard = route_heard;
  }
  if (m->p.shrink != NULL) p.shrink = route_shrink;
  if (m->p.probe != NULL && h->p.probe != NULL) p.probe = route_probe;
  p.hints.seg_local = coll__t_segment_bytes(h);
  return p;
}

static int *copy_hosts(const int *host_of, int world) {
  int *c = malloc((size_t)world * sizeof *c);
  if (c != NULL) memcpy(c, host_of, (size_t)world * sizeof *c);
  return c;
}

coll_status_t coll__route_create(coll_transport_t **t, coll_transport_t *host,
                                 const int *host_of) {
  coll_transport_t *m = *t, *out = NULL;
  char name[COLL_TRANSPORT_NAME_MAX];
  route_t *r = NULL;
  coll_provider_t p;
  coll_status_t s = COLL_ERR_NO_MEMORY;
  int *hosts = copy_hosts(host_of, m->world);
  if (hosts == NULL) goto fail;
  if (host == NULL) {
    /* Nothing to route: the endpoint only learns the hosts. */
    free(m->host_of);
    m->host_of = hosts;
    return COLL_OK;
  }
  r = calloc(1, sizeof *r);
  if (r == NULL || (r->local = calloc((size_t)m->world, 1)) == NULL) goto fail;
  r->main = m;
  r->host = host;
  r->world = m->world;
  atomic_init(&r->routed, 0);
  for (int q = 0; q < m->world; q++)
    r->local[q] = q != m->rank && host_of[q] == host_of[m->rank];
  p = route_table(m, host, name, sizeof name);
  s = coll__t_create(&p, r, m->rank, m->world, &out);
  if (s != COLL_OK) goto fail;
  out->host_of = hosts;
  out->composite = 1;
  *t = out;
  return COLL_OK;
fail:
  if (s == COLL_ERR_NO_MEMORY)
    coll__err(s, "transport: out of memory for the host routes");
  if (r != NULL) free(r->local);
  free(r);
  free(hosts);
  coll_transport_destroy(host);
  return s;
}

static route_t *route_of(const coll_transport_t *t) {
  return t->p.destroy == route_destroy ? t->ctx : NULL;
}

coll_transport_t *coll__route_host(const coll_transport_t *t) {
  route_t *r = route_of(t);
  return r != NULL ? r->host : NULL;
}

int coll__route_pending(const coll_transport_t *t) {
  route_t *r = route_of(t);
  return r != NULL ? atomic_load(&r->routed) : 0;
}
