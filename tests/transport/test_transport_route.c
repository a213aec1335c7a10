/* SPDX-License-Identifier: Apache-2.0 */
/* test_transport_route.c: an endpoint with a host endpoint routes the
 * messages between ranks of its host there (transport/route/):
 * which endpoint carries a message, waits on either kind of request, the
 * wait on the own endpoint that also moves the host endpoint while routed
 * requests are pending (its kick), and the origin of a failure a routed
 * request met. Four in-process endpoints are the comm's; each host (ranks
 * 0 and 2 on host 0, 1 and 3 on host 1) has an in-process world of two
 * behind a wrapper that speaks comm ranks, as the shared-memory host
 * endpoint does. One thread drives every rank: in-process messages move
 * when posted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "core/origin.h"
#include "transport/endpoint.h"
#include "transport/route/route.h"
#include "transport_test.h"

#define WORLD 4

static const int k_host_of[WORLD] = {0, 1, 0, 1};

/* ---- the host endpoint: an in-process world of two, in comm ranks ---- */

typedef struct wrap {
  coll_transport_t *in;
  int names[2]; /* member i is comm rank names[i] */
  int kicks;
  int origin_set; /* what its origin hook reports, when set */
  coll_origin_t origin;
} wrap_t;

static int member(const wrap_t *w, int peer) {
  return w->names[0] == peer ? 0 : w->names[1] == peer ? 1 : -1;
}

static coll_status_t wrap_isend(void *ctx, int peer, uint32_t tag,
                                const void *buf, size_t len, void **req) {
  wrap_t *w = ctx;
  if (member(w, peer) < 0) return COLL_ERR_INVALID_ARG;
  return coll__t_isend(w->in, member(w, peer), tag, buf, len, req);
}

static coll_status_t wrap_irecv(void *ctx, int peer, uint32_t tag, void *buf,
                                size_t cap, void **req) {
  wrap_t *w = ctx;
  if (member(w, peer) < 0) return COLL_ERR_INVALID_ARG;
  return coll__t_irecv(w->in, member(w, peer), tag, buf, cap, req);
}

static coll_status_t wrap_wait(void *ctx, void *req, int64_t timeout_ms,
                               size_t *len) {
  wrap_t *w = ctx;
  return coll__t_wait_for(w->in, req, timeout_ms, len);
}

static void wrap_abort(void *ctx) { coll__t_abort(((wrap_t *)ctx)->in); }

static void wrap_destroy(void *ctx) {
  wrap_t *w = ctx;
  coll_transport_destroy(w->in);
  free(w);
}

static void wrap_kick(void *ctx) { ((wrap_t *)ctx)->kicks++; }

static void wrap_fail(void *ctx, const coll_origin_t *o) {
  (void)o;
  wrap_abort(ctx);
}

static int wrap_origin(void *ctx, coll_origin_t *o) {
  wrap_t *w = ctx;
  if (w->origin_set) *o = w->origin;
  return w->origin_set;
}

/* Kicks of each comm endpoint (rank r's), before a wait on its host one. */
static int g_main_kicks[WORLD];
static void *g_main_ctx[WORLD];

static void main_kick(void *ctx) {
  for (int r = 0; r < WORLD; r++) g_main_kicks[r] += g_main_ctx[r] == ctx;
}

/* The comm's endpoints: in-process ones behind a provider that forwards
 * and has a kick. */
static coll_status_t fwd_isend(void *ctx, int peer, uint32_t tag,
                               const void *buf, size_t len, void **req) {
  return coll__t_isend(ctx, peer, tag, buf, len, req);
}
static coll_status_t fwd_irecv(void *ctx, int peer, uint32_t tag, void *buf,
                               size_t cap, void **req) {
  return coll__t_irecv(ctx, peer, tag, buf, cap, req);
}
static coll_status_t fwd_wait(void *ctx, void *req, int64_t timeout_ms,
                              size_t *len) {
  return coll__t_wait_for(ctx, req, timeout_ms, len);
}
static void fwd_abort(void *ctx) { coll__t_abort(ctx); }
static void fwd_destroy(void *ctx) { coll_transport_destroy(ctx); }
static void fwd_fail(void *ctx, const coll_origin_t *o) {
  coll_transport_t *in = ctx;
  (in->p.fail)(in->ctx, o); /* parenthesized: cmocka defines fail() */
}
static int fwd_origin(void *ctx, coll_origin_t *o) {
  return coll__t_origin(ctx, o);
}

typedef struct comm {
  coll_transport_t *t[WORLD]; /* the comm's endpoints */
  wrap_t *w[WORLD];           /* each one's host endpoint's */
} comm_t;

