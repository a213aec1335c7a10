/* SPDX-License-Identifier: Apache-2.0 */
/* test_finish.c: AVG's finishing steps: float scaling (every instruction
 * set against the reference), integer division, exact 8-bit widen/narrow. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "reduce/reduce_impl.h"
#include "ref.h"
#include "test_util.h"
#include "tests.h"

#define GUARD 64 /* bytes after the data no kernel may touch */
#define GUARD_BYTE 0xa5

static const coll_dtype_t float_dtypes[] = {COLL_F16, COLL_BF16, COLL_F32,
                                            COLL_F64};
/* 1/world for small worlds, exact halvings (ties in the denormal range),
 * a negative factor, an underflowing and an overflowing one. */
static const double factors[] = {1.0,     0.5,   1.0 / 3, 0.25,  1.0 / 5,
                                 1.0 / 6, 0.125, -1.5,    1e-30, 7e4};
static const size_t lengths[] = {0, 1, 7, 8, 15, 16, 17, 33, 100, 1025};

/* One dtype, factor and length: ref, then every instruction set through
 * coll__scale_fn_isa, then the public entry points. */
static void check_scale(coll_dtype_t dt, double factor, size_t n,
                        uint64_t *rng) {
  size_t size = coll_dtype_size(dt), bytes = n * size;
  unsigned char *src = malloc(bytes + 1), *junk = malloc(bytes + 1),
                *want = malloc(bytes + 1), *got = malloc(bytes + GUARD);
  assert_true(src && junk && want && got);
  ref_fill_pairs(dt, src, junk, n, rng);
  ref_scale(dt, want, src, n, factor);
  for (int i = 0; i < 3; i++) {
    coll_scale_fn_t fn = coll__scale_fn_isa(test_isas[i], dt);
    if (fn == NULL) continue;
    memset(got, GUARD_BYTE, bytes + GUARD);
    fn(got, src, n, factor);
    if (test_first_diff(got, want, n, size) >= 0)
      fail_msg("%s scale %s by %g, n=%zu: element %ld wrong", test_isas[i],
               coll_dtype_name(dt), factor, n,
               test_first_diff(got, want, n, size));
    for (size_t k = bytes; k < bytes + GUARD; k++)
      if (got[k] != GUARD_BYTE)
        fail_msg("%s scale %s, n=%zu: wrote past the end", test_isas[i],
                 coll_dtype_name(dt), n);
  }
  memcpy(got, src, bytes);
  assert_int_equal(coll__scale(dt, got, n, factor), 0);
  assert_int_equal(test_first_diff(got, want, n, size), -1);
  memcpy(junk, src, bytes);
  assert_int_equal(coll__scale_copy(dt, got, src, n, factor), 0);
  assert_int_equal(test_first_diff(got, want, n, size), -1);
  assert_memory_equal(src, junk, bytes); /* the source is left alone */
  free(src);
  free(junk);
  free(want);
  free(got);
}

static void test_scale(void **state) {
  uint64_t rng = 404;
  (void)state;
  for (size_t d = 0; d < 4; d++)
    for (size_t f = 0; f < sizeof factors / sizeof *factors; f++)
      for (size_t k = 0; k < sizeof lengths / sizeof *lengths; k++)
        check_scale(float_dtypes[d], factors[f], lengths[k], &rng);
}

static void test_scale_rejects_integers(void **state) {
  int32_t x[4] = {1, 2, 3, 4}, y[4] = {0};
  (void)state;
  assert_int_equal(coll__scale(COLL_I32, x, 4, 0.5), -1);
  assert_int_equal(coll__scale_copy(COLL_I8, y, x, 4, 0.5), -1);
  assert_int_equal(coll__scale(COLL_DTYPE_COUNT, x, 4, 0.5), -1);
  assert_int_equal(x[0] + x[1] + x[2] + x[3], 10);
  assert_int_equal(y[0] | y[1] | y[2] | y[3], 0);
  assert_null(coll__scale_fn(COLL_U8));
}

/* Truncation toward zero, written without C's division of negatives. */
static int64_t trunc_div(int64_t a, int64_t n) {
  uint64_t m = a < 0 ? (uint64_t)0 - (uint64_t)a : (uint64_t)a;
  uint64_t q = m / (uint64_t)n;
  return a < 0 ? (int64_t)((uint64_t)0 - q) : (int64_t)q;
}

