/* SPDX-License-Identifier: Apache-2.0 */
/* test_transport_vtable.c: coll_transport_create's checks of a provider's
 * vtable, the ownership of its ctx, the barrier fallback, and the
 * pipeline segment a provider's hints state (crowded hosts included). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "transport/endpoint.h"
#include "transport/route/route.h"
#include "transport_test.h"

/* ------------------------------------------------------------------------ */
/* A provider that does nothing but count its destroy calls.                */

static int destroy_calls;
static void *destroyed_ctx;

static coll_status_t nop_isend(void *ctx, int peer, uint32_t tag,
                               const void *buf, size_t len, void **req) {
  (void)ctx, (void)peer, (void)tag, (void)buf, (void)len, (void)req;
  return COLL_ERR_UNSUPPORTED;
}
static coll_status_t nop_irecv(void *ctx, int peer, uint32_t tag, void *buf,
                               size_t cap, void **req) {
  (void)ctx, (void)peer, (void)tag, (void)buf, (void)cap, (void)req;
  return COLL_ERR_UNSUPPORTED;
}
static coll_status_t nop_wait(void *ctx, void *req, int64_t timeout_ms,
                              size_t *len) {
  (void)ctx, (void)req, (void)timeout_ms, (void)len;
  return COLL_ERR_UNSUPPORTED;
}
static void nop_abort(void *ctx) { (void)ctx; }
static void count_destroy(void *ctx) {
  destroy_calls++;
  destroyed_ctx = ctx;
}

static coll_transport_ops_t nop_ops(void) {
  coll_transport_ops_t o = {.size = sizeof o,
                            .version = COLL_TRANSPORT_OPS_VERSION,
                            .name = "nop",
                            .isend = nop_isend,
                            .irecv = nop_irecv,
                            .wait = nop_wait,
                            .abort = nop_abort,
                            .destroy = count_destroy};
  return o;
}

/* Expects INVALID_ARG with a message and *out NULL. ctx stays ours on
 * every failure (one rule, whatever was wrong): the provider's destroy is
 * never called. */
static void expect_refused(const coll_transport_ops_t *ops, int rank, int world,
                           const char *words) {
  coll_transport_t *t = (coll_transport_t *)&t;
  int ctx;
  destroy_calls = 0;
  destroyed_ctx = NULL;
  assert_int_equal(coll_transport_create(ops, &ctx, rank, world, &t),
                   COLL_ERR_INVALID_ARG);
  assert_null(t);
  assert_non_null(strstr(coll_last_error(), words));
  assert_int_equal(destroy_calls, 0);
  assert_null(destroyed_ctx);
}

static void test_null_ops(void **state) {
  (void)state;
  expect_refused(NULL, 0, 1, "ops is NULL");
}

static void test_size_too_small(void **state) {
  coll_transport_ops_t o = nop_ops();
  (void)state;
  /* A size that does not reach the destroy slot: the caller keeps ctx,
   * as for every other refusal. */
  o.size = offsetof(coll_transport_ops_t, destroy);
  expect_refused(&o, 0, 1, "too small");
  o.size = 0;
  expect_refused(&o, 0, 1, "too small");
  o.size = offsetof(coll_transport_ops_t, isend);
  expect_refused(&o, 0, 1, "too small");
}

static void test_missing_slot(void **state) {
  coll_transport_ops_t o;
  (void)state;
  /* The destroy slot is there but is not called: ctx stays ours. */
  o = nop_ops();
  o.isend = NULL;
  expect_refused(&o, 0, 1, "isend");
  o = nop_ops();
  o.irecv = NULL;
  expect_refused(&o, 0, 1, "irecv");
  o = nop_ops();
  o.wait = NULL;
  expect_refused(&o, 0, 1, "wait");
  o = nop_ops();
  o.abort = NULL;
  expect_refused(&o, 0, 1, "abort");
  o = nop_ops();
  o.destroy = NULL;
  expect_refused(&o, 0, 1, "destroy");
}

static void test_version(void **state) {
  coll_transport_ops_t o = nop_ops();
  (void)state;
  /* 0 is a table whose version was never set. */
  o.version = 0;
  expect_refused(&o, 0, 1, "COLL_TRANSPORT_OPS_VERSION");
  /* Rules newer than this library knows. */
  o.version = COLL_TRANSPORT_OPS_VERSION + 1;
  expect_refused(&o, 0, 1, "ops->version");
}

static void test_rank_world_range(void **state) {
  coll_transport_ops_t o = nop_ops();
  (void)state;
  expect_refused(&o, -1, 2, "out of range");
  expect_refused(&o, 2, 2, "out of range");
  expect_refused(&o, 0, 0, "out of range");
  expect_refused(&o, 0, -3, "out of range");
}

static void test_out_null(void **state) {
  coll_transport_ops_t o = nop_ops();
  int ctx;
  (void)state;
  destroy_calls = 0;
  assert_int_equal(coll_transport_create(&o, &ctx, 0, 1, NULL),
                   COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "out"));
  assert_int_equal(destroy_calls, 0);
}