static void comm_make(comm_t *c) {
  static const coll_provider_t host_p = {.size = sizeof host_p,
                                         .version = COLL_PROVIDER_VERSION,
                                         .name = "hostwrap",
                                         .isend = wrap_isend,
                                         .irecv = wrap_irecv,
                                         .wait = wrap_wait,
                                         .abort = wrap_abort,
                                         .destroy = wrap_destroy,
                                         .fail = wrap_fail,
                                         .origin = wrap_origin,
                                         .kick = wrap_kick};
  static const coll_provider_t main_p = {.size = sizeof main_p,
                                         .version = COLL_PROVIDER_VERSION,
                                         .name = "inproc",
                                         .isend = fwd_isend,
                                         .irecv = fwd_irecv,
                                         .wait = fwd_wait,
                                         .abort = fwd_abort,
                                         .destroy = fwd_destroy,
                                         .fail = fwd_fail,
                                         .origin = fwd_origin,
                                         .kick = main_kick};
  coll_transport_t *in[2][2], *plain[WORLD];
  assert_int_equal(coll_inproc_create(WORLD, plain), COLL_OK);
  assert_int_equal(coll_inproc_create(2, in[0]), COLL_OK);
  assert_int_equal(coll_inproc_create(2, in[1]), COLL_OK);
  for (int r = 0; r < WORLD; r++) {
    coll_transport_t *h = NULL;
    wrap_t *w = calloc(1, sizeof *w);
    int host = k_host_of[r];
    assert_non_null(w);
    w->in = in[host][r / 2];
    w->names[0] = host;
    w->names[1] = host + 2;
    assert_int_equal(coll__t_create(&host_p, w, r, WORLD, &h), COLL_OK);
    assert_int_equal(coll__t_create(&main_p, plain[r], r, WORLD, &c->t[r]),
                     COLL_OK);
    assert_int_equal(coll__route_create(&c->t[r], h, k_host_of), COLL_OK);
    g_main_kicks[r] = 0;
    g_main_ctx[r] = plain[r];
    c->w[r] = w;
  }
}

static void comm_free(comm_t *c) {
  for (int r = 0; r < WORLD; r++) coll_transport_destroy(c->t[r]);
}

/* Sends seen by coll__t_send_test_hook: the endpoint that carried each. */
static char g_carrier[WORLD][WORLD][COLL_TRANSPORT_NAME_MAX];

static void note_carrier(const coll_transport_t *t, int peer, size_t len) {
  (void)len;
  snprintf(g_carrier[t->rank][peer], sizeof g_carrier[0][0], "%s", t->name);
}

static coll_status_t wait_ok(coll_transport_t *t, coll_treq_t r) {
  return coll__t_wait(t, r, coll__now_ms() + TT_WAIT_MS, NULL);
}

/* Rank 0 sends to each other rank: to rank 2 (its host) through the host
 * endpoint, to 1 and 3 through its own; each arrives whole. */
static void test_routes_by_host(void **state) {
  comm_t c;
  coll_treq_t s[WORLD], r[WORLD];
  uint64_t out[WORLD][64], in[WORLD][64];
  (void)state;
  comm_make(&c);
  memset(g_carrier, 0, sizeof g_carrier);
  coll__t_send_test_hook = note_carrier;
  for (int p = 1; p < WORLD; p++) {
    tt_fill(out[p], sizeof out[p], (uint64_t)p);
    memset(in[p], 0, sizeof in[p]);
    assert_int_equal(coll__t_irecv(c.t[p], 0, 5, in[p], sizeof in[p], &r[p]),
                     COLL_OK);
    assert_int_equal(coll__t_isend(c.t[0], p, 5, out[p], sizeof out[p], &s[p]),
                     COLL_OK);
  }
  for (int p = 1; p < WORLD; p++) {
    assert_int_equal(wait_ok(c.t[0], s[p]), COLL_OK);
    assert_int_equal(wait_ok(c.t[p], r[p]), COLL_OK);
    assert_memory_equal(in[p], out[p], sizeof in[p]);
  }
  coll__t_send_test_hook = NULL;
  assert_string_equal(g_carrier[0][2], "hostwrap");
  assert_string_equal(g_carrier[0][1], "inproc");
  assert_string_equal(g_carrier[0][3], "inproc");
  /* Every routed request was reaped. */
  for (int p = 0; p < WORLD; p++)
    assert_int_equal(coll__route_pending(c.t[p]), 0);
  comm_free(&c);
}

