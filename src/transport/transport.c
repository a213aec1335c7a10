/* SPDX-License-Identifier: Apache-2.0 */
/* transport.c: making an endpoint of a provider table (ours, or a third
 * party's adapted into one by transport_ops.c) and calling its slots. */
#include "transport/transport.h"

#include "transport/endpoint.h"

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/trace.h"

coll_status_t coll__t_create(const coll_provider_t *p, void *ctx, int rank,
                             int world, coll_transport_t **out) {
  coll_transport_t *t;
  *out = NULL;
  if (p->size != sizeof *p || p->version != COLL_PROVIDER_VERSION ||
      p->isend == NULL || p->irecv == NULL || p->wait == NULL ||
      p->abort == NULL || p->destroy == NULL)
    return coll__err(COLL_ERR_INTERNAL,
                     "transport: provider '%.32s' has a table of size %zu, "
                     "version %u or without a mandatory slot",
                     p->name ? p->name : "?", p->size, p->version);
  if (world < 1 || rank < 0 || rank >= world)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "transport_create: rank %d out of range for world %d",
                     rank, world);
  t = calloc(1, sizeof *t);
  if (t == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "transport_create: out of memory");
  t->p = *p;
  /* The name is copied: the provider's string may be freed after this. */
  snprintf(t->name, sizeof t->name, "%s", p->name ? p->name : "custom");
  t->p.name = t->name;
  t->ctx = ctx;
  t->rank = rank;
  t->world = world;
  atomic_init(&t->aborted, 0);
  coll__pos_init(&t->pos_own);
  t->pos = p->position != NULL ? p->position(ctx) : NULL;
  if (t->pos == NULL) t->pos = &t->pos_own;
  t->rounds = p->rounds != NULL ? p->rounds(ctx) : NULL;
  t->timeout_ms = -1;
  coll__report_cell_init(&t->report);
  *out = t;
  return COLL_OK;
}

void coll_transport_destroy(coll_transport_t *t) {
  if (t == NULL) return;
  t->p.destroy(t->ctx);
  free(t->host_of);
  free(t);
}

void (*coll__t_send_test_hook)(const coll_transport_t *t, int peer,
                               size_t len) = NULL;

size_t coll__t_segment_bytes(const coll_transport_t *t) {
  return t->p.hints.seg_bytes > 0 ? t->p.hints.seg_bytes
                                  : COLL_T_SEGMENT_DEFAULT;
}

/* Whether this rank's host has more of the comm's ranks than `cores`. */
static int crowded(const coll_transport_t *t, unsigned cores) {
  unsigned local = 0;
  if (t->p.hints.seg_crowded == 0 || t->host_of == NULL) return 0;
  for (int r = 0; r < t->world; r++)
    local += t->host_of[r] == t->host_of[t->rank];
  return local > cores;
}

size_t coll__t_segment_bytes_for(const coll_transport_t *t, unsigned cores) {
  return crowded(t, cores) ? t->p.hints.seg_crowded : coll__t_segment_bytes(t);
}

size_t coll__t_segment_bytes_max_for(const coll_transport_t *t,
                                     unsigned cores) {
  size_t floor = coll__t_segment_bytes(t);
  if (crowded(t, cores)) return t->p.hints.seg_crowded;
  return t->p.hints.seg_large > floor ? t->p.hints.seg_large : floor;
}

int coll__t_segment_varies(const coll_transport_t *t) {
  return t->p.hints.seg_crowded != 0 && t->host_of != NULL &&
         t->p.hints.seg_crowded != coll__t_segment_bytes(t);
}

int coll_transport_rank(const coll_transport_t *t) { return t ? t->rank : -1; }

int coll_transport_size(const coll_transport_t *t) { return t ? t->world : -1; }

coll_rounds_t *coll__t_rounds(const coll_transport_t *t) { return t->rounds; }

const coll_t_hints_t *coll__t_hints(const coll_transport_t *t) {
  return &t->p.hints;
}

size_t coll__t_copy_from(const coll_transport_t *t) {
  return t->p.peer_read != NULL ? t->p.hints.copy_from : 0;
}

