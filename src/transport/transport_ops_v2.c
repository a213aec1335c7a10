/* SPDX-License-Identifier: Apache-2.0 */
/* transport_ops_v2.c: a third party's version 2 table as a provider. Its
 * slots speak coll_transport.h's types (coll_fail_origin_t, the bytes of
 * a "where"), so each endpoint gets a small wrapper (tops_ep_t) as its
 * provider ctx that converts, and judges what the third party hands back
 * (origins, answers, reports carried from peers) as bytes off a wire.
 * Shrink runs the survivors' agreement of libcoll's own transports over
 * the table's links, then asks the table for the survivors' endpoint. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/le.h"
#include "core/work.h"
#include "transport/common/shrink_agree.h"
#include "transport/endpoint.h"
#include "transport/transport_ops.h"

/* The revision of the answer's layout, in its byte 36: zeros, or another
 * layout, are no answer. */
#define WHERE_FORMAT 1

typedef struct tops_ep {
  coll_transport_ops_t ops; /* copied: the version 2 slots, no further */
  char name[COLL_TRANSPORT_NAME_MAX]; /* ops.name points here */
  void *ctx;                          /* the third party's */
  int rank, world;
  atomic_int left;   /* leave ran: its owner aborted */
  atomic_int shrunk; /* shrink ran once */
} tops_ep_t;

/* ---- the "where are you?" codec ----------------------------------------- */

void coll__tops_where_encode(const coll_pos_snap_t *p,
                             unsigned char out[COLL_TRANSPORT_WHERE_BYTES]) {
  int p2p = p->p2p != COLL_POS_P2P_NONE;
  memset(out, 0, COLL_TRANSPORT_WHERE_BYTES);
  coll__put_le64(out, p->seq);
  coll__put_le64(out + 8, p->seq != 0 ? p->count : 0);
  coll__put_le32(out + 16,
                 p->seq != 0 && p->root >= 0 ? (uint32_t)p->root + 1 : 0);
  out[20] = (unsigned char)(p->seq != 0 ? p->kind : 0);
  out[21] = (unsigned char)(p->seq != 0 ? p->op : 0);
  out[22] = (unsigned char)(p->seq != 0 ? p->dtype : 0);
  out[23] = (unsigned char)(p->seq != 0 && p->in_call);
  out[24] = (unsigned char)p->p2p;
  out[25] = (unsigned char)(p->unsettled != 0);
  coll__put_le32(out + 28, p2p ? (uint32_t)p->p2p_peer : 0);
  coll__put_le32(out + 32, p2p ? p->p2p_tag : 0);
  out[36] = WHERE_FORMAT;
}

int coll__tops_where_decode(const unsigned char in[COLL_TRANSPORT_WHERE_BYTES],
                            int world, coll_pos_snap_t *p) {
  uint32_t root1 = coll__get_le32(in + 16);
  int i;
  for (i = 37; i < COLL_TRANSPORT_WHERE_BYTES; i++)
    if (in[i] != 0) return 0;
  if (in[36] != WHERE_FORMAT || in[26] != 0 || in[27] != 0) return 0;
  memset(p, 0, sizeof *p);
  p->seq = coll__get_le64(in);
  p->count = coll__get_le64(in + 8);
  p->kind = in[20];
  p->op = in[21];
  p->dtype = in[22];
  p->in_call = in[23];
  p->p2p = in[24];
  p->unsettled = in[25];
  p->p2p_peer = (int)coll__get_le32(in + 28);
  p->p2p_tag = coll__get_le32(in + 32);
  p->root = root1 == 0 ? -1 : (int)(root1 - 1);
  if (p->in_call > 1 || p->unsettled > 1 || p->p2p > COLL_POS_P2P_RECV)
    return 0;
  if ((p->seq == 0) != (p->kind == 0) || p->kind > COLL_WORK_FEDAVG) return 0;
  if (root1 > (uint32_t)world) return 0;
  if (p->p2p == COLL_POS_P2P_NONE)
    return coll__get_le32(in + 28) == 0 && p->p2p_tag == 0;
  return coll__get_le32(in + 28) < (uint32_t)world;
}

/* ---- conversions ----------------------------------------------------------
 */

/* The public causes have the internal causes' numbers (coll_transport.h
 * promises them stable; origin.h's travel on the TCP wire): checked here
 * once. */
#define SAME_CAUSE(x) ((int)COLL_FAIL_##x == (int)COLL_CAUSE_##x)
_Static_assert(SAME_CAUSE(LOST) && SAME_CAUSE(ABORTED) &&
                   SAME_CAUSE(DESTROYED) && SAME_CAUSE(PROTOCOL) &&
                   SAME_CAUSE(TIMEOUT) && SAME_CAUSE(FAILED) &&
                   SAME_CAUSE(UNRESPONSIVE) &&
                   (int)COLL_FAIL_UNRESPONSIVE == (int)COLL_CAUSE_MAX,
               "coll_fail_cause_t must keep coll_cause_t's numbers");

