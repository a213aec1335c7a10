/* SPDX-License-Identifier: Apache-2.0 */
/* transport.c: validating a provider's vtable and calling its slots. */
#include "transport/transport.h"

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/trace.h"

#define OPS_HAS(ops, slot) \
  ((ops)->size >= offsetof(coll_transport_ops_t, slot) + sizeof((ops)->slot))

/* The one rule for ctx: it becomes the transport's only when this call
 * returns COLL_OK. On any failure no slot of the table is called, so the
 * caller frees ctx as it would have without calling us. (Calling destroy on
 * some failures would need the slot to be trusted, which a table that is
 * NULL or too small cannot be; one rule is easier to get right.) */
coll_status_t coll_transport_create(const coll_transport_ops_t *ops, void *ctx,
                                    int rank, int world,
                                    coll_transport_t **out) {
  coll_transport_t *t;
  coll_status_t s = COLL_ERR_INVALID_ARG;
  coll__err_clear();
  if (out != NULL) *out = NULL;
  if (ops == NULL) return coll__err(s, "transport_create: ops is NULL");
  if (!OPS_HAS(ops, destroy))
    return coll__err(
        s,
        "transport_create: ops->size %zu is too small for the "
        "mandatory slots (need %zu)",
        ops->size,
        offsetof(coll_transport_ops_t, destroy) + sizeof(ops->destroy));
  if (ops->version < 1 || ops->version > COLL_TRANSPORT_OPS_VERSION)
    return coll__err(s,
                     "transport_create: transport '%.32s' has ops->version "
                     "%u; this libcoll knows versions 1..%u (set it to "
                     "COLL_TRANSPORT_OPS_VERSION)",
                     ops->name ? ops->name : "?", ops->version,
                     (unsigned)COLL_TRANSPORT_OPS_VERSION);
  if (ops->isend == NULL || ops->irecv == NULL || ops->wait == NULL ||
      ops->abort == NULL || ops->destroy == NULL)
    return coll__err(s,
                     "transport_create: transport '%.32s' lacks mandatory "
                     "slot %s",
                     ops->name ? ops->name : "?",
                     ops->isend == NULL   ? "isend"
                     : ops->irecv == NULL ? "irecv"
                     : ops->wait == NULL  ? "wait"
                     : ops->abort == NULL ? "abort"
                                          : "destroy");
  if (out == NULL) return coll__err(s, "transport_create: out is NULL");
  if (world < 1 || rank < 0 || rank >= world)
    return coll__err(s, "transport_create: rank %d out of range for world %d",
                     rank, world);
  t = calloc(1, sizeof *t);
  if (t == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "transport_create: out of memory");
  memcpy(&t->ops, ops, ops->size < sizeof t->ops ? ops->size : sizeof t->ops);
  t->ops.size = sizeof t->ops;
  if (!OPS_HAS(ops, barrier)) t->ops.barrier = NULL;
  /* The name is copied: the provider's string may be freed after this. */
  snprintf(t->name, sizeof t->name, "%s", ops->name ? ops->name : "custom");
  t->ops.name = t->name;
  t->ctx = ctx;
  t->rank = rank;
  t->world = world;
  atomic_init(&t->aborted, 0);
  coll__pos_init(&t->pos_own);
  t->pos = &t->pos_own;
  t->timeout_ms = -1;
  atomic_init(&t->report_claimed, 0);
  atomic_init(&t->report_ready, 0);
  atomic_init(&t->routed, 0);
  *out = t;
  return COLL_OK;
}

void coll_transport_destroy(coll_transport_t *t) {
  if (t == NULL) return;
  coll_transport_destroy(t->host);
  t->ops.destroy(t->ctx);
  free(t->host_of);
  free(t);
}

coll_status_t coll__t_set_hosts(coll_transport_t *t, const int *host_of) {
  int *copy = NULL;
  if (host_of != NULL) {
    copy = malloc((size_t)t->world * sizeof *copy);
    if (copy == NULL)
      return coll__err(COLL_ERR_NO_MEMORY, "transport: out of memory");
    memcpy(copy, host_of, (size_t)t->world * sizeof *copy);
  }
  free(t->host_of);
  t->host_of = copy;
  return COLL_OK;
}

void (*coll__t_send_test_hook)(const coll_transport_t *t, int peer,
                               size_t len) = NULL;

void coll__t_set_segment_bytes(coll_transport_t *t, size_t bytes) {
  t->seg_bytes = bytes;
}

void coll__t_set_segment_bytes_crowded(coll_transport_t *t, size_t bytes) {
  t->seg_crowded = bytes;
}

