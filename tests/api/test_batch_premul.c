/* SPDX-License-Identifier: Apache-2.0 */
/* test_batch_premul.c: batched allreduce of mixed dtypes and sizes (tiny
 * buffers take the packed path, large ones their own collective) and the
 * pre-multiplied (weighted) sum, against serial references. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api_test.h"

#define MAX_WORLD 8
#define COMM_TIMEOUT_MS 60000
#define RUN_TIMEOUT_MS 200000

static const coll_op_t k_ops[] = {COLL_SUM, COLL_PROD, COLL_MAX, COLL_MIN,
                                  COLL_AVG};

/* Tiny buffers (packed by dtype into one allreduce) and buffers of at least
 * 256 KiB (each its own allreduce), interleaved, plus an empty one. */
typedef struct spec {
  coll_dtype_t dt;
  size_t count;
} spec_t;
static const spec_t k_batch[] = {
    {COLL_F32, 5},     {COLL_F16, 1},       {COLL_I8, 17},  {COLL_F64, 70001},
    {COLL_I32, 3},     {COLL_BF16, 140001}, {COLL_F32, 0},  {COLL_U8, 300001},
    {COLL_I64, 9},     {COLL_F32, 70001},   {COLL_F16, 33}, {COLL_U8, 2},
    {COLL_I32, 65537}, {COLL_BF16, 7},      {COLL_F64, 1},
};
#define NBATCH ((int)(sizeof k_batch / sizeof k_batch[0]))

typedef struct ctx {
  int world;
  coll_comm_t *comms[MAX_WORLD];
  t_fail_t fails;
  /* random premul case: every rank's results, compared by the test thread */
  unsigned char *res[MAX_WORLD][4];
} ctx_t;

static uint64_t batch_case(int world, int oi, int bi) {
  return t_mix(0xba7c4, (uint64_t)world, ((uint64_t)oi << 16) | (uint64_t)bi);
}

static void batch_rank(int rank, int world, void *arg) {
  ctx_t *c = arg;
  coll_buffer_t bufs[NBATCH];
  coll_status_t s;
  int oi, bi;
  char what[128];
  for (bi = 0; bi < NBATCH; bi++) {
    bufs[bi].dtype = k_batch[bi].dt;
    bufs[bi].count = k_batch[bi].count;
    bufs[bi].data = k_batch[bi].count
                        ? malloc(k_batch[bi].count * t_size(k_batch[bi].dt))
                        : NULL;
    if (k_batch[bi].count && bufs[bi].data == NULL) {
      t_fail(&c->fails, "rank %d: out of memory in the test", rank);
      goto out;
    }
  }
  for (oi = 0; oi < (int)(sizeof k_ops / sizeof k_ops[0]); oi++) {
    coll_op_t op = k_ops[oi];
    for (bi = 0; bi < NBATCH; bi++)
      t_gen_n(bufs[bi].dtype, op, rank, 0, batch_case(world, oi, bi),
              bufs[bi].data, bufs[bi].count);
    s = coll_allreduce_batch(c->comms[rank], bufs, NBATCH, op, NULL);
    snprintf(what, sizeof what, "allreduce_batch world %d rank %d %s", world,
             rank, coll_op_name(op));
    if (!t_expect(&c->fails, s, COLL_OK, "%s", what)) continue;
    for (bi = 0; bi < NBATCH; bi++) {
      char w2[192];
      snprintf(w2, sizeof w2, "%s bufs[%d] (%s x %zu)", what, bi,
               coll_dtype_name(bufs[bi].dtype), bufs[bi].count);
      t_check_reduced(&c->fails, w2, bufs[bi].dtype, op, world, 0,
                      batch_case(world, oi, bi), bufs[bi].data, bufs[bi].count);
    }
  }
  /* Nothing to reduce: no buffers at all, and a descriptor array that holds
   * only an empty buffer. */
  s = coll_allreduce_batch(c->comms[rank], NULL, 0, COLL_SUM, NULL);
  t_expect(&c->fails, s, COLL_OK, "allreduce_batch(NULL, 0) rank %d", rank);
  s = coll_allreduce_batch(c->comms[rank], bufs, 0, COLL_MAX, NULL);
  t_expect(&c->fails, s, COLL_OK, "allreduce_batch(bufs, 0) rank %d", rank);
  s = coll_allreduce_batch(c->comms[rank], &bufs[6], 1, COLL_SUM, NULL);
  t_expect(&c->fails, s, COLL_OK, "allreduce_batch(empty buffer) rank %d",
           rank);
  /* Many adjacent slices of one array, some empty at the same address as
   * their neighbour: disjoint, so accepted (the sorted overlap check). */
  {
    enum { NSLICE = 40 };
    coll_buffer_t sl[NSLICE];
    int32_t arr[NSLICE * 2];
    int k, bad = 0;
    for (k = 0; k < NSLICE * 2; k++) arr[k] = rank + k;
    for (k = 0; k < NSLICE; k++) {
      sl[k].data = &arr[(NSLICE - 1 - k) * 2]; /* out of address order */
      sl[k].count = k % 5 == 3 ? 0 : 2;
      sl[k].dtype = COLL_I32;
    }
    s = coll_allreduce_batch(c->comms[rank], sl, NSLICE, COLL_SUM, NULL);
    if (t_expect(&c->fails, s, COLL_OK, "allreduce_batch(%d slices) rank %d",
                 NSLICE, rank)) {
      for (k = 0; k < NSLICE; k++) {
        int idx = (NSLICE - 1 - k) * 2, j;
        for (j = 0; j < 2; j++) {
          int32_t want = sl[k].count
                             ? world * (idx + j) + world * (world - 1) / 2
                             : rank + idx + j;
          if (arr[idx + j] != want) bad++;
        }
      }
      if (bad)
        t_fail(&c->fails, "rank %d: %d wrong elements in the sliced batch",
               rank, bad);
    }
  }
out:
  for (bi = 0; bi < NBATCH; bi++) free(bufs[bi].data);
}

