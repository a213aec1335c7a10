/* SPDX-License-Identifier: Apache-2.0 */
/* test_kernels.c: every (dtype, op) kernel: the scalar one against the
 * test's reference, every SIMD one (and the dispatched one) against the
 * scalar one, bit for bit, over many lengths and alignments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/env.h"
#include "reduce/reduce_impl.h"
#include "ref.h"
#include "test_util.h"
#include "tests.h"

#define GUARD 64 /* bytes after the data no kernel may touch */
#define GUARD_BYTE 0xa5
#define MAX_SHORT 70 /* every length 0..MAX_SHORT, then these */
#define N_LONG 4     /* test_quick() runs the first two */
static const size_t long_lengths[N_LONG] = {127, 1001, 4099, 65537};

static const coll_dtype_t all_dtypes[] = {COLL_F16, COLL_BF16, COLL_F32,
                                          COLL_F64, COLL_I8,   COLL_U8,
                                          COLL_I32, COLL_I64};

/* Buffers for one case: inputs a (dst) and b (src), the expected result,
 * and a work buffer placed `off` bytes into its allocation (a multiple of
 * the element size: C requires element alignment, vectors do not). */
typedef struct {
  size_t n, size, off;
  unsigned char *a, *b, *want, *work_mem, *work;
} bufs_t;

static void bufs_init(bufs_t *t, coll_dtype_t dt, size_t n, size_t off) {
  t->n = n;
  t->size = coll_dtype_size(dt);
  t->off = off;
  t->a = malloc(n * t->size + 1);
  t->b = malloc(n * t->size + 1);
  t->want = malloc(n * t->size + 1);
  t->work_mem = malloc(off + n * t->size + GUARD);
  assert_non_null(t->a);
  assert_non_null(t->b);
  assert_non_null(t->want);
  assert_non_null(t->work_mem);
  t->work = t->work_mem + off;
}

static void bufs_free(bufs_t *t) {
  free(t->a);
  free(t->b);
  free(t->want);
  free(t->work_mem);
}

static void print_elem(const char *what, const unsigned char *p, size_t size) {
  printf(" %s=0x", what);
  for (size_t k = size; k-- > 0;) printf("%02x", p[k]);
}

/* Runs fn on a copy of a (dst) and b (src) and compares with want. */
static void check_kernel(const bufs_t *t, coll_reduce_fn_t fn, coll_dtype_t dt,
                         coll_op_t op, const char *what) {
  size_t bytes = t->n * t->size;
  long bad;
  memcpy(t->work, t->a, bytes);
  memset(t->work + bytes, GUARD_BYTE, GUARD);
  fn(t->work, t->b, t->n);
  bad = test_first_diff(t->work, t->want, t->n, t->size);
  if (bad >= 0) {
    size_t o = (size_t)bad * t->size;
    printf("%s %s %s n=%zu: element %ld:", what, coll_dtype_name(dt),
           coll_op_name(op), t->n, bad);
    print_elem("dst", t->a + o, t->size);
    print_elem("src", t->b + o, t->size);
    print_elem("got", t->work + o, t->size);
    print_elem("want", t->want + o, t->size);
    printf("\n");
    fail_msg("%s: wrong result", what);
  }
  for (size_t k = 0; k < GUARD; k++)
    if (t->work[bytes + k] != GUARD_BYTE)
      fail_msg("%s %s %s n=%zu: wrote %zu bytes past the end", what,
               coll_dtype_name(dt), coll_op_name(op), t->n, k + 1);
}

/* One (dt, op, n): scalar against the reference, then every instruction
 * set and the dispatched kernel against the scalar result. */
static void check_case(coll_dtype_t dt, coll_op_t op, size_t n) {
  uint64_t rng = 0x5eed0000u ^ ((uint64_t)dt << 40) ^ ((uint64_t)op << 32) ^ n;
  bufs_t t;
  bufs_init(&t, dt, n, (n % 3) * coll_dtype_size(dt)); /* vector-unaligned */
  ref_fill_pairs(dt, t.a, t.b, n, &rng);
  memcpy(t.want, t.a, n * t.size);
  ref_reduce(dt, op, t.want, t.b, n);
  check_kernel(&t, coll__reduce_fn_scalar(dt, op), dt, op, "scalar vs ref");
  memcpy(t.want, t.work, n * t.size);
  for (int i = 1; i < 3; i++) {
    coll_reduce_fn_t fn = coll__reduce_fn_isa(test_isas[i], dt, op);
    if (fn == NULL) {
      test_note_missing_isa(test_isas[i]);
      continue;
    }
    check_kernel(&t, fn, dt, op, test_isas[i]);
  }
  check_kernel(&t, coll__reduce_fn(dt, op), dt, op, "dispatched");
  bufs_free(&t);
}