size_t coll__t_segment_bytes(const coll_transport_t *t) {
  return t->seg_bytes > 0 ? t->seg_bytes : COLL_T_SEGMENT_DEFAULT;
}

void coll__t_set_segment_bytes_large(coll_transport_t *t, size_t bytes) {
  t->seg_large = bytes;
}

/* Whether this rank's host has more of the comm's ranks than `cores`. */
static int crowded(const coll_transport_t *t, unsigned cores) {
  unsigned local = 0;
  if (t->seg_crowded == 0 || t->host_of == NULL) return 0;
  for (int r = 0; r < t->world; r++)
    local += t->host_of[r] == t->host_of[t->rank];
  return local > cores;
}

size_t coll__t_segment_bytes_for(const coll_transport_t *t, unsigned cores) {
  return crowded(t, cores) ? t->seg_crowded : coll__t_segment_bytes(t);
}

size_t coll__t_segment_bytes_max_for(const coll_transport_t *t,
                                     unsigned cores) {
  size_t floor = coll__t_segment_bytes(t);
  if (crowded(t, cores)) return t->seg_crowded;
  return t->seg_large > floor ? t->seg_large : floor;
}

int coll__t_segment_varies(const coll_transport_t *t) {
  return t->seg_crowded != 0 && t->host_of != NULL &&
         t->seg_crowded != coll__t_segment_bytes(t);
}

int coll_transport_rank(const coll_transport_t *t) { return t ? t->rank : -1; }

int coll_transport_size(const coll_transport_t *t) { return t ? t->world : -1; }

/* Routing to the host endpoint. A routed request carries the host
 * endpoint's request with its low bit set: providers' requests are
 * pointers to their own objects, never odd. */
#define ROUTED ((uintptr_t)1)

static int routes(const coll_transport_t *t, int peer) {
  return t->host != NULL && t->host_of != NULL && peer != t->rank &&
         peer >= 0 && peer < t->world &&
         t->host_of[peer] == t->host_of[t->rank];
}

static int is_routed(coll_treq_t req) { return ((uintptr_t)req & ROUTED) != 0; }

static coll_treq_t unrouted(coll_treq_t req) {
  return (coll_treq_t)((uintptr_t)req & ~ROUTED);
}

/* Marks a request routed to the host endpoint, and notes each posted
 * request's peer for the flight recorder, which names the peer a failed
 * wait was on (a few stores, thread-local). */
static coll_status_t posted(coll_transport_t *t, coll_transport_t *via,
                            coll_status_t s, int peer, coll_treq_t *req) {
  if (s != COLL_OK) return s;
  if (via != t) {
    *req = (coll_treq_t)((uintptr_t)*req | ROUTED);
    atomic_fetch_add(&t->routed, 1);
  }
  coll__trace_note_req(*req, peer);
  return s;
}

coll_status_t coll__t_isend(coll_transport_t *t, int peer, uint32_t tag,
                            const void *buf, size_t len, coll_treq_t *req) {
  coll_transport_t *via = routes(t, peer) ? t->host : t;
  coll_status_t s = via->ops.isend(via->ctx, peer, tag, buf, len, req);
  s = posted(t, via, s, peer, req);
  if (s == COLL_OK && coll__t_send_test_hook != NULL)
    coll__t_send_test_hook(via, peer, len);
  return s;
}

coll_status_t coll__t_irecv(coll_transport_t *t, int peer, uint32_t tag,
                            void *buf, size_t cap, coll_treq_t *req) {
  coll_transport_t *via = routes(t, peer) ? t->host : t;
  coll_status_t s = via->ops.irecv(via->ctx, peer, tag, buf, cap, req);
  return posted(t, via, s, peer, req);
}

/* The spin, then the turns, of a wait on the comm's own endpoint while
 * routed requests are pending (wait_both). */
#define ROUTE_SPIN_NS 50000
#define ROUTE_TURN_MS 1

/* A wait on the comm's own endpoint while requests routed to its host
 * endpoint are pending. Shared memory moves only while a thread of its
 * rank works on it, so this wait moves them too: otherwise a rank of this
 * host waiting for a routed send could wait on this rank, while this rank
 * waits on a rank of another host that waits on it (a cycle no single
 * endpoint sees). Turns on the own endpoint, each followed by a pass over
 * the host endpoint: looks at first (yielding the core between them),
 * then ROUTE_TURN_MS sleeps, so a routed transfer is held up at most that
 * long once this endpoint sleeps. */