static void test_batch(void **state) {
  static const int full[] = {1, 2, 3, 4, 7}, quick[] = {1, 3};
  int q = t_quick(), n = q ? 2 : 5, i;
  ctx_t *c = calloc(1, sizeof *c);
  (void)state;
  assert_non_null(c);
  t_fail_init(&c->fails);
  for (i = 0; i < n; i++) {
    c->world = q ? quick[i] : full[i];
    assert_int_equal(test_inproc_comms(c->world, COMM_TIMEOUT_MS, c->comms), 0);
    test_run_ranks(c->world, batch_rank, c, RUN_TIMEOUT_MS, "allreduce_batch");
    test_destroy_comms(c->world, c->comms);
  }
  assert_int_equal(t_fail_report(&c->fails, "allreduce_batch"), 0);
  t_fail_destroy(&c->fails);
  free(c);
}

/* ---- pre-multiplied sums ------------------------------------------------- */

static const coll_dtype_t k_fdt[] = {COLL_F32, COLL_F64, COLL_F16, COLL_BF16};

/* Exact case: factors are small multiples of 1/4 and inputs integers in
 * [-3, 3], so every product and every partial sum is exact even in bf16. */
static const float k_exact_factor[MAX_WORLD] = {0.5f, 1.0f,  2.0f, 0.25f,
                                                4.0f, 0.75f, 1.5f, 3.0f};

static double exact_x(int rank, size_t i, uint64_t cas) {
  return (double)((int)(t_mix(cas, (uint64_t)rank, i) % 7) - 3);
}

/* x * factor rounded to dt, as the contract says a rank's contribution is
 * formed: in f64 for f64, in f32 (then rounded) for the others. */
static double premul_term(coll_dtype_t dt, double x, float factor) {
  if (dt == COLL_F64) return x * (double)factor;
  {
    volatile float p = (float)x * factor;
    return t_round(dt, (double)p);
  }
}

