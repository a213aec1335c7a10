/* SPDX-License-Identifier: Apache-2.0 */
/* test_algo_ring.c: ring, recursive-doubling and halving-doubling
 * allreduce, ring reduce-scatter and ring allgather on 1..8 rank threads,
 * over the in-process transport and the test mailbox (rendezvous and
 * eager), for every dtype and op, counts around the world size and a
 * large odd one, tiny segments (many per block) and large ones. Results
 * are compared with the test's own reference and, where promised, bit for
 * bit across ranks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "algo_test.h"
#include "test_util.h"

#define MAX_CASES 2048
#define SEG_TINY 64u
#define SEG_BIG (1u << 20)
#define BIG_COUNT 100003u

static const coll_dtype_t all_dt[] = {COLL_F16, COLL_BF16, COLL_F32, COLL_F64,
                                      COLL_I8,  COLL_U8,   COLL_I32, COLL_I64};
static const coll_op_t all_op[] = {COLL_SUM, COLL_PROD, COLL_MAX, COLL_MIN};
static const coll_dtype_t float_dt[] = {COLL_F16, COLL_BF16, COLL_F32,
                                        COLL_F64};

static size_t add(at_case_t *cs, size_t k, at_kind_t kind, size_t count,
                  coll_dtype_t dt, coll_op_t op, size_t seg, int random) {
  if (k >= MAX_CASES) return k;
  cs[k] = (at_case_t){kind, count, dt, op, seg, 0, random};
  return k + 1;
}

/* The algorithms see a dtype only through its size and its kernel: one
 * dtype per element size, with a sum and a max, at counts 0, 1, n-1, n+1
 * and 1000, with tiny and big segments; every dtype and op at n+1; random
 * float sums; and a few large odd counts. */
static size_t reduce_cases(at_case_t *cs, at_kind_t kind, int n, int big) {
  static const coll_dtype_t by_size[] = {COLL_I8, COLL_F16, COLL_F32, COLL_F64};
  static const coll_op_t two_ops[] = {COLL_SUM, COLL_MAX};
  /* The reduce-scatter's count is per rank: its buffer is n times it. */
  size_t many = kind == AT_RS ? 1000 / (size_t)n + 3 : 1000;
  size_t counts[] = {0, 1, (size_t)n - 1, (size_t)n + 1, many};
  size_t k = 0, ci, d, o;
  for (ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
    for (d = 0; d < sizeof by_size / sizeof by_size[0]; d++)
      for (o = 0; o < 2; o++) {
        k = add(cs, k, kind, counts[ci], by_size[d], two_ops[o], SEG_TINY, 0);
        k = add(cs, k, kind, counts[ci], by_size[d], two_ops[o], SEG_BIG, 0);
      }
  for (d = 0; d < sizeof all_dt / sizeof all_dt[0]; d++)
    for (o = 0; o < sizeof all_op / sizeof all_op[0]; o++)
      if (at_has_kernel(all_dt[d], all_op[o]))
        k = add(cs, k, kind, (size_t)n + 1, all_dt[d], all_op[o], SEG_TINY, 0);
  for (d = 0; d < sizeof float_dt / sizeof float_dt[0]; d++) {
    k = add(cs, k, kind, (size_t)n + 1, float_dt[d], COLL_SUM, SEG_TINY, 1);
    k = add(cs, k, kind, many, float_dt[d], COLL_SUM, 100, 1);
    k = add(cs, k, kind, many * 4 + 99, float_dt[d], COLL_SUM, SEG_BIG, 1);
  }
  /* A segment smaller than one element still moves whole elements. */
  k = add(cs, k, kind, many, COLL_F16, COLL_SUM, 3, 0);
  if (big) {
    size_t bc = kind == AT_RS ? BIG_COUNT / (size_t)n : BIG_COUNT;
    k = add(cs, k, kind, bc, COLL_F32, COLL_SUM, 4096, 0);
    k = add(cs, k, kind, bc, COLL_I32, COLL_MAX, SEG_BIG, 0);
    k = add(cs, k, kind, bc, COLL_BF16, COLL_MIN, 1000, 0);
    k = add(cs, k, kind, bc, COLL_F64, COLL_SUM, 8192, 1);
  }
  return k;
}

static size_t allgather_cases(at_case_t *cs, int n, int big) {
  size_t counts[] = {0, 1, 3, (size_t)n + 1, 1000};
  size_t k = 0, ci;
  for (ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
    k = add(cs, k, AT_AG, counts[ci], COLL_U8, COLL_SUM, SEG_TINY, 0);
    k = add(cs, k, AT_AG, counts[ci], COLL_F32, COLL_SUM, SEG_TINY, 0);
    k = add(cs, k, AT_AG, counts[ci], COLL_F64, COLL_SUM, SEG_BIG, 0);
    k = add(cs, k, AT_AG, counts[ci], COLL_U8, COLL_SUM, 1, 0);
  }
  if (big) {
    k = add(cs, k, AT_AG, BIG_COUNT, COLL_F32, COLL_SUM, 4096, 0);
    k = add(cs, k, AT_AG, BIG_COUNT, COLL_U8, COLL_SUM, SEG_BIG, 0);
  }
  return k;
}

/* Runs the cases for world sizes 1..8 over every transport. */
static void run_worlds(size_t (*make)(at_case_t *, at_kind_t, int, int),
                       at_kind_t kind) {
  at_case_t *cs = calloc(MAX_CASES, sizeof *cs);
  size_t failed = 0;
  int n, tp;
  assert_non_null(cs);
  for (tp = 0; tp < AT_NTP; tp++)
    for (n = 1; n <= AT_MAXW; n++) {
      if (!at_world_wanted((at_tp_t)tp, n)) continue;
      /* The large counts at a few sizes only: they cost the most. */
      int big = n == 3 || (n == 8 && tp == AT_INPROC) ||
                (n == 5 && tp == AT_MBOX_RDV && !at_quick());
      failed += at_run_world((at_tp_t)tp, n, cs, make(cs, kind, n, big));
    }
  free(cs);
  assert_int_equal(failed, 0);
}

static size_t make_reduce(at_case_t *cs, at_kind_t kind, int n, int big) {
  return reduce_cases(cs, kind, n, big);
}

static size_t make_allgather(at_case_t *cs, at_kind_t kind, int n, int big) {
  (void)kind;
  return allgather_cases(cs, n, big);
}

static void test_allreduce_ring(void **state) {
  (void)state;
  run_worlds(make_reduce, AT_AR_RING);
}

static void test_allreduce_rd(void **state) {
  (void)state;
  run_worlds(make_reduce, AT_AR_RD);
}

static void test_allreduce_rh(void **state) {
  (void)state;
  run_worlds(make_reduce, AT_AR_RH);
}

static void test_reduce_scatter_ring(void **state) {
  (void)state;
  run_worlds(make_reduce, AT_RS);
}

static void test_allgather_ring(void **state) {
  (void)state;
  run_worlds(make_allgather, AT_AG);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_allreduce_ring),
      cmocka_unit_test(test_allreduce_rd),
      cmocka_unit_test(test_allreduce_rh),
      cmocka_unit_test(test_reduce_scatter_ring),
      cmocka_unit_test(test_allgather_ring),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
