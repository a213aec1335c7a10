/* SPDX-License-Identifier: Apache-2.0 */
/* test_plug_transport.c: the tests' own mailbox transport (mailbox.c),
 * plugged in with coll_transport_create; comms over it run every collective
 * and point-to-point correctly, with a full-size table, a table as an older
 * provider compiled it (no barrier slot), one with a barrier slot, and a
 * version 1 table whose version 2 slots are set but never read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api_test.h"
#include "mailbox.h"

#define MAX_WORLD 5 /* worlds 1..5 */
#define COMM_TIMEOUT_MS 60000
#define RUN_TIMEOUT_MS 120000

/* ---- collectives over it --------------------------------------------------
 */

typedef struct ctx {
  int world;
  mb_variant_t v;
  coll_comm_t *comms[MAX_WORLD];
  t_fail_t fails;
} ctx_t;

static void reduce_case(ctx_t *c, int rank, coll_dtype_t dt, coll_op_t op,
                        size_t count, int kind, unsigned char *send,
                        unsigned char *recv) {
  uint64_t cas = t_mix((uint64_t)kind, (uint64_t)c->world * 16 + (uint64_t)dt,
                       (uint64_t)op * 1000003u + count);
  size_t n = (size_t)c->world;
  char what[160];
  coll_status_t s;
  snprintf(what, sizeof what, "%s: %s world %d rank %d %s %s x %zu",
           mb_variant_name(c->v), kind == 0 ? "allreduce" : "reduce_scatter",
           c->world, rank, coll_dtype_name(dt), coll_op_name(op), count);
  if (kind == 0) {
    t_gen_n(dt, op, rank, 0, cas, send, count);
    s = coll_allreduce(c->comms[rank], send, recv, count, dt, op, NULL);
    if (t_expect(&c->fails, s, COLL_OK, "%s", what))
      t_check_reduced(&c->fails, what, dt, op, c->world, 0, cas, recv, count);
  } else {
    t_gen_n(dt, op, rank, 0, cas, send, count * n);
    s = coll_reduce_scatter(c->comms[rank], send, recv, count, dt, op, NULL);
    if (t_expect(&c->fails, s, COLL_OK, "%s", what))
      t_check_reduced(&c->fails, what, dt, op, c->world, (size_t)rank * count,
                      cas, recv, count);
  }
}

static void copies(ctx_t *c, int rank, size_t bytes, unsigned char *a,
                   unsigned char *b, unsigned char *tmp) {
  int root, q;
  uint64_t cas = t_mix(0xc0b1e5, (uint64_t)c->world, bytes);
  coll_status_t s;
  for (root = 0; root < c->world; root++) {
    if (rank == root)
      t_bytes(root, cas + (uint64_t)root, a, bytes);
    else
      memset(a, 0, bytes);
    s = coll_broadcast(c->comms[rank], a, bytes, COLL_U8, root, NULL);
    if (!t_expect(&c->fails, s, COLL_OK, "%s: broadcast root %d rank %d",
                  mb_variant_name(c->v), root, rank))
      continue;
    t_bytes(root, cas + (uint64_t)root, tmp, bytes);
    if (memcmp(a, tmp, bytes) != 0)
      t_fail(&c->fails, "%s: broadcast of %zu bytes from %d: rank %d differs",
             mb_variant_name(c->v), bytes, root, rank);
  }
  t_bytes(rank, cas, a, bytes);
  s = coll_allgather(c->comms[rank], a, b, bytes, COLL_U8, NULL);
  if (!t_expect(&c->fails, s, COLL_OK, "%s: allgather rank %d",
                mb_variant_name(c->v), rank))
    return;
  for (q = 0; q < c->world; q++) {
    t_bytes(q, cas, tmp, bytes);
    if (memcmp(b + (size_t)q * bytes, tmp, bytes) != 0)
      t_fail(&c->fails, "%s: allgather of %zu bytes: block %d on rank %d",
             mb_variant_name(c->v), bytes, q, rank);
  }
}

static void ring_p2p(ctx_t *c, int rank) {
  int world = c->world, to = (rank + 1) % world,
      from = (rank + world - 1) % world;
  int32_t out[300], in[300];
  coll_request_t *rs = NULL, *rr = NULL;
  size_t got = 0;
  int i;
  if (world < 2) return;
  for (i = 0; i < 300; i++) out[i] = rank * 1000 + i;
  if (!t_expect(&c->fails,
                coll_isend(c->comms[rank], out, 300, COLL_I32, to, 42, &rs),
                COLL_OK, "isend") ||
      !t_expect(
          &c->fails,
          coll_irecv(c->comms[rank], in, 300, COLL_I32, from, 42, &got, &rr),
          COLL_OK, "irecv"))
    return;
  t_expect(&c->fails, coll_wait(rs), COLL_OK, "wait(isend)");
  t_expect(&c->fails, coll_wait(rr), COLL_OK, "wait(irecv)");
  if (got != 300) t_fail(&c->fails, "ring p2p: received %zu", got);
  for (i = 0; i < 300; i++)
    if (in[i] != from * 1000 + i) {
      t_fail(&c->fails, "%s: ring p2p rank %d: element %d is %d",
             mb_variant_name(c->v), rank, i, in[i]);
      break;
    }
  /* Blocking pair exchange, lower rank sends first. */
  if (rank < (rank ^ 1) && (rank ^ 1) < world) {
    t_expect(&c->fails,
             coll_send(c->comms[rank], out, 7, COLL_I32, rank ^ 1, 9), COLL_OK,
             "send");
  } else if ((rank ^ 1) < world) {
    got = 0;
    if (t_expect(
            &c->fails,
            coll_recv(c->comms[rank], in, 300, COLL_I32, rank ^ 1, 9, &got),
            COLL_OK, "recv") &&
        (got != 7 || in[6] != (rank ^ 1) * 1000 + 6))
      t_fail(&c->fails, "%s: blocking recv rank %d: %zu elements",
             mb_variant_name(c->v), rank, got);
  }
}