static void premul_exact_rank(int rank, int world, void *arg) {
  ctx_t *c = arg;
  static const size_t counts[] = {3, 100003};
  coll_buffer_t bufs[8];
  int nb = 0, di, ci, i, q;
  coll_status_t s;
  uint64_t cas = t_mix(0x9e3, (uint64_t)world, 1);
  for (ci = 0; ci < 2; ci++)
    for (di = 0; di < 4; di++) {
      coll_buffer_t *b = &bufs[nb++];
      b->dtype = k_fdt[di];
      b->count = counts[ci];
      b->data = malloc(b->count * t_size(b->dtype));
      if (b->data == NULL) {
        t_fail(&c->fails, "rank %d: out of memory in the test", rank);
        goto out;
      }
      for (i = 0; i < (int)b->count; i++)
        t_store_f(b->dtype, b->data, (size_t)i,
                  exact_x(rank, (size_t)i, cas + (uint64_t)nb));
    }
  s = coll_allreduce_premul_sum(c->comms[rank], bufs, (size_t)nb,
                                k_exact_factor[rank], NULL);
  if (!t_expect(&c->fails, s, COLL_OK, "premul_sum(exact) world %d rank %d",
                world, rank))
    goto out;
  for (i = 0; i < nb; i++) {
    size_t j;
    for (j = 0; j < bufs[i].count; j++) {
      double want = 0.0, got = t_load_f(bufs[i].dtype, bufs[i].data, j);
      for (q = 0; q < world; q++)
        want += premul_term(bufs[i].dtype, exact_x(q, j, cas + (uint64_t)i + 1),
                            k_exact_factor[q]);
      if (got != want) {
        t_fail(&c->fails,
               "premul_sum(exact) world %d rank %d bufs[%d] %s: "
               "element %zu is %.17g, expected %.17g",
               world, rank, i, coll_dtype_name(bufs[i].dtype), j, got, want);
        break;
      }
    }
  }
out:
  for (i = 0; i < nb; i++) free(bufs[i].data);
}

static float rand_factor(int rank) { return 0.1f * (float)(rank + 1); }

static double rand_x(coll_dtype_t dt, int rank, size_t i) {
  uint64_t h = t_mix(0x7a9d, (uint64_t)rank, i);
  return t_round(dt, ldexp((double)(h >> 11), -53) * 2.0 - 1.0);
}

#define RAND_COUNT 70001

static void premul_rand_rank(int rank, int world, void *arg) {
  ctx_t *c = arg;
  coll_buffer_t bufs[4];
  int di;
  size_t i;
  coll_status_t s;
  for (di = 0; di < 4; di++) {
    bufs[di].dtype = k_fdt[di];
    bufs[di].count = RAND_COUNT;
    bufs[di].data = c->res[rank][di];
    for (i = 0; i < RAND_COUNT; i++)
      t_store_f(k_fdt[di], c->res[rank][di], i, rand_x(k_fdt[di], rank, i));
  }
  s = coll_allreduce_premul_sum(c->comms[rank], bufs, 4, rand_factor(rank),
                                NULL);
  t_expect(&c->fails, s, COLL_OK, "premul_sum(random) world %d rank %d", world,
           rank);
}

/* Tolerance: (world + 1) * u * sum_r |term_r|, u the dtype's unit roundoff;
 * the terms themselves are formed exactly as the reference forms them. */
static void premul_rand_check(ctx_t *c) {
  static const int ulog[4] = {-24, -53, -11, -8};
  int di, r;
  size_t i;
  for (di = 0; di < 4; di++) {
    coll_dtype_t dt = k_fdt[di];
    for (r = 1; r < c->world; r++)
      if (memcmp(c->res[r][di], c->res[0][di], RAND_COUNT * t_size(dt)) != 0)
        t_fail(&c->fails,
               "premul_sum(random) %s: rank %d's result differs "
               "from rank 0's",
               coll_dtype_name(dt), r);
    for (i = 0; i < RAND_COUNT; i++) {
      double want = 0.0, mag = 0.0, got = t_load_f(dt, c->res[0][di], i), tol;
      for (r = 0; r < c->world; r++) {
        double term = premul_term(dt, rand_x(dt, r, i), rand_factor(r));
        want += term;
        mag += fabs(term);
      }
      tol = (c->world + 1) * ldexp(1.0, ulog[di]) * mag + 1e-7 * (di == 2);
      if (!(fabs(got - want) <= tol)) {
        t_fail(&c->fails,
               "premul_sum(random) %s: element %zu is %.17g, "
               "reference %.17g, tolerance %.3g",
               coll_dtype_name(dt), i, got, want, tol);
        break;
      }
    }
  }
}