/* The provider's name is copied: its string may go away after create. */
static void test_name_copied(void **state) {
  coll_transport_ops_t o = nop_ops();
  coll_transport_t *t = NULL;
  char name[64];
  int ctx;
  (void)state;
  snprintf(name, sizeof name, "fabric-%d", 7);
  o.name = name;
  assert_int_equal(coll_transport_create(&o, &ctx, 0, 1, &t), COLL_OK);
  memset(name, 'x', sizeof name - 1);
  assert_string_equal(coll__t_name(t), "fabric-7");
  coll_transport_destroy(t);
}

static void test_accepted(void **state) {
  coll_transport_ops_t o = nop_ops();
  coll_transport_t *t = NULL;
  int ctx;
  (void)state;
  o.name = NULL;
  destroy_calls = 0;
  assert_int_equal(coll_transport_create(&o, &ctx, 2, 5, &t), COLL_OK);
  assert_int_equal(coll_transport_rank(t), 2);
  assert_int_equal(coll_transport_size(t), 5);
  assert_string_equal(coll__t_name(t), "custom");
  assert_null(t->p.barrier);
  assert_int_equal(destroy_calls, 0);
  coll_transport_destroy(t);
  assert_int_equal(destroy_calls, 1);
  assert_ptr_equal(destroyed_ctx, &ctx);
  coll_transport_destroy(NULL);
  assert_int_equal(coll_transport_rank(NULL), -1);
  assert_int_equal(coll_transport_size(NULL), -1);
}

/* ------------------------------------------------------------------------ */
/* A provider that forwards to an in-process endpoint, with a barrier slot  */
/* that only counts: built with a smaller size, the slot must go unused.    */

static atomic_int barrier_calls;

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
  return tt_wait(ctx, req, timeout_ms, len);
}
static void fwd_abort(void *ctx) { coll__t_abort(ctx); }
static void fwd_destroy(void *ctx) { coll_transport_destroy(ctx); }
static coll_status_t counting_barrier(void *ctx, int64_t timeout_ms) {
  (void)ctx, (void)timeout_ms;
  atomic_fetch_add(&barrier_calls, 1);
  return COLL_OK;
}

typedef struct barrier_run {
  coll_transport_t *t[TT_MAX_RANKS];
  tt_result_t res[TT_MAX_RANKS];
  atomic_int arrived;
} barrier_run_t;

static void barrier_rank(int rank, int world, void *arg) {
  barrier_run_t *b = arg;
  int it;
  for (it = 0; it < 20; it++) {
    coll_status_t s;
    int seen;
    atomic_fetch_add(&b->arrived, 1);
    s = coll__t_barrier(b->t[rank], COLL_TAG_RESERVED + 1,
                        coll__now_ms() + TT_WAIT_MS);
    if (s != COLL_OK) {
      tt_fail(&b->res[rank], "barrier %d: %s: %s", it, coll_status_name(s),
              coll_last_error());
      return;
    }
    /* Nobody leaves a barrier before everybody entered it. */
    seen = atomic_load(&b->arrived);
    if (seen < world * (it + 1)) {
      tt_fail(&b->res[rank], "left barrier %d after %d of %d arrivals", it,
              seen, world * (it + 1));
      return;
    }
  }
}

static void run_wrapped_barrier(size_t ops_size, int world, int want_calls) {
  coll_transport_ops_t o = {.size = sizeof o,
                            .version = COLL_TRANSPORT_OPS_VERSION,
                            .name = "fwd",
                            .isend = fwd_isend,
                            .irecv = fwd_irecv,
                            .wait = fwd_wait,
                            .abort = fwd_abort,
                            .destroy = fwd_destroy,
                            .barrier = counting_barrier};
  coll_transport_t *inner[TT_MAX_RANKS];
  barrier_run_t b;
  int i;
  memset(&b, 0, sizeof b);
  atomic_init(&b.arrived, 0);
  atomic_store(&barrier_calls, 0);
  o.size = ops_size;
  /* A table shorter than version 2's is a version 1 table. */
  if (ops_size < sizeof o) o.version = 1;
  assert_int_equal(coll_inproc_create(world, inner), COLL_OK);
  for (i = 0; i < world; i++)
    assert_int_equal(coll_transport_create(&o, inner[i], i, world, &b.t[i]),
                     COLL_OK);
  if (want_calls == 0) assert_null(b.t[0]->p.barrier);
  test_run_ranks(world, barrier_rank, &b, TT_RUN_MS, "wrapped barrier");
  TT_ASSERT_RANKS_OK(b.res, world);
  assert_int_equal(atomic_load(&barrier_calls), want_calls);
  tt_destroy_all(b.t, world);
}

static void test_small_table_uses_default_barrier(void **state) {
  (void)state;
  /* Built against a header without the barrier slot. */
  run_wrapped_barrier(offsetof(coll_transport_ops_t, barrier), 4, 0);
  run_wrapped_barrier(offsetof(coll_transport_ops_t, barrier), 3, 0);
}