static void check_dtype(coll_dtype_t dt) {
  for (int op = COLL_SUM; op <= COLL_MIN; op++) {
    for (size_t n = 0; n <= MAX_SHORT; n++) check_case(dt, (coll_op_t)op, n);
    for (size_t k = 0; k < (test_quick() ? 2 : N_LONG); k++)
      check_case(dt, (coll_op_t)op, long_lengths[k]);
  }
}

#define DTYPE_TEST(name, dt)       \
  static void name(void **state) { \
    (void)state;                   \
    check_dtype(dt);               \
  }
DTYPE_TEST(test_f16, COLL_F16)
DTYPE_TEST(test_bf16, COLL_BF16)
DTYPE_TEST(test_f32, COLL_F32)
DTYPE_TEST(test_f64, COLL_F64)
DTYPE_TEST(test_i8, COLL_I8)
DTYPE_TEST(test_u8, COLL_U8)
DTYPE_TEST(test_i32, COLL_I32)
DTYPE_TEST(test_i64, COLL_I64)

/* dst == src is allowed: x OP x. */
static void test_in_place(void **state) {
  (void)state;
  for (size_t d = 0; d < sizeof all_dtypes / sizeof *all_dtypes; d++) {
    coll_dtype_t dt = all_dtypes[d];
    size_t size = coll_dtype_size(dt), n = 133;
    for (int op = COLL_SUM; op <= COLL_MIN; op++) {
      uint64_t rng = 77 + (uint64_t)d * 8 + (uint64_t)op;
      unsigned char *x = malloc(n * size), *y = malloc(n * size),
                    *want = malloc(n * size), *got = malloc(n * size);
      assert_true(x != NULL && y != NULL && want != NULL && got != NULL);
      ref_fill_pairs(dt, x, y, n, &rng);
      memcpy(want, x, n * size);
      ref_reduce(dt, (coll_op_t)op, want, x, n);
      for (int i = 0; i < 3; i++) {
        coll_reduce_fn_t fn = coll__reduce_fn_isa(test_isas[i], dt, op);
        if (fn == NULL) continue;
        memcpy(got, x, n * size);
        fn(got, got, n);
        if (test_first_diff(got, want, n, size) >= 0)
          fail_msg("%s %s %s in place: wrong result", test_isas[i],
                   coll_dtype_name(dt), coll_op_name(op));
      }
      free(x);
      free(y);
      free(want);
      free(got);
    }
  }
}

/* The rules that make results independent of operand order: any NaN gives
 * the one canonical NaN, and max/min order +0 above -0. Both orders. */
static void test_order_independence(void **state) {
  const float pz = 0.0f, nz = -0.0f;
  uint32_t nan1 = 0x7fc00123u, nan2 = 0xffc00456u, canon = REF_NAN_F32;
  float n1, n2;
  (void)state;
  memcpy(&n1, &nan1, 4);
  memcpy(&n2, &nan2, 4);
  for (int i = 0; i < 3; i++) {
    float a[16], b[16];
    coll_reduce_fn_t sum =
        coll__reduce_fn_isa(test_isas[i], COLL_F32, COLL_SUM);
    coll_reduce_fn_t max =
        coll__reduce_fn_isa(test_isas[i], COLL_F32, COLL_MAX);
    coll_reduce_fn_t min =
        coll__reduce_fn_isa(test_isas[i], COLL_F32, COLL_MIN);
    if (sum == NULL) continue;
    for (int k = 0; k < 16; k++) {
      a[k] = (k & 1) ? n1 : n2; /* 16: a full vector on every path */
      b[k] = (k & 1) ? n2 : n1;
    }
    sum(a, b, 16);
    for (int k = 0; k < 16; k++) assert_memory_equal(&a[k], &canon, 4);
    for (int k = 0; k < 16; k++) {
      a[k] = (k & 1) ? pz : nz;
      b[k] = (k & 1) ? nz : pz;
    }
    max(a, b, 16);
    for (int k = 0; k < 16; k++) assert_memory_equal(&a[k], &pz, 4);
    for (int k = 0; k < 16; k++) b[k] = (k & 1) ? nz : pz;
    min(a, b, 16); /* a is all +0 now */
    for (int k = 0; k < 16; k++)
      assert_memory_equal(&a[k], (k & 1) ? &nz : &pz, 4);
  }
}