static void premul_int_rank(int rank, int world, void *arg) {
  ctx_t *c = arg;
  float f[4] = {1, 2, 3, 4};
  int32_t n[4] = {1, 2, 3, 4};
  coll_buffer_t bufs[2] = {{f, 4, COLL_F32}, {n, 4, COLL_I32}};
  coll_status_t s;
  s = coll_allreduce_premul_sum(c->comms[rank], bufs, 2, 2.0f, NULL);
  if (t_expect(&c->fails, s, COLL_ERR_UNSUPPORTED,
               "premul_sum with an i32 buffer, world %d rank %d", world,
               rank) &&
      coll_last_error()[0] == '\0')
    t_fail(&c->fails, "premul_sum with an i32 buffer: no error text");
  if (f[0] != 1.0f || f[3] != 4.0f)
    t_fail(&c->fails,
           "premul_sum refused with UNSUPPORTED but changed the "
           "f32 buffer (rank %d: %g %g)",
           rank, (double)f[0], (double)f[3]);
  f[3] = 4.0f;
  /* The comm still works afterwards. */
  s = coll_allreduce(c->comms[rank], f, f, 4, COLL_F32, COLL_SUM, NULL);
  if (t_expect(&c->fails, s, COLL_OK, "allreduce after a refused premul_sum"))
    if (f[3] != 4.0f * (float)world)
      t_fail(&c->fails, "allreduce after a refused premul_sum: %g, not %g",
             (double)f[3], 4.0 * world);
  /* No buffers: nothing to do. */
  s = coll_allreduce_premul_sum(c->comms[rank], NULL, 0, 0.5f, NULL);
  t_expect(&c->fails, s, COLL_OK, "premul_sum(NULL, 0) rank %d", rank);
}

static void test_premul(void **state) {
  static const int full[] = {1, 2, 3, 5, 8}, quick[] = {1, 3};
  int q = t_quick(), n = q ? 2 : 5, i, r, di;
  ctx_t *c = calloc(1, sizeof *c);
  (void)state;
  assert_non_null(c);
  t_fail_init(&c->fails);
  for (i = 0; i < n; i++) {
    c->world = q ? quick[i] : full[i];
    assert_int_equal(test_inproc_comms(c->world, COMM_TIMEOUT_MS, c->comms), 0);
    test_run_ranks(c->world, premul_exact_rank, c, RUN_TIMEOUT_MS,
                   "premul_sum (exact)");
    test_run_ranks(c->world, premul_int_rank, c, RUN_TIMEOUT_MS,
                   "premul_sum (integer dtype)");
    test_destroy_comms(c->world, c->comms);
  }
  c->world = q ? 3 : 4;
  for (r = 0; r < c->world; r++)
    for (di = 0; di < 4; di++) {
      c->res[r][di] = malloc(RAND_COUNT * 8);
      assert_non_null(c->res[r][di]);
    }
  assert_int_equal(test_inproc_comms(c->world, COMM_TIMEOUT_MS, c->comms), 0);
  test_run_ranks(c->world, premul_rand_rank, c, RUN_TIMEOUT_MS,
                 "premul_sum (random)");
  test_destroy_comms(c->world, c->comms);
  premul_rand_check(c);
  for (r = 0; r < c->world; r++)
    for (di = 0; di < 4; di++) free(c->res[r][di]);
  assert_int_equal(t_fail_report(&c->fails, "premul_sum"), 0);
  t_fail_destroy(&c->fails);
  free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batch),
      cmocka_unit_test(test_premul),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
