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
#include <string.h>

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
  cs[k] = (at_case_t){kind, count, dt, op, seg, 0, random, 0};
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

/* Segments grow for long blocks, to seg_max and no further: 3 ranks over
 * the rendezvous mailbox, f32 ring allreduce with 1 KiB segments that may
 * grow to 4 KiB (ring.c: an eighth of the longest block). Each case runs
 * on its own, and the messages delivered are counted against the segments
 * the rule cuts, with the results checked as everywhere else. */
static void test_ring_segments_grow(void **state) {
  enum { N = 3, SEG = 1024, SEG_MAX = 4096 };
  static const struct {
    size_t count;   /* f32 elements */
    size_t seg_max; /* bytes */
    size_t segs;    /* segments per block the rule gives */
  } k[] = {
      {N * 1024, SEG_MAX, 4},     /* 4 KiB blocks: an eighth is below SEG */
      {N * 4096, SEG_MAX, 8},     /* 16 KiB: an eighth, 2 KiB */
      {N * 16384, SEG_MAX, 16},   /* 64 KiB: an eighth is 8 KiB, capped */
      {N * 16384, 0, 64},         /* no seg_max: fixed */
      {N * 16384, SEG / 2, 64},   /* a seg_max below seg: fixed */
      {N * 4100 + 2, SEG_MAX, 9}, /* blocks of 4101, 4101 and 4100
                                     elements: 512-element segments */
  };
  at_world_t w;
  size_t i, failed = 0;
  (void)state;
  assert_int_equal(at_open(&w, N, AT_MBOX_RDV), 0);
  for (i = 0; i < sizeof k / sizeof k[0]; i++) {
    at_case_t c = {AT_AR_RING, k[i].count, COLL_F32, COLL_SUM,
                   SEG,        0,          0,        k[i].seg_max};
    at_out_t out[N];
    size_t before = mbox_messages(w.mb), got;
    /* 2(N-1) steps, in each of which every rank sends one block. */
    size_t want = (size_t)N * 2 * (N - 1) * k[i].segs;
    memset(out, 0, sizeof out);
    at_run_cases(&w, &c, 1, out, 60000);
    failed += at_report(&w, &c, 1, out);
    got = mbox_messages(w.mb) - before;
    if (got != want) {
      fprintf(stderr, "count %zu, seg_max %zu: %zu messages, not %zu\n",
              k[i].count, k[i].seg_max, got, want);
      failed++;
    }
  }
  failed += at_close(&w);
  assert_int_equal(failed, 0);
}

/* Two ranks weave the ring's passes into one stream (allreduce_pair.c):
 * with 256 KiB segments two raw segments lead, and each reduced segment
 * follows the next raw one. f32 sums of 8 segments' worth plus one
 * element: half 0 (reduced by rank 1) is 4 segments and 1 element, half 1
 * is 4 segments. Rank 0 sends X0 X1 X2 R0 X3 R1 X4 R2 R3: its one-element
 * message, X4, is its seventh (the ring sends all five raw segments first,
 * X4 fifth). Over every transport, the mailbox ones logging the order;
 * more counts and dtypes where the halves' segments differ in number and
 * one half is empty, the results checked against the serial ones. */
static void test_ring_pair_weave(void **state) {
  enum { SEG = 256 << 10, E = SEG / 4 };
  static const at_case_t cases[] = {
      {AT_AR_RING, 8 * E + 1, COLL_F32, COLL_SUM, SEG, 0, 1, 0},
      {AT_AR_RING, 8 * E + 1, COLL_F32, COLL_MAX, SEG, 0, 0, 0},
      {AT_AR_RING, 40 * E + 3, COLL_F16, COLL_SUM, SEG, 0, 1, 0},
      {AT_AR_RING, 6 * E - 1, COLL_BF16, COLL_MIN, SEG, 0, 0, 0},
      {AT_AR_RING, 3 * E, COLL_F64, COLL_SUM, SEG, 0, 1, 0},
      {AT_AR_RING, 17 * E + 5, COLL_I8, COLL_MAX, 4096, 0, 0, 0},
      {AT_AR_RING, 1, COLL_F32, COLL_SUM, SEG, 0, 0, 0},
      {AT_AR_RING, 2 * E + 1, COLL_I64, COLL_PROD, 8, 0, 0, 0},
  };
  size_t failed = 0;
  int tp;
  (void)state;
  for (tp = 0; tp < AT_NTP; tp++) {
    at_world_t w;
    at_out_t out[2];
    size_t lens[16], n, i, want = 6;
    assert_int_equal(at_open(&w, 2, (at_tp_t)tp), 0);
    memset(out, 0, sizeof out);
    at_run_cases(&w, &cases[0], 1, out, 60000);
    failed += at_report(&w, &cases[0], 1, out);
    if (w.mb != NULL) {
      n = mbox_sent_lengths(w.mb, 0, lens, 16);
      for (i = 0; i < n && i < 16 && lens[i] != 4; i++) continue;
      if (n != 9 || i != want) {
        fprintf(stderr,
                "%s: rank 0 sent %zu messages, the 4-byte one %zu-th"
                " (want 9, and %zu-th)\n",
                at_tp_name((at_tp_t)tp), n, i + 1, want + 1);
        failed++;
      }
    }
    failed += at_close(&w);
    failed += at_run_world((at_tp_t)tp, 2, cases + 1,
                           sizeof cases / sizeof cases[0] - 1);
  }
  assert_int_equal(failed, 0);
}

/* The ring with rounds bounded in bytes (what two ranks run in a build
 * without the weave): at 256 KiB segments a round is two segments of
 * each block, so these counts take many rounds, a short last one, and
 * halves whose segments differ in number; worlds of 2 and 3, over every
 * transport, against the serial results. */
static void test_ring_bounded_rounds(void **state) {
  enum { SEG = 256 << 10, E = SEG / 4 };
  static const at_case_t cases[] = {
      {AT_AR_RING_BOUNDED, 8 * E + 1, COLL_F32, COLL_SUM, SEG, 0, 1, 0},
      {AT_AR_RING_BOUNDED, 40 * E + 3, COLL_F16, COLL_SUM, SEG, 0, 1, 0},
      {AT_AR_RING_BOUNDED, 6 * E - 1, COLL_BF16, COLL_MIN, SEG, 0, 0, 0},
      {AT_AR_RING_BOUNDED, 3 * E, COLL_F64, COLL_SUM, SEG, 0, 1, 0},
      {AT_AR_RING_BOUNDED, 1, COLL_F32, COLL_SUM, SEG, 0, 0, 0},
      {AT_AR_RING_BOUNDED, 2 * E + 1, COLL_I64, COLL_PROD, 1 << 20, 0, 0, 0},
  };
  size_t failed = 0;
  int tp, n;
  (void)state;
  for (tp = 0; tp < AT_NTP; tp++)
    for (n = 2; n <= 3; n++)
      if (at_world_wanted((at_tp_t)tp, n))
        failed +=
            at_run_world((at_tp_t)tp, n, cases, sizeof cases / sizeof cases[0]);
  assert_int_equal(failed, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_allreduce_ring),
      cmocka_unit_test(test_allreduce_rd),
      cmocka_unit_test(test_allreduce_rh),
      cmocka_unit_test(test_reduce_scatter_ring),
      cmocka_unit_test(test_allgather_ring),
      cmocka_unit_test(test_ring_segments_grow),
      cmocka_unit_test(test_ring_pair_weave),
      cmocka_unit_test(test_ring_bounded_rounds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
