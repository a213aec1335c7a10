/* SPDX-License-Identifier: Apache-2.0 */
/* test_misc.c: dtype negotiation, federated averaging with a deadline (a
 * late rank is left out of the mean but still receives it) and a barrier
 * that really holds every rank until all arrived. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api_test.h"

#define MAX_WORLD 8
#define COMM_TIMEOUT_MS 60000
#define RUN_TIMEOUT_MS 120000

typedef struct ctx {
  int world;
  coll_comm_t *comms[MAX_WORLD];
  t_fail_t fails;
} ctx_t;

/* ---- negotiate_dtype ---------------------------------------------------- */

typedef struct ncase {
  const char *what;
  coll_dtype_t local[4]; /* per rank */
  coll_dtype_t want;
} ncase_t;

static const ncase_t k_ncases[] = {
    {"all f16", {COLL_F16, COLL_F16, COLL_F16, COLL_F16}, COLL_F16},
    {"all bf16", {COLL_BF16, COLL_BF16, COLL_BF16, COLL_BF16}, COLL_BF16},
    {"all f32", {COLL_F32, COLL_F32, COLL_F32, COLL_F32}, COLL_F32},
    {"all f64", {COLL_F64, COLL_F64, COLL_F64, COLL_F64}, COLL_F64},
    {"all i8", {COLL_I8, COLL_I8, COLL_I8, COLL_I8}, COLL_I8},
    {"all i64", {COLL_I64, COLL_I64, COLL_I64, COLL_I64}, COLL_I64},
    {"one f64 among f16", {COLL_F16, COLL_F16, COLL_F64, COLL_F16}, COLL_F64},
    {"f64 and bf16", {COLL_F64, COLL_BF16, COLL_BF16, COLL_F32}, COLL_F64},
    {"f16 and bf16", {COLL_F16, COLL_BF16, COLL_F16, COLL_BF16}, COLL_F32},
    {"f16 and f32", {COLL_F32, COLL_F32, COLL_F32, COLL_F16}, COLL_F32},
    {"bf16 on the last rank",
     {COLL_F16, COLL_F16, COLL_F16, COLL_BF16},
     COLL_F32},
    {"i32 and f16", {COLL_I32, COLL_F16, COLL_F16, COLL_F16}, COLL_F32},
    {"i64 and f64", {COLL_I64, COLL_I64, COLL_F64, COLL_I64}, COLL_F64},
};
#define NNCASES ((int)(sizeof k_ncases / sizeof k_ncases[0]))

static void negotiate_rank(int rank, int world, void *arg) {
  ctx_t *c = arg;
  int i;
  for (i = 0; i < NNCASES; i++) {
    const ncase_t *n = &k_ncases[i];
    coll_dtype_t agreed = COLL_DTYPE_COUNT, want = n->want;
    coll_status_t s;
    int r, same = 1;
    /* On smaller worlds the rule applies to the ranks that exist. */
    for (r = 1; r < world; r++) same &= n->local[r] == n->local[0];
    if (world < 4) {
      int any64 = 0;
      for (r = 0; r < world; r++) any64 |= n->local[r] == COLL_F64;
      want = same ? n->local[0] : any64 ? COLL_F64 : COLL_F32;
    }
    s = coll_negotiate_dtype(c->comms[rank], n->local[rank], &agreed);
    if (!t_expect(&c->fails, s, COLL_OK, "negotiate \"%s\" world %d rank %d",
                  n->what, world, rank))
      continue;
    if (agreed != want)
      t_fail(&c->fails,
             "negotiate \"%s\" world %d rank %d: agreed %s, "
             "expected %s",
             n->what, world, rank, coll_dtype_name(agreed),
             coll_dtype_name(want));
  }
  /* The nonblocking form. */
  {
    coll_request_t *req = NULL;
    coll_dtype_t agreed = COLL_DTYPE_COUNT;
    coll_dtype_t local = rank == 0 ? COLL_BF16 : COLL_F16;
    coll_dtype_t want = world == 1 ? COLL_BF16 : COLL_F32;
    if (t_expect(&c->fails,
                 coll_inegotiate_dtype(c->comms[rank], local, &agreed, &req),
                 COLL_OK, "inegotiate_dtype rank %d", rank) &&
        t_expect(&c->fails, coll_wait(req), COLL_OK,
                 "wait(inegotiate_dtype) rank %d", rank) &&
        agreed != want)
      t_fail(&c->fails, "inegotiate_dtype rank %d: agreed %s, expected %s",
             rank, coll_dtype_name(agreed), coll_dtype_name(want));
  }
}