static void test_full_table_uses_provider_barrier(void **state) {
  (void)state;
  /* The counting barrier synchronizes nothing, so only count calls. */
  coll_transport_ops_t o = {.size = sizeof o,
                            .version = COLL_TRANSPORT_OPS_VERSION,
                            .name = "fwd",
                            .isend = fwd_isend,
                            .irecv = fwd_irecv,
                            .wait = fwd_wait,
                            .abort = fwd_abort,
                            .destroy = fwd_destroy,
                            .barrier = counting_barrier};
  coll_transport_t *inner[1], *t;
  atomic_store(&barrier_calls, 0);
  assert_int_equal(coll_inproc_create(1, inner), COLL_OK);
  assert_int_equal(coll_transport_create(&o, inner[0], 0, 1, &t), COLL_OK);
  assert_int_equal(coll__t_barrier(t, COLL_TAG_RESERVED, -1), COLL_OK);
  assert_int_equal(atomic_load(&barrier_calls), 1);
  coll_transport_destroy(t);
}

/* A transport's crowded segment applies where the ranks of this rank's
 * host outnumber the cores, and only there; unsaid, or with no host
 * table, the plain one holds, and only a transport with both can differ
 * between ranks. */
/* An endpoint of a provider that forwards to `inner` and states hints h. */
static coll_transport_t *with_hints(coll_transport_t *inner, int rank,
                                    int world, coll_t_hints_t h) {
  coll_provider_t p = {.size = sizeof p,
                       .version = COLL_PROVIDER_VERSION,
                       .name = "hinted",
                       .isend = fwd_isend,
                       .irecv = fwd_irecv,
                       .wait = fwd_wait,
                       .abort = fwd_abort,
                       .destroy = fwd_destroy,
                       .hints = h};
  coll_transport_t *t = NULL;
  assert_int_equal(coll__t_create(&p, inner, rank, world, &t), COLL_OK);
  return t;
}

static void test_segment_for_crowded_hosts(void **state) {
  static const int host_of[4] = {0, 0, 0, 1};
  coll_transport_t *in[4], *one, *plain, *t[4];
  (void)state;
  assert_int_equal(coll_inproc_create(4, in), COLL_OK);
  assert_int_equal(coll_inproc_create(1, &one), COLL_OK);
  plain = with_hints(one, 0, 1, (coll_t_hints_t){.seg_bytes = 256u << 10});
  t[0] = with_hints(in[0], 0, 4,
                    (coll_t_hints_t){.seg_bytes = 256u << 10,
                                     .seg_crowded = 1u << 20,
                                     .seg_large = 2u << 20});
  t[1] = in[1];
  t[2] = in[2];
  t[3] = with_hints(
      in[3], 3, 4,
      (coll_t_hints_t){.seg_bytes = 256u << 10, .seg_crowded = 1u << 20});
  assert_int_equal(coll__t_segment_bytes_for(plain, 1), 256u << 10);
  /* No host table yet: nothing says the host is crowded. */
  assert_int_equal(coll__t_segment_bytes_for(t[0], 1), 256u << 10);
  assert_false(coll__t_segment_varies(t[0]));
  assert_int_equal(coll__route_create(&t[0], NULL, host_of), COLL_OK);
  assert_int_equal(coll__route_create(&t[3], NULL, host_of), COLL_OK);
  /* Rank 0 shares its host with 2 others; rank 3 is alone on its own. */
  assert_int_equal(coll__t_segment_bytes_for(t[0], 2), 1u << 20);
  assert_int_equal(coll__t_segment_bytes_for(t[0], 3), 256u << 10);
  assert_int_equal(coll__t_segment_bytes_for(t[3], 1), 256u << 10);
  assert_int_equal(coll__t_segment_bytes(t[0]), 256u << 10);
  /* What long blocks' segments grow to: nothing said, the segment itself;
   * the large one where the host is not crowded, the crowded one where it
   * is. */
  assert_int_equal(coll__t_segment_bytes_max_for(t[3], 1), 256u << 10);
  assert_int_equal(coll__t_segment_bytes_max_for(t[0], 3), 2u << 20);
  assert_int_equal(coll__t_segment_bytes_max_for(t[0], 2), 1u << 20);
  /* So a comm over them agrees on one (cpu_comm.c); a transport with a
   * single segment has nothing to agree on. */
  assert_true(coll__t_segment_varies(t[0]));
  assert_false(coll__t_segment_varies(t[1]));
  coll_transport_destroy(plain);
  for (int r = 0; r < 4; r++) coll_transport_destroy(t[r]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_null_ops),
      cmocka_unit_test(test_size_too_small),
      cmocka_unit_test(test_missing_slot),
      cmocka_unit_test(test_version),
      cmocka_unit_test(test_rank_world_range),
      cmocka_unit_test(test_out_null),
      cmocka_unit_test(test_accepted),
      cmocka_unit_test(test_name_copied),
      cmocka_unit_test(test_small_table_uses_default_barrier),
      cmocka_unit_test(test_full_table_uses_provider_barrier),
      cmocka_unit_test(test_segment_for_crowded_hosts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