static coll_status_t wait_both(coll_transport_t *t, coll_treq_t req,
                               int64_t timeout_ms, size_t *len) {
  int64_t end = timeout_ms < 0 ? -1 : coll__now_ms() + timeout_ms;
  uint64_t spin_end = coll__now_ns() + ROUTE_SPIN_NS;
  for (;;) {
    int64_t turn = coll__now_ns() < spin_end ? 0 : ROUTE_TURN_MS, left = -1;
    coll_status_t s;
    t->host->kick(t->host->ctx);
    if (atomic_load(&t->routed) == 0)
      return t->ops.wait(t->ctx, req, coll__remaining_ms(end), len);
    if (end >= 0) {
      left = coll__remaining_ms(end);
      if (left < turn) turn = left;
    }
    s = t->ops.wait(t->ctx, req, turn, len);
    if (s != COLL_ERR_TIMEOUT || left == turn) return s;
    coll__err_clear();
    if (turn == 0) sched_yield();
  }
}

coll_status_t coll__t_wait_for(coll_transport_t *t, coll_treq_t req,
                               int64_t timeout_ms, size_t *len) {
  coll_status_t s;
  if (is_routed(req)) {
    /* The caller's thread waits in shared memory from here: what it left
     * pending on this endpoint must move meanwhile. */
    if (t->kick != NULL) t->kick(t->ctx);
    s = t->host->ops.wait(t->host->ctx, unrouted(req), timeout_ms, len);
    /* Requests never end with TIMEOUT: it means still pending. */
    if (s != COLL_ERR_TIMEOUT) atomic_fetch_sub(&t->routed, 1);
    return s;
  }
  if (t->host != NULL && t->host->kick != NULL && atomic_load(&t->routed) > 0)
    return wait_both(t, req, timeout_ms, len);
  return t->ops.wait(t->ctx, req, timeout_ms, len);
}

coll_status_t coll__t_wait(coll_transport_t *t, coll_treq_t req,
                           int64_t deadline_ms, size_t *len) {
  size_t dummy = 0;
  coll_status_t s = coll__t_wait_for(t, req, coll__remaining_ms(deadline_ms),
                                     len ? len : &dummy);
  if (s == COLL_ERR_TIMEOUT && coll_last_error()[0] == '\0')
    coll__err(s, "no progress before the comm's timeout");
  if (s != COLL_OK) coll__trace_note_failed(req);
  return s;
}

coll_status_t coll__t_wait_exact(coll_transport_t *t, coll_treq_t req,
                                 int64_t deadline_ms, size_t len) {
  size_t got = 0;
  coll_status_t s = coll__t_wait(t, req, deadline_ms, &got);
  if (s == COLL_OK && got != len)
    s = coll__err(COLL_ERR_LENGTH_MISMATCH,
                  "expected %zu bytes, a peer sent %zu: ranks disagree on "
                  "count or dtype",
                  len, got);
  return s;
}

/* A timed-out request is still pending: abort so it completes, then reap it. */
static coll_status_t wait_or_abort(coll_transport_t *t, coll_treq_t req,
                                   int64_t deadline_ms, size_t len, int exact) {
  coll_status_t s = exact ? coll__t_wait_exact(t, req, deadline_ms, len)
                          : coll__t_wait(t, req, deadline_ms, NULL);
  if (s == COLL_ERR_TIMEOUT) coll__t_abort_reap(t, req, s);
  return s;
}

coll_status_t coll__t_send(coll_transport_t *t, int peer, uint32_t tag,
                           const void *buf, size_t len, int64_t deadline_ms) {
  coll_treq_t r;
  COLL_CHECK(coll__t_isend(t, peer, tag, buf, len, &r));
  return wait_or_abort(t, r, deadline_ms, len, 0);
}

coll_status_t coll__t_recv(coll_transport_t *t, int peer, uint32_t tag,
                           void *buf, size_t len, int64_t deadline_ms) {
  coll_treq_t r;
  COLL_CHECK(coll__t_irecv(t, peer, tag, buf, len, &r));
  return wait_or_abort(t, r, deadline_ms, len, 1);
}

coll_status_t coll__t_barrier(coll_transport_t *t, uint32_t tag,
                              int64_t deadline_ms) {
  int n = t->world, k;
  char token = 0, in = 0;
  if (t->ops.barrier != NULL)
    return t->ops.barrier(t->ctx, coll__remaining_ms(deadline_ms));
  /* Dissemination barrier: ceil(log2 n) rounds, each a send to rank+2^k and
   * a receive from rank-2^k, posted together so no round can deadlock. */
  for (k = 1; k < n; k <<= 1) {
    coll_treq_t rs, rr;
    coll_status_t s;
    int to = (t->rank + k) % n, from = (t->rank - k + n) % n;
    COLL_CHECK(coll__t_irecv(t, from, tag, &in, 1, &rr));
    s = coll__t_isend(t, to, tag, &token, 1, &rs);
    if (s != COLL_OK) return coll__t_abort_reap(t, rr, s);
    s = wait_or_abort(t, rr, deadline_ms, 1, 1);
    if (s != COLL_OK) return coll__t_abort_reap(t, rs, s);
    COLL_CHECK(wait_or_abort(t, rs, deadline_ms, 0, 0));
  }
  return COLL_OK;
}