static void test_negotiate(void **state) {
  ctx_t *c = calloc(1, sizeof *c);
  int w;
  (void)state;
  assert_non_null(c);
  t_fail_init(&c->fails);
  for (w = 1; w <= 4; w++) {
    c->world = w;
    assert_int_equal(test_inproc_comms(w, COMM_TIMEOUT_MS, c->comms), 0);
    test_run_ranks(w, negotiate_rank, c, RUN_TIMEOUT_MS, "negotiate_dtype");
    test_destroy_comms(w, c->comms);
  }
  assert_int_equal(t_fail_report(&c->fails, "negotiate_dtype"), 0);
  t_fail_destroy(&c->fails);
  free(c);
}

/* ---- federated averaging ------------------------------------------------- */

#define FED_WORLD 4
#define FED_COUNT 1003
/* Generous against a loaded machine: ranks 0..2 leave a barrier together
 * and arrive at once, rank 3 arrives LATE_MS after the deadline passed. */
#define DEADLINE_MS 1000
#define LATE_MS 1000

typedef struct fed {
  ctx_t c;
  float *res[FED_WORLD][2];
  int parts[FED_WORLD][2];
} fed_t;

static float fed_input(int rank, size_t i, int round) {
  return (float)(rank + 1) * 0.25f + (float)(i % 97) * 0.5f +
         (float)round * 100.0f;
}

static void fed_rank(int rank, int world, void *arg) {
  fed_t *f = arg;
  ctx_t *c = &f->c;
  int round;
  size_t i;
  coll_status_t s;
  for (round = 0; round < 2; round++) {
    float *d = f->res[rank][round];
    for (i = 0; i < FED_COUNT; i++) d[i] = fed_input(rank, i, round);
    s = coll_barrier(c->comms[rank]);
    t_expect(&c->fails, s, COLL_OK, "barrier before round %d rank %d", round,
             rank);
    /* Round 0: the last rank is late. Round 1: everyone is in time. */
    if (round == 0 && rank == world - 1) test_sleep_ms(DEADLINE_MS + LATE_MS);
    f->parts[rank][round] = -1;
    s = coll_federated_average(c->comms[rank], d, FED_COUNT,
                               round == 0 ? DEADLINE_MS : 30000,
                               &f->parts[rank][round]);
    t_expect(&c->fails, s, COLL_OK, "federated_average round %d rank %d", round,
             rank);
    s = coll_barrier(c->comms[rank]);
    t_expect(&c->fails, s, COLL_OK, "barrier after round %d rank %d", round,
             rank);
  }
}

static void fed_check(fed_t *f, int round, int nin) {
  ctx_t *c = &f->c;
  int r;
  size_t i;
  for (r = 0; r < FED_WORLD; r++) {
    if (f->parts[r][round] != nin)
      t_fail(&c->fails,
             "federated_average round %d: rank %d says %d "
             "participants, expected %d",
             round, r, f->parts[r][round], nin);
    if (r > 0 && memcmp(f->res[r][round], f->res[0][round],
                        FED_COUNT * sizeof(float)) != 0)
      t_fail(&c->fails,
             "federated_average round %d: rank %d's mean differs "
             "from rank 0's",
             round, r);
  }
  for (i = 0; i < FED_COUNT; i++) {
    double want = 0.0, got = f->res[0][round][i];
    for (r = 0; r < nin; r++) want += fed_input(r, i, round);
    want /= nin;
    if (fabs(got - want) > 1e-5 * fabs(want) + 1e-6) {
      t_fail(&c->fails,
             "federated_average round %d: element %zu is %.9g, "
             "the mean of ranks 0..%d is %.9g",
             round, i, got, nin - 1, want);
      break;
    }
  }
}