/* A routed receive still pending stays pending after a look (TIMEOUT),
 * and while it is, a wait on the own endpoint also kicks the host
 * endpoint; once it is reaped, waits there kick nothing. A wait on the
 * routed one kicks the comm's endpoint first. */
static void test_wait_kicks_host_while_routed(void **state) {
  comm_t c;
  coll_treq_t routed, mine, send;
  uint32_t a = 11, b = 22, got_a = 0, got_b = 0;
  size_t len = 0;
  int kicks;
  (void)state;
  comm_make(&c);
  assert_int_equal(coll__t_irecv(c.t[0], 2, 1, &got_a, 4, &routed), COLL_OK);
  assert_int_equal(coll__route_pending(c.t[0]), 1);
  /* A wait on the host endpoint first hands the comm endpoint's own
   * pending work on (its kick). */
  assert_int_equal(coll__t_wait_for(c.t[0], routed, 0, &len), COLL_ERR_TIMEOUT);
  assert_int_equal(g_main_kicks[0], 1);
  assert_int_equal(coll__route_pending(c.t[0]), 1);
  /* A message from rank 1, on the comm's own endpoint. */
  assert_int_equal(coll__t_irecv(c.t[0], 1, 1, &got_b, 4, &mine), COLL_OK);
  assert_int_equal(coll__t_isend(c.t[1], 0, 1, &b, 4, &send), COLL_OK);
  kicks = c.w[0]->kicks;
  assert_int_equal(wait_ok(c.t[0], mine), COLL_OK);
  assert_true(c.w[0]->kicks > kicks);
  assert_int_equal(wait_ok(c.t[1], send), COLL_OK);
  assert_int_equal(got_b, 22);
  /* Rank 2 sends the routed one; reaping it ends the kicks. */
  assert_int_equal(coll__t_isend(c.t[2], 0, 1, &a, 4, &send), COLL_OK);
  assert_int_equal(wait_ok(c.t[0], routed), COLL_OK);
  assert_int_equal(wait_ok(c.t[2], send), COLL_OK);
  assert_int_equal(got_a, 11);
  assert_int_equal(coll__route_pending(c.t[0]), 0);
  assert_int_equal(coll__t_irecv(c.t[0], 1, 1, &got_b, 4, &mine), COLL_OK);
  assert_int_equal(coll__t_isend(c.t[1], 0, 1, &b, 4, &send), COLL_OK);
  kicks = c.w[0]->kicks;
  assert_int_equal(wait_ok(c.t[0], mine), COLL_OK);
  assert_int_equal(wait_ok(c.t[1], send), COLL_OK);
  assert_int_equal(c.w[0]->kicks, kicks);
  comm_free(&c);
}

/* A routed request that failed because a rank of this host was lost: the
 * comm's endpoint fails for that origin (the host endpoint heard it), not
 * for one of its own, unless it heard of another first. */
static void test_fail_takes_host_origin(void **state) {
  comm_t c;
  coll_origin_t o;
  (void)state;
  comm_make(&c);
  c.w[0]->origin = (coll_origin_t){2, COLL_CAUSE_LOST, 0};
  c.w[0]->origin_set = 1;
  coll__t_fail(c.t[0], COLL_ERR_PEER_LOST);
  assert_true(coll__t_origin(c.t[0], &o));
  assert_int_equal(o.rank, 2);
  assert_int_equal(o.cause, COLL_CAUSE_LOST);
  /* With nothing heard on the host endpoint, the failure is this rank's. */
  c.w[1]->origin_set = 0;
  coll__t_fail(c.t[1], COLL_ERR_NO_MEMORY);
  assert_true(coll__t_origin(c.t[1], &o));
  assert_int_equal(o.rank, 1);
  comm_free(&c);
}

/* A peer beyond the host endpoint is never routed: self and the other
 * host's ranks stay on the comm's own endpoint. */
static void test_routes_only_host_peers(void **state) {
  comm_t c;
  coll_treq_t r;
  uint32_t x = 0;
  size_t len = 0;
  (void)state;
  comm_make(&c);
  assert_int_equal(coll__t_irecv(c.t[0], 3, 1, &x, 4, &r), COLL_OK);
  assert_int_equal(coll__route_pending(c.t[0]), 0);
  coll__t_abort(c.t[0]);
  assert_int_equal(coll__t_wait_for(c.t[0], r, -1, &len), COLL_ERR_ABORTED);
  comm_free(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_routes_by_host),
      cmocka_unit_test(test_wait_kicks_host_while_routed),
      cmocka_unit_test(test_fail_takes_host_origin),
      cmocka_unit_test(test_routes_only_host_peers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