void coll__t_set_fail_hooks(coll_transport_t *t,
                            void (*fail)(void *ctx, const coll_origin_t *o),
                            int (*origin)(void *ctx, coll_origin_t *o)) {
  t->fail = fail;
  t->origin = origin;
}

void coll__t_set_shrink_hooks(coll_transport_t *t,
                              coll_status_t (*shrink)(void *ctx,
                                                      int64_t deadline_ms,
                                                      coll_transport_t **out),
                              void (*leave)(void *ctx)) {
  t->shrink = shrink;
  t->leave = leave;
}

void coll__t_leave(coll_transport_t *t) {
  if (t->leave != NULL) t->leave(t->ctx);
}

coll_status_t coll__t_shrink(coll_transport_t *t, int64_t deadline_ms,
                             coll_transport_t **out) {
  *out = NULL;
  if (t->shrink == NULL)
    return coll__err(COLL_ERR_NOT_AVAILABLE,
                     "the '%s' transport cannot shrink (the TCP transport "
                     "with COLL_ELASTIC=1 and the in-process one can)",
                     t->name);
  return t->shrink(t->ctx, deadline_ms, out);
}

void coll__t_set_shared(coll_transport_t *t, const coll_t_shared_t *sh) {
  t->shared = sh;
}

void coll__t_set_host(coll_transport_t *t, coll_transport_t *host) {
  t->host = host;
  if (host != NULL) host->parent = t;
}

void coll__t_set_kick(coll_transport_t *t, void (*kick)(void *ctx)) {
  t->kick = kick;
}

void coll__t_abort(coll_transport_t *t) { coll__t_fail(t, COLL_ERR_ABORTED); }

static void fail_at(coll_transport_t *t, const coll_origin_t *o) {
  atomic_store(&t->aborted, 1);
  if (t->fail != NULL)
    t->fail(t->ctx, o);
  else
    t->ops.abort(t->ctx);
}

/* The comm's main endpoint fails first, so the peers on other hosts learn
 * of it; its host endpoint then fails with the origin the main one holds
 * (a comm rank: the host endpoint speaks comm ranks), so this host's ranks
 * waiting in shared memory report the same failure as everyone else. */
static void fail_tree(coll_transport_t *t, const coll_origin_t *o) {
  coll_origin_t held;
  fail_at(t, o);
  if (t->host == NULL) return;
  if (!coll__t_origin(t, &held)) held = *o;
  fail_at(t->host, &held);
}

void coll__t_fail(coll_transport_t *t, coll_status_t s) {
  coll_origin_t o;
  if (t->parent != NULL) {
    /* A host endpoint's failure is the comm's: where it started is what
     * this endpoint heard from a peer of the host, else this rank with s
     * (the main endpoint asks the whole comm about a timeout). */
    if (coll__t_origin(t, &o))
      fail_tree(t->parent, &o);
    else
      coll__t_fail(t->parent, s);
    return;
  }
  /* A failure a routed request met started where its host endpoint
   * heard (a rank of this host lost), unless this endpoint heard first. */
  if (t->host != NULL && !coll__t_origin(t, &o) &&
      coll__t_origin(t->host, &o)) {
    fail_tree(t, &o);
    return;
  }
  o = coll__origin_local(t->rank, s);
  if (s == COLL_ERR_TIMEOUT) coll__t_desync(t);
  fail_tree(t, &o);
}

int coll__t_origin(coll_transport_t *t, coll_origin_t *o) {
  return t->origin != NULL && t->origin(t->ctx, o);
}

coll_status_t coll__t_abort_reap(coll_transport_t *t, coll_treq_t req,
                                 coll_status_t first) {
  char msg[COLL_ERRMSG_MAX];
  size_t len = 0;
  coll__err_save(msg);
  coll__t_fail(t, first != COLL_OK ? first : COLL_ERR_ABORTED);
  (void)coll__t_wait_for(t, req, -1, &len);
  coll__err_restore(msg);
  /* This rank's own timeout: the report says more than "no progress" (a
   * host endpoint's timeout was reported by the comm's endpoint). */
  if (t->parent != NULL) t = t->parent;
  if (first == COLL_ERR_TIMEOUT && atomic_load(&t->report_ready))
    coll__err(first, "%s", t->report);
  return first;
}