static void plug_rank(int rank, int world, void *arg) {
  ctx_t *c = arg;
  static const size_t counts[] = {0, 1, 7, 4099, 70001};
  static const coll_dtype_t dts[] = {COLL_F32, COLL_BF16, COLL_I8, COLL_I64};
  static const coll_op_t ops[] = {COLL_SUM, COLL_AVG, COLL_MAX};
  size_t cap = 70001 * 8 * (size_t)world;
  unsigned char *a = malloc(cap), *b = malloc(cap), *tmp = malloc(cap);
  size_t ci, di, oi, ncounts = t_quick() ? 4 : 5;
  int k;
  if (a == NULL || b == NULL || tmp == NULL) {
    t_fail(&c->fails, "out of memory in the test");
    goto out;
  }
  for (ci = 0; ci < ncounts; ci++)
    for (di = 0; di < 4; di++)
      for (oi = 0; oi < 3; oi++)
        for (k = 0; k < 2; k++)
          reduce_case(c, rank, dts[di], ops[oi], counts[ci], k, a, b);
  copies(c, rank, 1, a, b, tmp);
  copies(c, rank, 5000, a, b, tmp);
  copies(c, rank, 300001, a, b, tmp);
  for (k = 0; k < 3; k++)
    t_expect(&c->fails, coll_barrier(c->comms[rank]), COLL_OK,
             "%s: barrier %d rank %d", mb_variant_name(c->v), k, rank);
  ring_p2p(c, rank);
out:
  free(a);
  free(b);
  free(tmp);
  (void)world;
}

static void test_plugged(void **state) {
  ctx_t *c = calloc(1, sizeof *c);
  int v, w;
  (void)state;
  assert_non_null(c);
  t_fail_init(&c->fails);
  for (v = MB_FULL_NO_BARRIER; v <= MB_V1_POISONED; v++)
    for (w = 1; w <= MAX_WORLD; w++) {
      if (t_quick() && v != MB_FULL_NO_BARRIER && w != 3) continue;
      c->world = w;
      c->v = (mb_variant_t)v;
      mb_poison_reset();
      assert_int_equal(mb_comms(w, c->v, COMM_TIMEOUT_MS, c->comms), 0);
      test_run_ranks(w, plug_rank, c, RUN_TIMEOUT_MS, "plugged transport");
      test_destroy_comms(w, c->comms);
      if (mb_poison_calls() != 0)
        t_fail(&c->fails,
               "%s world %d: a slot past what the table's size and "
               "version allow was called %d times",
               mb_variant_name(c->v), w, mb_poison_calls());
    }
  assert_int_equal(t_fail_report(&c->fails, "plugged transport"), 0);
  t_fail_destroy(&c->fails);
  free(c);
}

/* Abort works through the plugged transport: a rank stuck waiting for a
 * peer that never joins is released. */
typedef struct stuck {
  coll_comm_t *comms[2];
  coll_abort_handle_t *h;
  int entered;
  coll_status_t st;
} stuck_t;

static void stuck_rank(int rank, int world, void *arg) {
  stuck_t *s = arg;
  float buf[100] = {0};
  (void)world;
  if (rank == 0) {
    __atomic_store_n(&s->entered, 1, __ATOMIC_SEQ_CST);
    s->st =
        coll_allreduce(s->comms[0], buf, buf, 100, COLL_F32, COLL_SUM, NULL);
  } else {
    while (!__atomic_load_n(&s->entered, __ATOMIC_SEQ_CST)) test_sleep_ms(1);
    test_sleep_ms(100);
    (void)coll_abort(s->h);
  }
}

static void test_plugged_abort(void **state) {
  stuck_t s;
  (void)state;
  memset(&s, 0, sizeof s);
  assert_int_equal(mb_comms(2, MB_FULL_NO_BARRIER, COMM_TIMEOUT_MS, s.comms),
                   0);
  assert_int_equal(coll_comm_abort_handle(s.comms[0], &s.h), COLL_OK);
  test_run_ranks(2, stuck_rank, &s, RUN_TIMEOUT_MS,
                 "abort over a plugged "
                 "transport");
  test_destroy_comms(2, s.comms);
  coll_abort_handle_release(s.h);
  assert_int_equal(s.st, COLL_ERR_ABORTED);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plugged),
      cmocka_unit_test(test_plugged_abort),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