static void test_federated_average(void **state) {
  fed_t *f = calloc(1, sizeof *f);
  int r;
  (void)state;
  assert_non_null(f);
  t_fail_init(&f->c.fails);
  f->c.world = FED_WORLD;
  for (r = 0; r < FED_WORLD; r++) {
    f->res[r][0] = malloc(FED_COUNT * sizeof(float));
    f->res[r][1] = malloc(FED_COUNT * sizeof(float));
    assert_true(f->res[r][0] != NULL && f->res[r][1] != NULL);
  }
  assert_int_equal(test_inproc_comms(FED_WORLD, COMM_TIMEOUT_MS, f->c.comms),
                   0);
  test_run_ranks(FED_WORLD, fed_rank, f, RUN_TIMEOUT_MS, "federated_average");
  test_destroy_comms(FED_WORLD, f->c.comms);
  fed_check(f, 0, FED_WORLD - 1);
  fed_check(f, 1, FED_WORLD);
  for (r = 0; r < FED_WORLD; r++) {
    free(f->res[r][0]);
    free(f->res[r][1]);
  }
  assert_int_equal(t_fail_report(&f->c.fails, "federated_average"), 0);
  t_fail_destroy(&f->c.fails);
  free(f);
}

/* World 1: the mean of one rank is its own data; participants may be NULL. */
static void test_federated_average_single(void **state) {
  coll_comm_t *c[1];
  float d[5] = {1, 2, 3, 4, 5};
  int parts = 0, i;
  (void)state;
  assert_int_equal(test_inproc_comms(1, COMM_TIMEOUT_MS, c), 0);
  assert_int_equal(coll_federated_average(c[0], d, 5, 100, &parts), COLL_OK);
  assert_int_equal(parts, 1);
  for (i = 0; i < 5; i++) assert_true(d[i] == (float)(i + 1));
  assert_int_equal(coll_federated_average(c[0], d, 5, 0, NULL), COLL_OK);
  test_destroy_comms(1, c);
}

/* ---- barrier ------------------------------------------------------------- */

#define BARRIER_ROUNDS 30

typedef struct bar {
  ctx_t c;
  atomic_int arrived;
} bar_t;

/* Each round every rank counts itself in, then waits in the barrier; after
 * it, all ranks of this round must have counted in, and no rank can have
 * counted in for the round after next. One rank per round is slow. */
static void barrier_rank(int rank, int world, void *arg) {
  bar_t *b = arg;
  int k;
  for (k = 0; k < BARRIER_ROUNDS; k++) {
    int n;
    coll_status_t s;
    if (k % world == rank) test_sleep_ms(5);
    atomic_fetch_add(&b->arrived, 1);
    if (k % 3 == 2) {
      coll_request_t *req = NULL;
      s = coll_ibarrier(b->c.comms[rank], &req);
      if (s == COLL_OK) s = coll_wait(req);
    } else {
      s = coll_barrier(b->c.comms[rank]);
    }
    if (!t_expect(&b->c.fails, s, COLL_OK, "barrier round %d rank %d", k, rank))
      return;
    n = atomic_load(&b->arrived);
    if (n < world * (k + 1) || n > world * (k + 2))
      t_fail(&b->c.fails,
             "barrier round %d rank %d: %d ranks counted in "
             "after it, expected %d..%d",
             k, rank, n, world * (k + 1), world * (k + 2));
  }
}

static void test_barrier(void **state) {
  static const int worlds[] = {1, 2, 3, 5, 8};
  bar_t *b = calloc(1, sizeof *b);
  int i;
  (void)state;
  assert_non_null(b);
  t_fail_init(&b->c.fails);
  for (i = 0; i < 5; i++) {
    b->c.world = worlds[i];
    atomic_init(&b->arrived, 0);
    assert_int_equal(test_inproc_comms(b->c.world, COMM_TIMEOUT_MS, b->c.comms),
                     0);
    test_run_ranks(b->c.world, barrier_rank, b, RUN_TIMEOUT_MS, "barrier");
    test_destroy_comms(b->c.world, b->c.comms);
  }
  assert_int_equal(t_fail_report(&b->c.fails, "barrier"), 0);
  t_fail_destroy(&b->c.fails);
  free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_negotiate),
      cmocka_unit_test(test_federated_average),
      cmocka_unit_test(test_federated_average_single),
      cmocka_unit_test(test_barrier),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