coll_status_t coll__t_peer_read(coll_transport_t *t, int peer, void *dst,
                                const void *from, size_t len) {
  if (t->p.peer_read == NULL)
    return coll__err(COLL_ERR_INTERNAL,
                     "transport %s: no single copy from rank %d's memory",
                     t->name, peer);
  return t->p.peer_read(t->ctx, peer, dst, from, len);
}

const char *coll__t_name(const coll_transport_t *t) { return t->name; }

int coll__t_aborted(const coll_transport_t *t) {
  return atomic_load(&((coll_transport_t *)t)->aborted);
}

const int *coll__t_hosts(const coll_transport_t *t) { return t->host_of; }

/* Notes each posted request's peer for the flight recorder, which names
 * the peer a failed wait was on (a few stores, thread-local). */
coll_status_t coll__t_isend(coll_transport_t *t, int peer, uint32_t tag,
                            const void *buf, size_t len, coll_treq_t *req) {
  coll_status_t s = t->p.isend(t->ctx, peer, tag, buf, len, req);
  if (s != COLL_OK) return s;
  coll__trace_note_req(*req, peer);
  if (coll__t_send_test_hook != NULL && !t->composite)
    coll__t_send_test_hook(t, peer, len);
  return s;
}

coll_status_t coll__t_irecv(coll_transport_t *t, int peer, uint32_t tag,
                            void *buf, size_t cap, coll_treq_t *req) {
  coll_status_t s = t->p.irecv(t->ctx, peer, tag, buf, cap, req);
  if (s == COLL_OK) coll__trace_note_req(*req, peer);
  return s;
}

coll_status_t coll__t_wait_for(coll_transport_t *t, coll_treq_t req,
                               int64_t timeout_ms, size_t *len) {
  return t->p.wait(t->ctx, req, timeout_ms, len);
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
  if (t->p.barrier != NULL)
    return t->p.barrier(t->ctx, coll__remaining_ms(deadline_ms));
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

void coll__t_leave(coll_transport_t *t) {
  if (t->p.leave != NULL) t->p.leave(t->ctx);
}

coll_status_t coll__t_shrink(coll_transport_t *t, int64_t deadline_ms,
                             coll_transport_t **out) {
  *out = NULL;
  if (t->p.shrink == NULL)
    return coll__err(COLL_ERR_NOT_AVAILABLE,
                     "the '%s' transport cannot shrink (the TCP transport "
                     "with COLL_ELASTIC=1 and the in-process one can)",
                     t->name);
  return t->p.shrink(t->ctx, deadline_ms, out);
}

int coll__t_can_probe(const coll_transport_t *t) { return t->p.probe != NULL; }

int coll__t_probe(coll_transport_t *t, int peer, uint32_t tag) {
  return t->p.probe != NULL && t->p.probe(t->ctx, peer, tag);
}

void coll__t_abort(coll_transport_t *t) { coll__t_fail(t, COLL_ERR_ABORTED); }

void coll__t_fail_at(coll_transport_t *t, const coll_origin_t *o) {
  atomic_store(&t->aborted, 1);
  if (t->p.fail != NULL)
    t->p.fail(t->ctx, o);
  else
    t->p.abort(t->ctx);
}

void coll__t_fail(coll_transport_t *t, coll_status_t s) {
  coll_origin_t o = coll__origin_local(t->rank, s);
  if (s == COLL_ERR_TIMEOUT) coll__t_desync(t);
  coll__t_fail_at(t, &o);
}

int coll__t_origin(coll_transport_t *t, coll_origin_t *o) {
  return t->p.origin != NULL && t->p.origin(t->ctx, o);
}

coll_status_t coll__t_abort_reap(coll_transport_t *t, coll_treq_t req,
                                 coll_status_t first) {
  char msg[COLL_ERRMSG_MAX];
  size_t len = 0;
  coll__err_save(msg);
  coll__t_fail(t, first != COLL_OK ? first : COLL_ERR_ABORTED);
  (void)coll__t_wait_for(t, req, -1, &len);
  coll__err_restore(msg);
  /* This rank's own timeout: the report says more than "no progress". */
  if (first == COLL_ERR_TIMEOUT &&
      coll__report_cell_get(&t->report, msg, sizeof msg))
    coll__err(first, "%s", msg);
  return first;
}
