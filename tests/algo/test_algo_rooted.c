/* SPDX-License-Identifier: Apache-2.0 */
/* test_algo_rooted.c: broadcast (tree and pipelined chain), reduce (tree,
 * and ring reduce-scatter plus gather) and barrier on 1..8 rank threads,
 * every root position, over the in-process transport and the test mailbox
 * (rendezvous and eager). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "algo_test.h"
#include "test_util.h"

#define MAX_CASES 2048

static const coll_dtype_t all_dt[] = {COLL_F16, COLL_BF16, COLL_F32, COLL_F64,
                                      COLL_I8,  COLL_U8,   COLL_I32, COLL_I64};
static const coll_op_t all_op[] = {COLL_SUM, COLL_PROD, COLL_MAX, COLL_MIN};

static size_t add(at_case_t *cs, size_t k, at_kind_t kind, size_t count,
                  coll_dtype_t dt, coll_op_t op, size_t seg, int root,
                  int random) {
  if (k >= MAX_CASES) return k;
  cs[k] = (at_case_t){kind, count, dt, op, seg, root, random, 0};
  return k + 1;
}

/* Roots at the ends and in the middle. */
static int roots(int n, int *r) {
  int k = 0;
  r[k++] = 0;
  if (n > 1) r[k++] = n - 1;
  if (n > 2) r[k++] = n / 2;
  return k;
}

/* Byte counts around the tree/chain switch (64 KiB) and a large odd one. */
static size_t bcast_cases(at_case_t *cs, int n) {
  size_t small[] = {0, 1, 7, 65535, 65536}, k = 0, i;
  int rs[3], nr = roots(n, rs), j;
  for (j = 0; j < nr; j++) {
    for (i = 0; i < sizeof small / sizeof small[0]; i++) {
      k = add(cs, k, AT_BCAST, small[i], COLL_U8, COLL_SUM, 64, rs[j], 0);
      k = add(cs, k, AT_BCAST, small[i], COLL_U8, COLL_SUM, 1u << 20, rs[j], 0);
    }
    if (j != n % nr) continue; /* the large ones at one root per size */
    k = add(cs, k, AT_BCAST, 100003, COLL_F32, COLL_SUM, 4096, rs[j], 0);
    k = add(cs, k, AT_BCAST, 100003, COLL_F32, COLL_SUM, 1u << 20, rs[j], 0);
  }
  return k;
}

/* One dtype per element size with a sum and a max at small counts, every
 * dtype and op at n+1; f32 around the tree/ring switch (16384 f32 = 64
 * KiB); a large odd count. */
static size_t reduce_cases(at_case_t *cs, int n) {
  static const coll_dtype_t by_size[] = {COLL_I8, COLL_F16, COLL_F32, COLL_F64};
  static const coll_op_t two_ops[] = {COLL_SUM, COLL_MAX};
  size_t counts[] = {0, 1, (size_t)n - 1, (size_t)n + 1}, k = 0, c, d, o;
  int rs[3], nr = roots(n, rs), j;
  for (d = 0; d < sizeof all_dt / sizeof all_dt[0]; d++)
    for (o = 0; o < sizeof all_op / sizeof all_op[0]; o++)
      if (at_has_kernel(all_dt[d], all_op[o]))
        k = add(cs, k, AT_REDUCE, (size_t)n + 1, all_dt[d], all_op[o], 64,
                n - 1, 0);
  for (j = 0; j < nr; j++) {
    for (c = 0; c < sizeof counts / sizeof counts[0]; c++)
      for (d = 0; d < sizeof by_size / sizeof by_size[0]; d++)
        for (o = 0; o < 2; o++)
          k = add(cs, k, AT_REDUCE, counts[c], by_size[d], two_ops[o], 64,
                  rs[j], 0);
    k = add(cs, k, AT_REDUCE, 16383, COLL_F32, COLL_SUM, 256, rs[j], 0);
    k = add(cs, k, AT_REDUCE, 16384, COLL_F32, COLL_SUM, 256, rs[j], 0);
    k = add(cs, k, AT_REDUCE, 16384 + 3, COLL_I64, COLL_MIN, 1u << 20, rs[j],
            0);
    if (j != n % nr) continue; /* the large ones at one root per size */
    k = add(cs, k, AT_REDUCE, 100003, COLL_F32, COLL_SUM, 8192, rs[j], 1);
    k = add(cs, k, AT_REDUCE, 100003, COLL_BF16, COLL_MAX, 1u << 20, rs[j], 0);
  }
  return k;
}

static size_t barrier_cases(at_case_t *cs, int n) {
  size_t k = 0;
  int i;
  (void)n;
  for (i = 0; i < 4; i++)
    k = add(cs, k, AT_BARRIER, 0, COLL_U8, COLL_SUM, 64, 0, 0);
  return k;
}

static void run_worlds(size_t (*make)(at_case_t *, int)) {
  at_case_t *cs = calloc(MAX_CASES, sizeof *cs);
  size_t failed = 0;
  int n, tp;
  assert_non_null(cs);
  for (tp = 0; tp < AT_NTP; tp++)
    for (n = 1; n <= AT_MAXW; n++) {
      if (!at_world_wanted((at_tp_t)tp, n)) continue;
      failed += at_run_world((at_tp_t)tp, n, cs, make(cs, n));
    }
  free(cs);
  assert_int_equal(failed, 0);
}

static void test_broadcast(void **state) {
  (void)state;
  run_worlds(bcast_cases);
}

static void test_reduce(void **state) {
  (void)state;
  run_worlds(reduce_cases);
}

static void test_barrier(void **state) {
  (void)state;
  run_worlds(barrier_cases);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_broadcast),
      cmocka_unit_test(test_reduce),
      cmocka_unit_test(test_barrier),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