/* Threads that race to the first use of the dispatch all get the same,
 * working kernel (this runs before anything else in the executable has
 * called it). Rank threads only record; the test thread asserts. */
typedef struct {
  coll_reduce_fn_t fn[8];
  int ok[8];
} first_use_t;

static void first_use_rank(int rank, int world, void *arg) {
  first_use_t *r = arg;
  float d[37], s[37];
  (void)world;
  r->fn[rank] = coll__reduce_fn(COLL_F32, COLL_SUM);
  for (int i = 0; i < 37; i++) {
    d[i] = (float)i;
    s[i] = (float)(rank + 1);
  }
  r->fn[rank](d, s, 37);
  r->ok[rank] = 1;
  for (int i = 0; i < 37; i++)
    if (d[i] != (float)(i + rank + 1)) r->ok[rank] = 0;
}

static void test_concurrent_first_use(void **state) {
  first_use_t r;
  (void)state;
  memset(&r, 0, sizeof r);
  test_run_ranks(8, first_use_rank, &r, 10000, "first use of the dispatch");
  for (int i = 0; i < 8; i++) {
    assert_true(r.ok[i]);
    assert_ptr_equal(r.fn[i], r.fn[0]);
  }
}

static void test_dispatch(void **state) {
  const char *isa = coll__reduce_isa();
  int best = COLL_ISA_SCALAR;
  (void)state;
  for (int i = 0; i < COLL_ISA_COUNT; i++)
    if (coll__isa_supported((coll_isa_t)i)) best = i;
  assert_true(coll__isa_from_name(isa) >= 0);
  assert_true(coll__isa_supported((coll_isa_t)coll__isa_from_name(isa)));
  /* ctest also runs this executable with COLL_SIMD=scalar, avx2, avx512. */
  assert_int_equal(coll__isa_from_name(isa),
                   coll__isa_pick(coll__knob_word(COLL_ENV_SIMD)));
  assert_int_equal(coll__isa_pick(NULL), best);
  assert_int_equal(coll__isa_pick("auto"), best);
  assert_int_equal(coll__isa_pick("scalar"), COLL_ISA_SCALAR);
  assert_int_equal(coll__isa_pick("no-such-isa"), best);
  assert_int_equal(
      coll__isa_pick("avx512"),
      coll__isa_supported(COLL_ISA_AVX512) ? COLL_ISA_AVX512 : best);
  assert_true(coll__isa_supported(COLL_ISA_SCALAR));
  assert_null(coll__reduce_fn_isa("no-such-isa", COLL_F32, COLL_SUM));
  for (size_t d = 0; d < sizeof all_dtypes / sizeof *all_dtypes; d++) {
    for (int op = COLL_SUM; op <= COLL_MIN; op++) {
      assert_non_null(coll__reduce_fn(all_dtypes[d], (coll_op_t)op));
      assert_non_null(coll__reduce_fn_scalar(all_dtypes[d], (coll_op_t)op));
    }
    assert_null(coll__reduce_fn(all_dtypes[d], COLL_AVG));
    assert_null(coll__reduce_fn_scalar(all_dtypes[d], COLL_AVG));
  }
  assert_null(coll__reduce_fn(COLL_DTYPE_COUNT, COLL_SUM));
  assert_null(coll__reduce_fn((coll_dtype_t)-1, COLL_SUM));
  assert_null(coll__reduce_fn(COLL_F32, COLL_OP_COUNT));
  assert_null(coll__reduce_fn(COLL_F32, (coll_op_t)-1));
}

int test_kernels_run(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_concurrent_first_use),
      cmocka_unit_test(test_f16),
      cmocka_unit_test(test_bf16),
      cmocka_unit_test(test_f32),
      cmocka_unit_test(test_f64),
      cmocka_unit_test(test_i8),
      cmocka_unit_test(test_u8),
      cmocka_unit_test(test_i32),
      cmocka_unit_test(test_i64),
      cmocka_unit_test(test_in_place),
      cmocka_unit_test(test_order_independence),
      cmocka_unit_test(test_dispatch),
  };
  return cmocka_run_group_tests_name("reduce kernels", tests, NULL, NULL);
}