static coll_fail_origin_t to_public(const coll_origin_t *o) {
  coll_fail_origin_t p = {o->rank, o->cause, o->detail};
  return p;
}

/* ---- the slots ------------------------------------------------------------
 */

static coll_status_t tops_isend(void *ctx, int peer, uint32_t tag,
                                const void *buf, size_t len, void **req) {
  tops_ep_t *e = ctx;
  return e->ops.isend(e->ctx, peer, tag, buf, len, req);
}

static coll_status_t tops_irecv(void *ctx, int peer, uint32_t tag, void *buf,
                                size_t cap, void **req) {
  tops_ep_t *e = ctx;
  return e->ops.irecv(e->ctx, peer, tag, buf, cap, req);
}

static coll_status_t tops_wait(void *ctx, void *req, int64_t timeout_ms,
                               size_t *len) {
  tops_ep_t *e = ctx;
  return e->ops.wait(e->ctx, req, timeout_ms, len);
}

static coll_status_t tops_barrier(void *ctx, int64_t timeout_ms) {
  tops_ep_t *e = ctx;
  return e->ops.barrier(e->ctx, timeout_ms);
}

static void tops_abort(void *ctx) {
  tops_ep_t *e = ctx;
  e->ops.abort(e->ctx);
}

static void tops_destroy(void *ctx) {
  tops_ep_t *e = ctx;
  e->ops.destroy(e->ctx);
  free(e);
}

static void tops_fail(void *ctx, const coll_origin_t *o) {
  tops_ep_t *e = ctx;
  coll_fail_origin_t p = to_public(o);
  e->ops.fail(e->ctx, &p);
}

static int tops_origin(void *ctx, coll_origin_t *o) {
  tops_ep_t *e = ctx;
  coll_fail_origin_t p;
  coll_origin_t got;
  memset(&p, 0, sizeof p);
  if (!e->ops.origin(e->ctx, &p)) return 0;
  got.rank = p.rank;
  got.cause = p.cause;
  got.detail = p.detail;
  /* An origin no rank of this world can have is no origin. */
  if (!coll__origin_valid(&got, e->world)) return 0;
  *o = got;
  return 1;
}

static void tops_ask(void *ctx, int64_t budget_ms, coll_pos_snap_t *out,
                     unsigned char *answered) {
  tops_ep_t *e = ctx;
  unsigned char(*where)[COLL_TRANSPORT_WHERE_BYTES];
  unsigned char *said;
  int r;
  where = calloc((size_t)e->world, sizeof *where);
  said = calloc((size_t)e->world, 1);
  if (where != NULL && said != NULL) {
    e->ops.ask(e->ctx, budget_ms, where, said);
    for (r = 0; r < e->world; r++)
      if (r != e->rank && said[r] == 1 &&
          coll__tops_where_decode(where[r], e->world, &out[r]))
        answered[r] = 1;
  }
  free(where);
  free(said);
}

static void tops_tell(void *ctx, const char *report) {
  tops_ep_t *e = ctx;
  e->ops.tell(e->ctx, report);
}

/* A report a peer carried: printable text or nothing. */
static int tops_heard(void *ctx, char *buf, size_t n) {
  tops_ep_t *e = ctx;
  size_t k;
  if (n == 0) return 0;
  memset(buf, 0, n);
  if (!e->ops.heard(e->ctx, buf, n)) return 0;
  buf[n - 1] = '\0';
  for (k = 0; buf[k] != '\0'; k++)
    if ((unsigned char)buf[k] < 0x20 || (unsigned char)buf[k] > 0x7e)
      buf[k] = '?';
  return k > 0;
}

static void tops_leave(void *ctx) {
  tops_ep_t *e = ctx;
  atomic_store(&e->left, 1);
  e->ops.leave(e->ctx);
}

/* ---- shrink ---------------------------------------------------------------
 */

static coll_status_t link_send(void *ctx, int peer, const void *msg, size_t len,
                               int64_t deadline_ms) {
  tops_ep_t *e = ctx;
  return e->ops.link_send(e->ctx, peer, msg, len,
                          coll__remaining_ms(deadline_ms));
}

static coll_status_t link_recv(void *ctx, int peer, void *buf, size_t cap,
                               size_t *len, int64_t deadline_ms) {
  tops_ep_t *e = ctx;
  coll_status_t s = e->ops.link_recv(e->ctx, peer, buf, cap, len,
                                     coll__remaining_ms(deadline_ms));
  if (s == COLL_OK && *len > cap)
    s = coll__err(COLL_ERR_PROTOCOL,
                  "transport %s: link_recv from rank %d said %zu bytes into "
                  "%zu",
                  e->name, peer, *len, cap);
  return s;
}