static void test_int_div(void **state) {
  int32_t a[] = {7, -7, 6, -6, 1, -1, 0, INT32_MIN, INT32_MAX, -5};
  int64_t b[] = {7, -7, INT64_MIN, INT64_MAX, -1, 0, 5, -5, 3, -3};
  const int32_t a2[] = {3, -3, 3, -3, 0, 0, 0, -1073741824, 1073741823, -2};
  uint64_t rng = 505;
  (void)state;
  assert_int_equal(coll__int_div(COLL_I32, a, 10, 2), 0);
  assert_memory_equal(a, a2, sizeof a);
  for (int n = 1; n <= 9; n++) {
    int64_t x[64], want[64];
    for (int i = 0; i < 64; i++) {
      x[i] = i < 10 ? b[i] : (int64_t)test_rand(&rng) >> (i % 60);
      want[i] = trunc_div(x[i], n);
    }
    assert_int_equal(coll__int_div(COLL_I64, x, 64, n), 0);
    assert_memory_equal(x, want, sizeof x);
  }
  assert_int_equal(coll__int_div(COLL_F32, a, 10, 2), -1);
  assert_int_equal(coll__int_div(COLL_I8, a, 10, 2), -1);
  assert_int_equal(coll__int_div(COLL_I32, a, 10, 0), -1);
  assert_memory_equal(a, a2, sizeof a);
}

static void test_widen_8bit(void **state) {
  int8_t s8[256];
  uint8_t u8[256];
  int32_t w[256];
  (void)state;
  for (int i = 0; i < 256; i++) {
    s8[i] = (int8_t)(i - 128);
    u8[i] = (uint8_t)i;
  }
  coll__widen_8bit(COLL_I8, w, s8, 256);
  for (int i = 0; i < 256; i++) assert_int_equal(w[i], i - 128);
  coll__widen_8bit(COLL_U8, w, u8, 256);
  for (int i = 0; i < 256; i++) assert_int_equal(w[i], i);
}

static void test_narrow_8bit_sum(void **state) {
  const int32_t sums[] = {0,   1,   -1,     127,     128,       -128,     -129,
                          255, 256, 100000, -100000, INT32_MAX, INT32_MIN};
  const int8_t want_i8[] = {0,   1,   -1,  127,  127, -128, -128,
                            127, 127, 127, -128, 127, -128};
  const uint8_t want_u8[] = {0, 1, 0, 127, 128, 0, 0, 255, 255, 255, 0, 255, 0};
  int8_t i8[13];
  uint8_t u8[13];
  (void)state;
  coll__narrow_8bit(COLL_I8, COLL_SUM, i8, sums, 13, 4);
  assert_memory_equal(i8, want_i8, 13);
  coll__narrow_8bit(COLL_U8, COLL_SUM, u8, sums, 13, 4);
  assert_memory_equal(u8, want_u8, 13);
}

/* AVG: rounded to nearest, ties away from zero: 2.5 -> 3, -2.5 -> -3. */
static void test_narrow_8bit_avg(void **state) {
  const int32_t sums[] = {5, -5, 3, -3, 7, -7, 9, -9, 0, 508, -512, 1020};
  const int8_t want_2[] = {3, -3, 2, -2, 4, -4, 5, -5, 0, 127, -128, 127};
  const int8_t want_4[] = {1, -1, 1, -1, 2, -2, 2, -2, 0, 127, -128, 127};
  int8_t got[12];
  uint64_t rng = 606;
  (void)state;
  coll__narrow_8bit(COLL_I8, COLL_AVG, got, sums, 12, 2);
  assert_memory_equal(got, want_2, 12);
  coll__narrow_8bit(COLL_I8, COLL_AVG, got, sums, 12, 4);
  assert_memory_equal(got, want_4, 12);
  /* Exact 8-bit averages of world random arrays, against round(). */
  for (int world = 1; world <= 9; world++) {
    for (int u = 0; u < 2; u++) {
      coll_dtype_t dt = u ? COLL_U8 : COLL_I8;
      int32_t acc[200] = {0}, w[200];
      uint8_t in[200], out[200];
      for (int r = 0; r < world; r++) {
        for (int i = 0; i < 200; i++) in[i] = (uint8_t)test_rand(&rng);
        coll__widen_8bit(dt, w, in, 200);
        for (int i = 0; i < 200; i++) acc[i] += w[i];
      }
      coll__narrow_8bit(dt, COLL_AVG, out, acc, 200, world);
      for (int i = 0; i < 200; i++) {
        int want = (int)round((double)acc[i] / world); /* ties away */
        int have = u ? out[i] : (int8_t)out[i];
        if (have != want)
          fail_msg("%s avg of %d over %d: got %d, want %d", coll_dtype_name(dt),
                   acc[i], world, have, want);
      }
    }
  }
}

int test_finish_run(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scale),
      cmocka_unit_test(test_scale_rejects_integers),
      cmocka_unit_test(test_int_div),
      cmocka_unit_test(test_widen_8bit),
      cmocka_unit_test(test_narrow_8bit_sum),
      cmocka_unit_test(test_narrow_8bit_avg),
  };
  return cmocka_run_group_tests_name("AVG finish", tests, NULL, NULL);
}