/* The survivors' endpoint: the table makes it, we wrap it. */
static coll_status_t make_next(tops_ep_t *e, const coll_shrink_view_t *v,
                               int64_t deadline_ms, coll_transport_t **out) {
  int n = coll__shrink_view_count(v), k = 0, r;
  int *members = malloc((size_t)n * sizeof *members);
  void *next = NULL;
  coll_status_t s;
  if (members == NULL) return coll__err(COLL_ERR_NO_MEMORY, "out of memory");
  for (r = 0; r < v->world; r++)
    if (v->member[r]) members[k++] = r;
  s = e->ops.shrink(e->ctx, members, n, coll__shrink_view_rank(v, e->rank),
                    coll__remaining_ms(deadline_ms), &next);
  free(members);
  if (s != COLL_OK) return s;
  s = coll__tops_v2_create(&e->ops, next, coll__shrink_view_rank(v, e->rank), n,
                           out);
  if (s != COLL_OK) e->ops.destroy(next);
  return s;
}

static coll_status_t tops_shrink(void *ctx, int64_t deadline_ms,
                                 coll_transport_t **out) {
  tops_ep_t *e = ctx;
  coll_origin_t o = {e->rank, COLL_CAUSE_ABORTED, 0};
  coll_shrink_links_t links = {e, e->rank, e->world, link_send, link_recv};
  coll_shrink_view_t v;
  int64_t hello_dl;
  coll_status_t s;
  if (atomic_load(&e->left))
    return coll__err(COLL_ERR_ABORTED,
                     "rank %d was aborted by its owner and left the comm",
                     e->rank);
  if (atomic_exchange(&e->shrunk, 1))
    return coll__err(COLL_ERR_INVALID_ARG,
                     "this comm was shrunk before: shrink the comm that "
                     "shrink returned");
  /* This rank's part in the old world ends: what waits on it fails. */
  if (e->ops.fail != NULL)
    tops_fail(e, &o);
  else
    e->ops.abort(e->ctx);
  COLL_CHECK(coll__shrink_view_init(&v, e->world));
  /* As the in-process transport: a rank that joins after half the time
   * is left out, so the others finish in time. */
  hello_dl = deadline_ms < 0
                 ? coll__now_ms() + 30000
                 : coll__now_ms() + coll__remaining_ms(deadline_ms) / 2;
  s = coll__shrink_agree(&links, "", hello_dl, deadline_ms, &v);
  if (s == COLL_OK && !v.member[e->rank])
    s = coll__err(COLL_ERR_PEER_LOST,
                  "the survivors left rank %d out: it joined their agreement "
                  "too late",
                  e->rank);
  if (s == COLL_OK) s = make_next(e, &v, deadline_ms, out);
  coll__shrink_view_free(&v);
  return s;
}

/* ---- the endpoint ---------------------------------------------------------
 */

coll_status_t coll__tops_v2_create(const coll_transport_ops_t *ops, void *ctx,
                                   int rank, int world,
                                   coll_transport_t **out) {
  coll_provider_t p = {.size = sizeof p, .version = COLL_PROVIDER_VERSION};
  tops_ep_t *e = calloc(1, sizeof *e);
  coll_status_t s;
  if (e == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "transport_create: out of memory");
  /* Only what this libcoll knows of; a newer provider's table may be
   * longer. */
  memcpy(&e->ops, ops, ops->size < sizeof e->ops ? ops->size : sizeof e->ops);
  e->ops.size = sizeof e->ops;
  /* The name is copied: the provider's string may be freed after this, and
   * a shrink makes endpoints later. */
  snprintf(e->name, sizeof e->name, "%s", ops->name ? ops->name : "custom");
  e->ops.name = e->name;
  e->ctx = ctx;
  e->rank = rank;
  e->world = world;
  atomic_init(&e->left, 0);
  atomic_init(&e->shrunk, 0);
  p.name = e->name;
  p.isend = tops_isend;
  p.irecv = tops_irecv;
  p.wait = tops_wait;
  p.abort = tops_abort;
  p.destroy = tops_destroy;
  if (ops->barrier != NULL) p.barrier = tops_barrier;
  if (ops->fail != NULL) {
    p.fail = tops_fail;
    p.origin = tops_origin;
  }
  if (ops->ask != NULL) {
    p.ask = tops_ask;
    p.tell = tops_tell;
    p.heard = tops_heard;
  }
  if (ops->shrink != NULL) {
    p.shrink = tops_shrink;
    p.leave = tops_leave;
  }
  s = coll__t_create(&p, e, rank, world, out);
  if (s != COLL_OK) {
    free(e); /* ctx stays the caller's */
    return s;
  }
  if (ops->bind != NULL) ops->bind(ctx, *out);
  return COLL_OK;
}
