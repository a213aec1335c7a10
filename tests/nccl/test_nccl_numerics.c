/* SPDX-License-Identifier: Apache-2.0 */
/* test_nccl_numerics.c: what reductions compute on NCCL comms. The helpers
 * of src/nccl/nccl_premul.c; the stand-in's reductions, called through the
 * NCCL table, against a model of NCCL 2.28's kernels written here; and the
 * libcoll calls on NCCL comms that depend on those helpers.
 *
 * test_api_i8_avg_refused and test_api_premul_half_types check that
 * nccl_enqueue.c calls coll__nccl_check_numerics (before any NCCL call of a
 * reducing kind) and coll__nccl_premul_scalar (one premul op per buffer
 * dtype).
 *
 * The model: each input is converted to double exactly; every step (a
 * premul multiply, a sum, a product) is rounded to the element type, round
 * to nearest even, by an independent routine (frexp/nearbyint/ldexp, not
 * src/reduce/half.h); ranks are reduced in rank order, which the stand-in
 * keeps fixed. ncclAvg is a premul sum by 1/world (f64: in double; else
 * double, then float, then the element type) on floating types and a wrapped
 * sum divided with truncation on integers. Comparisons are exact, -0 and +0
 * told apart. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cuda/gpu_table.h"
#include "nccl/nccl_premul.h"
#include "nccl_test_util.h"
#include "test_util.h"

#define W 3
#define N 4096

/* ---- the model --------------------------------------------------------- */

/* x rounded to p significant bits, normal exponents from emin to emax:
 * nearest even, subnormals kept, overflow to infinity. */
static double round_fmt(double x, int p, int emin, int emax) {
  double r, max = ldexp(2.0 - ldexp(1.0, 1 - p), emax);
  int e, q;
  if (x == 0 || isnan(x) || isinf(x)) return x;
  (void)frexp(x, &e); /* |x| in [2^(e-1), 2^e) */
  q = (e - 1 > emin ? e - 1 : emin) - (p - 1);
  r = ldexp(nearbyint(ldexp(x, -q)), q);
  return fabs(r) > max ? copysign(INFINITY, x) : r;
}

static double model_round(ncclDataType_t dt, double x) {
  switch (dt) {
    case ncclFloat16: return round_fmt(x, 11, -14, 15);
    case ncclBfloat16: return round_fmt(x, 8, -126, 127);
    case ncclFloat32: return (double)(float)x;
    default: return x;
  }
}

/* Exact in double: a sum or product of two f16/bf16 values; for f32 the
 * double sum may round once, harmlessly (53 >= 2 * 24 + 2). */
static double model_step(ncclDataType_t dt, ncclRedOp_t op, double a,
                         double v) {
  switch (op) {
    case ncclProd: return model_round(dt, a * v);
    case ncclMax: return isnan(v) || (!isnan(a) && !(v > a)) ? a : v;
    case ncclMin: return isnan(v) || (!isnan(a) && !(v < a)) ? a : v;
    default: return model_round(dt, a + v);
  }
}

/* NCCL's ncclAvg scalar for a floating type (hostToDevRedOp): 1/w in
 * double; for the narrower types through float first. */
static double model_avg_scalar(ncclDataType_t dt, int w) {
  if (dt == ncclFloat64) return 1.0 / w;
  return model_round(dt, (double)(float)(1.0 / w));
}

/* Rank 0's value first; k[r] != NULL: premul scalars. */
static double model_reduce(ncclDataType_t dt, ncclRedOp_t op, const double *v,
                           const double *k) {
  double acc = 0, x;
  int r;
  for (r = 0; r < W; r++) {
    x = k != NULL ? model_round(dt, v[r] * k[r]) : v[r];
    acc = r == 0 ? x : model_step(dt, op, acc, x);
  }
  return acc;
}

/* ---- element bits ------------------------------------------------------ */

static size_t esize(ncclDataType_t dt) {
  return dt == ncclFloat64 ? 8 : dt == ncclFloat32 ? 4 : 2;
}

static double dec_f16(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0    ? ldexp(m, -24)
             : e == 31 ? (m != 0 ? NAN : INFINITY)
                       : ldexp(m + 1024, e - 25);
  return (h & 0x8000) ? -v : v;
}

static double dec_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Element i of the buffer p, as a double. */
static double elem(ncclDataType_t dt, const void *p, size_t i) {
  const char *b = (const char *)p + i * esize(dt);
  uint16_t h;
  float f;
  double d;
  switch (dt) {
    case ncclFloat16: memcpy(&h, b, 2); return dec_f16(h);
    case ncclBfloat16: memcpy(&h, b, 2); return dec_bf16(h);
    case ncclFloat32: memcpy(&f, b, 4); return f;
    default: memcpy(&d, b, 8); return d;
  }
}

/* A random finite element: random sign and mantissa, the biased exponent
 * field in [elo, ehi] (0: subnormals and zeros). */
static void rand_elem(ncclDataType_t dt, void *p, size_t i, int elo, int ehi,
                      uint64_t *rs) {
  char *b = (char *)p + i * esize(dt);
  uint64_t r = test_rand(rs);
  uint64_t e = (uint64_t)elo + (r >> 40) % (uint64_t)(ehi - elo + 1);
  uint64_t s = r >> 63;
  uint16_t h;
  uint32_t u;
  switch (dt) {
    case ncclFloat16:
      h = (uint16_t)(s << 15 | e << 10 | (r & 0x3ff));
      memcpy(b, &h, 2);
      break;
    case ncclBfloat16:
      h = (uint16_t)(s << 15 | e << 7 | (r & 0x7f));
      memcpy(b, &h, 2);
      break;
    case ncclFloat32:
      u = (uint32_t)(s << 31 | e << 23 | (r & 0x7fffff));
      memcpy(b, &u, 4);
      break;
    default:
      r = s << 63 | e << 52 | (test_rand(rs) & 0xfffffffffffffull);
      memcpy(b, &r, 8);
      break;
  }
}

static int same(double a, double b) {
  return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b));
}

/* ---- three comms through the table ------------------------------------- */

typedef struct {
  const coll_nccl_table_t *t;
  ncclComm_t c[W];
  void *in[W], *out[W];
} tri_t;

/* Three nonblocking comms, rank r on device r, made in one NCCL group like
 * nccl_group.c does; each polled until its init is done. */
static void tri_init(tri_t *x) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  ncclUniqueId id;
  ncclResult_t r, state;
  int i, n;
  memset(x, 0, sizeof *x);
  x->t = coll__nccl_table();
  cfg.blocking = 0;
  assert_int_equal(x->t->nccl_get_unique_id(&id), ncclSuccess);
  assert_int_equal(x->t->nccl_group_start(), ncclSuccess);
  for (i = 0; i < W; i++) {
    assert_int_equal(x->t->cuda_set_device(i), cudaSuccess);
    r = x->t->nccl_comm_init_rank_config(&x->c[i], W, id, i, &cfg);
    assert_true(r == ncclSuccess || r == ncclInProgress);
  }
  r = x->t->nccl_group_end();
  assert_true(r == ncclSuccess || r == ncclInProgress);
  for (i = 0; i < W; i++) {
    for (n = 0, state = ncclInProgress; state == ncclInProgress; n++) {
      assert_true(n < 10000);
      assert_int_equal(x->t->nccl_comm_get_async_error(x->c[i], &state),
                       ncclSuccess);
      if (state == ncclInProgress) test_sleep_ms(1);
    }
    assert_int_equal(state, ncclSuccess);
    x->in[i] = standin_dev_alloc(i, N * 8);
    x->out[i] = standin_dev_alloc(i, N * 8);
  }
}

static void tri_free(tri_t *x) {
  int i;
  for (i = 0; i < W; i++) {
    assert_int_equal(x->t->nccl_comm_destroy(x->c[i]), ncclSuccess);
    standin_dev_free(x->in[i]);
    standin_dev_free(x->out[i]);
  }
  assert_true(nt_no_misuse());
}

/* One allreduce of in[r] into out[r] over the three comms, rank r with
 * ops[r], issued in one group from this thread; waits for the streams. */
static ncclResult_t tri_allreduce(tri_t *x, size_t n, ncclDataType_t dt,
                                  const ncclRedOp_t *ops) {
  ncclResult_t r = ncclSuccess, e, state;
  int i, k;
  assert_int_equal(x->t->nccl_group_start(), ncclSuccess);
  for (i = 0; i < W; i++) {
    x->t->cuda_set_device(i);
    e = x->t->nccl_all_reduce(x->in[i], x->out[i], n, dt, ops[i], x->c[i],
                              NULL);
    if (r == ncclSuccess) r = e;
  }
  e = x->t->nccl_group_end();
  if (r == ncclSuccess && e != ncclInProgress) r = e;
  for (i = 0; i < W && r == ncclSuccess; i++) {
    for (k = 0, state = ncclInProgress; state == ncclInProgress; k++) {
      assert_true(k < 10000);
      x->t->nccl_comm_get_async_error(x->c[i], &state);
      if (state == ncclInProgress) test_sleep_ms(1);
    }
    x->t->cuda_set_device(i);
    if (state == ncclSuccess &&
        x->t->cuda_stream_synchronize(NULL) != cudaSuccess)
      state = ncclUnhandledCudaError;
    r = state;
  }
  return r;
}

/* Every rank's out[] against the model of in[] (k: premul scalars). */
static void tri_check(const tri_t *x, size_t n, ncclDataType_t dt,
                      ncclRedOp_t op, const double *k, const char *what) {
  double v[W], want, got;
  size_t i;
  int r;
  for (i = 0; i < n; i++) {
    for (r = 0; r < W; r++) v[r] = elem(dt, x->in[r], i);
    want = model_reduce(dt, op, v, k);
    for (r = 0; r < W; r++) {
      got = elem(dt, x->out[r], i);
      if (!same(got, want))
        fail_msg("%s: element %zu rank %d: %a + %a + %a gave %a, model %a",
                 what, i, r, v[0], v[1], v[2], got, want);
    }
  }
}

/* Exponent fields that make sums round often and reach overflow/zeros. */
static void fill(tri_t *x, ncclDataType_t dt, ncclRedOp_t op, uint64_t *rs) {
  int lo = 0, hi = 0, r;
  size_t i;
  switch (dt) {
    case ncclFloat16: /* up to 2^15: sums overflow sometimes */
      lo = 0, hi = op == ncclProd ? 20 : 30;
      break;
    case ncclBfloat16: lo = 0, hi = 254; break;
    case ncclFloat32: lo = 100, hi = 160; break;
    default: lo = 1000, hi = 1050; break;
  }
  for (r = 0; r < W; r++)
    for (i = 0; i < N; i++) rand_elem(dt, x->in[r], i, lo, hi, rs);
}

static int setup(void **state) {
  (void)state;
  nt_install(W, 0, 0);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  standin_uninstall();
  return 0;
}

/* ---- the helpers -------------------------------------------------------- */

static void test_premul_scalar_values(void **state) {
  unsigned char s[8];
  ncclDataType_t ndt = ncclInt8;
  uint16_t h;
  float f;
  double d;
  (void)state;
  assert_int_equal(
      coll__nccl_premul_scalar(COLL_F16, 1.0f / 3, 0, NULL, s, &ndt), COLL_OK);
  memcpy(&h, s, 2);
  assert_int_equal(ndt, ncclFloat16);
  assert_int_equal(h, 0x3555); /* 0.33325, the nearest half */
  assert_memory_equal(s + 2, "\0\0\0\0\0\0", 6);
  assert_int_equal(
      coll__nccl_premul_scalar(COLL_BF16, 1.0f / 3, 0, NULL, s, &ndt), COLL_OK);
  memcpy(&h, s, 2);
  assert_int_equal(ndt, ncclBfloat16);
  assert_int_equal(h, 0x3eab); /* 0.333984 */
  assert_int_equal(
      coll__nccl_premul_scalar(COLL_BF16, 1.0f + 0x1p-8f, 0, NULL, s, &ndt),
      COLL_OK);
  memcpy(&h, s, 2);
  assert_int_equal(h, 0x3f80); /* a tie: to the even 1.0 */
  assert_int_equal(coll__nccl_premul_scalar(COLL_F16, 1e6f, 0, NULL, s, &ndt),
                   COLL_OK);
  memcpy(&h, s, 2);
  assert_int_equal(h, 0x7c00); /* beyond f16: infinity, as on the GPU */
  assert_int_equal(coll__nccl_premul_scalar(COLL_F32, 0.1f, 0, NULL, s, &ndt),
                   COLL_OK);
  memcpy(&f, s, 4);
  assert_int_equal(ndt, ncclFloat32);
  assert_true(f == 0.1f);
  assert_memory_equal(s + 4, "\0\0\0\0", 4);
  assert_int_equal(coll__nccl_premul_scalar(COLL_F64, 0.1f, 0, NULL, s, &ndt),
                   COLL_OK);
  memcpy(&d, s, 8);
  assert_int_equal(ndt, ncclFloat64);
  assert_true(d == (double)0.1f); /* the float's value, exactly */
}

static void test_premul_scalar_refusals(void **state) {
  unsigned char s[8];
  ncclDataType_t ndt;
  (void)state;
  assert_int_equal(coll__nccl_premul_scalar(COLL_I32, 2.0f, 2, NULL, s, &ndt),
                   COLL_ERR_UNSUPPORTED);
  assert_string_equal(coll_last_error(),
                      "allreduce_premul_sum: an NCCL comm takes f16, bf16, "
                      "f32 or f64 buffers; buffer 2 is i32");
  assert_int_equal(
      coll__nccl_premul_scalar(COLL_U8, 2.0f, 0, "premul_sum", s, &ndt),
      COLL_ERR_UNSUPPORTED);
  assert_string_equal(coll_last_error(),
                      "premul_sum: an NCCL comm takes f16, bf16, f32 or f64 "
                      "buffers; buffer 0 is u8");
  assert_int_equal(coll__nccl_premul_scalar(COLL_I8, 2.0f, 1, NULL, s, &ndt),
                   COLL_ERR_UNSUPPORTED);
  assert_int_equal(coll__nccl_premul_scalar(COLL_I64, 2.0f, 1, NULL, s, &ndt),
                   COLL_ERR_UNSUPPORTED);
  assert_int_equal(
      coll__nccl_premul_scalar(COLL_DTYPE_COUNT, 2.0f, 1, NULL, s, &ndt),
      COLL_ERR_INVALID_ARG);
  assert_int_equal(
      coll__nccl_premul_scalar(COLL_F32, 2.0f, 0, NULL, NULL, &ndt),
      COLL_ERR_INVALID_ARG);
}

static void test_check_numerics(void **state) {
  (void)state;
  assert_int_equal(
      coll__nccl_check_numerics(COLL_WORK_ALLREDUCE, COLL_I8, COLL_AVG, NULL),
      COLL_ERR_UNSUPPORTED);
  assert_string_equal(coll_last_error(),
                      "allreduce: avg of i8 on an NCCL comm wraps the sum "
                      "before dividing (NCCL's ncclAvg); use i32, or a CPU "
                      "comm");
  assert_int_equal(coll__nccl_check_numerics(COLL_WORK_REDUCE, COLL_U8,
                                             COLL_AVG, "group_reduce"),
                   COLL_ERR_UNSUPPORTED);
  assert_non_null(strstr(coll_last_error(), "group_reduce: avg of u8"));
  assert_int_equal(coll__nccl_check_numerics(COLL_WORK_REDUCE_SCATTER, COLL_I8,
                                             COLL_AVG, NULL),
                   COLL_ERR_UNSUPPORTED);
  /* What passes: other ops, wider types, kinds without a reduction. */
  assert_int_equal(
      coll__nccl_check_numerics(COLL_WORK_ALLREDUCE, COLL_I8, COLL_SUM, NULL),
      COLL_OK);
  assert_int_equal(
      coll__nccl_check_numerics(COLL_WORK_ALLREDUCE, COLL_I32, COLL_AVG, NULL),
      COLL_OK);
  assert_int_equal(
      coll__nccl_check_numerics(COLL_WORK_ALLREDUCE, COLL_BF16, COLL_AVG, NULL),
      COLL_OK);
  assert_int_equal(
      coll__nccl_check_numerics(COLL_WORK_BROADCAST, COLL_I8, COLL_AVG, NULL),
      COLL_OK);
}

/* ---- the stand-in against the model ------------------------------------ */

static void run_ops(ncclDataType_t dt, const ncclRedOp_t *list, int nops,
                    uint64_t seed) {
  static const char *names[] = {"sum", "prod", "max", "min", "avg"};
  const char *tn = dt == ncclFloat16    ? "f16"
                   : dt == ncclBfloat16 ? "bf16"
                   : dt == ncclFloat32  ? "f32"
                                        : "f64";
  ncclRedOp_t ops[W];
  double k[W];
  char what[32];
  tri_t x;
  int i, r;
  tri_init(&x);
  for (i = 0; i < nops; i++) {
    for (r = 0; r < W; r++) {
      ops[r] = list[i];
      k[r] = model_avg_scalar(dt, W);
    }
    fill(&x, dt, list[i], &seed);
    assert_int_equal(tri_allreduce(&x, N, dt, ops), ncclSuccess);
    snprintf(what, sizeof what, "%s %s", tn, names[list[i]]);
    /* ncclAvg on floating types: a sum of inputs pre-multiplied by k. */
    tri_check(&x, N, dt, list[i] == ncclAvg ? ncclSum : list[i],
              list[i] == ncclAvg ? k : NULL, what);
  }
  tri_free(&x);
}

static void test_standin_half_types(void **state) {
  static const ncclRedOp_t all[] = {ncclSum, ncclProd, ncclMax, ncclMin,
                                    ncclAvg};
  (void)state;
  run_ops(ncclFloat16, all, 5, 1);
  run_ops(ncclBfloat16, all, 5, 2);
}

static void test_standin_wide_floats(void **state) {
  static const ncclRedOp_t some[] = {ncclSum, ncclAvg};
  (void)state;
  run_ops(ncclFloat32, some, 2, 3);
  run_ops(ncclFloat64, some, 2, 4);
}

/* f16 sums overflow to infinity at 65520, the GPU's rounding boundary. */
static void test_standin_f16_overflow(void **state) {
  static const uint16_t in[W] = {0x7bff, 0x3c00, 0x3c00}; /* 65504, 1, 1 */
  ncclRedOp_t ops[W] = {ncclSum, ncclSum, ncclSum};
  tri_t x;
  int r;
  (void)state;
  tri_init(&x);
  for (r = 0; r < W; r++) {
    memcpy(x.in[r], &in[r], 2);
    memcpy((char *)x.in[r] + 2, &in[0], 2); /* and 3 * 65504 */
  }
  assert_int_equal(tri_allreduce(&x, 2, ncclFloat16, ops), ncclSuccess);
  for (r = 0; r < W; r++) {
    uint16_t got[2];
    memcpy(got, x.out[r], 4);
    assert_int_equal(got[0], 0x7bff); /* 65504 + 1 rounds back, twice */
    assert_int_equal(got[1], 0x7c00);
  }
  tri_free(&x);
}

/* Max and min as fmaxf/__hmax: a NaN loses to a number wherever it is. */
static void test_standin_nan_minmax(void **state) {
  static const uint16_t h[W][2] = {{0x7e00, 0x3c00},  /* NaN, 1 */
                                   {0x4000, 0x7e00},  /* 2, NaN */
                                   {0x3800, 0x3800}}; /* 0.5, 0.5 */
  ncclRedOp_t ops[W] = {ncclMax, ncclMax, ncclMax};
  tri_t x;
  uint16_t got[2];
  int r;
  (void)state;
  tri_init(&x);
  for (r = 0; r < W; r++) memcpy(x.in[r], h[r], sizeof h[r]);
  assert_int_equal(tri_allreduce(&x, 2, ncclFloat16, ops), ncclSuccess);
  memcpy(got, x.out[2], 4);
  assert_int_equal(got[0], 0x4000);
  assert_int_equal(got[1], 0x3c00);
  for (r = 0; r < W; r++) {
    float f[2] = {r == 0 ? NAN : 2.0f - (float)r, r == 1 ? NAN : 1.0f};
    memcpy(x.in[r], f, sizeof f);
    ops[r] = ncclMin;
  }
  assert_int_equal(tri_allreduce(&x, 2, ncclFloat32, ops), ncclSuccess);
  assert_true(((float *)x.out[1])[0] == 0.0f);
  assert_true(((float *)x.out[1])[1] == 1.0f);
  tri_free(&x);
}

/* ncclAvg's scalar in bf16 is 0.333984 for world 3 (+0.2 %). For 1.0 the
 * bias rounds away (3k = 1.00195, below half a bf16 ulp above 1) and the
 * mean is 1.0, as on the GPU; one ulp of bf16 further it shows. */
static void test_standin_bf16_avg_bias(void **state) {
  static const uint16_t in[] = {0x3f80, 0x3f85};   /* 1.0, 1.0390625 */
  static const uint16_t want[] = {0x3f80, 0x3f86}; /* 1.0, 1.046875 */
  ncclRedOp_t ops[W] = {ncclAvg, ncclAvg, ncclAvg};
  tri_t x;
  double k = model_avg_scalar(ncclBfloat16, W);
  int r, i;
  (void)state;
  assert_true(k == 0.333984375);
  tri_init(&x);
  for (r = 0; r < W; r++) memcpy(x.in[r], in, sizeof in);
  assert_int_equal(tri_allreduce(&x, 2, ncclBfloat16, ops), ncclSuccess);
  for (r = 0; r < W; r++)
    for (i = 0; i < 2; i++) {
      uint16_t got;
      memcpy(&got, (char *)x.out[r] + 2 * i, 2);
      assert_int_equal(got, want[i]);
    }
  /* The model agrees: 1.0390625 -> 0.34765625 -> 1.046875, not the mean. */
  assert_true(dec_bf16(want[1]) ==
              model_reduce(ncclBfloat16, ncclSum,
                           (double[W]){1.0390625, 1.0390625, 1.0390625},
                           (double[W]){k, k, k}));
  tri_free(&x);
}

/* ncclAvg on integers divides the wrapped sum, truncating toward zero. */
static void test_standin_int_avg(void **state) {
  ncclRedOp_t ops[W] = {ncclAvg, ncclAvg, ncclAvg};
  tri_t x;
  int r;
  (void)state;
  tri_init(&x);
  for (r = 0; r < W; r++) {
    int8_t v[2] = {100, -100};
    memcpy(x.in[r], v, 2);
  }
  assert_int_equal(tri_allreduce(&x, 2, ncclInt8, ops), ncclSuccess);
  for (r = 0; r < W; r++) {
    int8_t *o = x.out[r];
    assert_int_equal(o[0], 14);  /* 300 wraps to 44; 44 / 3 */
    assert_int_equal(o[1], -14); /* -300 wraps to -44; toward zero */
  }
  for (r = 0; r < W; r++) ((uint8_t *)x.in[r])[0] = 100;
  assert_int_equal(tri_allreduce(&x, 1, ncclUint8, ops), ncclSuccess);
  for (r = 0; r < W; r++) assert_int_equal(((uint8_t *)x.out[r])[0], 14);
  for (r = 0; r < W; r++) ((int32_t *)x.in[r])[0] = INT32_MAX;
  assert_int_equal(tri_allreduce(&x, 1, ncclInt32, ops), ncclSuccess);
  for (r = 0; r < W; r++) /* (3 * (2^31 - 1)) mod 2^32 = 2^31 - 3, / 3 */
    assert_int_equal(((int32_t *)x.out[r])[0], 715827881);
  tri_free(&x);
}

/* ncclRedOpCreatePreMulSum with a scalar of each floating type, different
 * on every rank; an op used with another type is refused. */
static void test_standin_premul(void **state) {
  static const ncclDataType_t dts[] = {ncclFloat16, ncclBfloat16, ncclFloat32,
                                       ncclFloat64};
  static const coll_dtype_t cdts[] = {COLL_F16, COLL_BF16, COLL_F32, COLL_F64};
  ncclRedOp_t ops[W];
  double k[W];
  uint64_t seed = 5;
  unsigned char s[8];
  ncclDataType_t ndt;
  tri_t x;
  int i, r;
  (void)state;
  tri_init(&x);
  for (i = 0; i < 4; i++) {
    for (r = 0; r < W; r++) {
      /* 0.1, 0.2, 0.3: none exact, so the scalar's rounding shows. */
      float factor = 0.1f * (float)(r + 1);
      assert_int_equal(
          coll__nccl_premul_scalar(cdts[i], factor, 0, NULL, s, &ndt), COLL_OK);
      assert_int_equal(ndt, dts[i]);
      k[r] = elem(dts[i], s, 0);
      assert_true(k[r] == model_round(dts[i], factor));
      assert_int_equal(x.t->nccl_red_op_create_pre_mul_sum(
                           &ops[r], s, dts[i], ncclScalarHostImmediate, x.c[r]),
                       ncclSuccess);
    }
    fill(&x, dts[i], ncclSum, &seed);
    assert_int_equal(tri_allreduce(&x, N, dts[i], ops), ncclSuccess);
    tri_check(&x, N, dts[i], ncclSum, k, "premul");
    if (i == 0) /* an f16 op with f32 buffers: NCCL's invalid argument */
      assert_int_equal(tri_allreduce(&x, 1, ncclFloat32, ops),
                       ncclInvalidArgument);
    for (r = 0; r < W; r++)
      assert_int_equal(x.t->nccl_red_op_destroy(ops[r], x.c[r]), ncclSuccess);
  }
  tri_free(&x);
}

/* ---- libcoll on NCCL comms (see the top of the file) ------------------- */

struct api_arg {
  coll_comm_t *comms[W];
  void *buf[W][3];
  coll_status_t s[W];
  char text[W][256];
};

static void api_setup(struct api_arg *a) {
  int r, j;
  memset(a, 0, sizeof *a);
  assert_int_equal(nt_rank_comms(W, 0, a->comms), 0);
  for (r = 0; r < W; r++)
    for (j = 0; j < 3; j++) a->buf[r][j] = standin_dev_alloc(r, N * 8);
}

static void api_free(struct api_arg *a) {
  int r, j;
  for (r = 0; r < W; r++) {
    coll_comm_destroy(a->comms[r]);
    for (j = 0; j < 3; j++) standin_dev_free(a->buf[r][j]);
  }
  assert_true(nt_no_misuse());
}

static void i8_avg_rank(int rank, int world, void *p) {
  struct api_arg *a = p;
  (void)world;
  a->s[rank] = coll_allreduce(a->comms[rank], a->buf[rank][0], a->buf[rank][0],
                              1, COLL_I8, COLL_AVG, NULL);
  snprintf(a->text[rank], sizeof a->text[rank], "%s", coll_last_error());
}

static void i32_avg_rank(int rank, int world, void *p) {
  struct api_arg *a = p;
  (void)world;
  a->s[rank] = coll_allreduce(a->comms[rank], a->buf[rank][1], a->buf[rank][1],
                              1, COLL_I32, COLL_AVG, NULL);
}

/* Needs coll__nccl_check_numerics in nccl_enqueue.c. NCCL would
 * give 14 for three ranks of 100; libcoll refuses before any NCCL call. */
static void test_api_i8_avg_refused(void **state) {
  struct api_arg a;
  char bad[512] = "";
  int r;
  (void)state;
  api_setup(&a);
  for (r = 0; r < W; r++) {
    *(int8_t *)a.buf[r][0] = 100;
    *(int32_t *)a.buf[r][1] = 100;
  }
  test_run_ranks(W, i8_avg_rank, &a, 10000, "i8 avg");
  for (r = 0; r < W && bad[0] == '\0'; r++)
    if (a.s[r] != COLL_ERR_UNSUPPORTED ||
        strstr(a.text[r], "avg of i8 on an NCCL comm") == NULL ||
        *(int8_t *)a.buf[r][0] != 100) /* nothing may run */
      snprintf(bad, sizeof bad,
               "rank %d: i8 avg gave status %d, value %d, text \"%s\"; "
               "wanted COLL_ERR_UNSUPPORTED (nccl_enqueue.c must call "
               "coll__nccl_check_numerics)",
               r, (int)a.s[r], *(int8_t *)a.buf[r][0], a.text[r]);
  /* The comms still work, and i32 is not refused. */
  if (bad[0] == '\0') {
    test_run_ranks(W, i32_avg_rank, &a, 10000, "i32 avg");
    for (r = 0; r < W && bad[0] == '\0'; r++)
      if (a.s[r] != COLL_OK || *(int32_t *)a.buf[r][1] != 100)
        snprintf(bad, sizeof bad, "rank %d: i32 avg: status %d, value %d", r,
                 (int)a.s[r], *(int32_t *)a.buf[r][1]);
  }
  api_free(&a); /* first, so that a failure leaks nothing */
  if (bad[0] != '\0') fail_msg("%s", bad);
}

static const coll_dtype_t api_dts[3] = {COLL_F16, COLL_BF16, COLL_F64};
static const ncclDataType_t api_ndts[3] = {ncclFloat16, ncclBfloat16,
                                           ncclFloat64};

static void premul_rank(int rank, int world, void *p) {
  struct api_arg *a = p;
  coll_buffer_t b[3];
  int j;
  (void)world;
  for (j = 0; j < 3; j++)
    b[j] = (coll_buffer_t){a->buf[rank][j], N, api_dts[j]};
  a->s[rank] = coll_allreduce_premul_sum(a->comms[rank], b, 3,
                                         0.1f * (float)(rank + 1), NULL);
  snprintf(a->text[rank], sizeof a->text[rank], "%s", coll_last_error());
}

/* The API test's inputs (the call reduces in place). */
static unsigned char api_in[W][3][N * 8];

/* Needs coll__nccl_premul_scalar in nccl_enqueue.c (one op per
 * buffer dtype, each with the factor in that type). */
static void test_api_premul_half_types(void **state) {
  static const int elo[3] = {10, 120, 1000}, ehi[3] = {20, 135, 1050};
  struct api_arg a;
  char bad[512] = "";
  uint64_t seed = 9;
  double k[W], v[W], want, got;
  size_t i;
  int r, j;
  (void)state;
  api_setup(&a);
  for (r = 0; r < W; r++)
    for (j = 0; j < 3; j++) {
      for (i = 0; i < N; i++)
        rand_elem(api_ndts[j], a.buf[r][j], i, elo[j], ehi[j], &seed);
      memcpy(api_in[r][j], a.buf[r][j], N * 8);
    }
  test_run_ranks(W, premul_rank, &a, 10000, "premul f16/bf16/f64");
  for (r = 0; r < W && bad[0] == '\0'; r++)
    if (a.s[r] != COLL_OK)
      snprintf(bad, sizeof bad,
               "rank %d: premul over f16, bf16, f64 gave status %d: %s "
               "(nccl_enqueue.c must use coll__nccl_premul_scalar)",
               r, (int)a.s[r], a.text[r]);
  for (j = 0; j < 3 && bad[0] == '\0'; j++) {
    for (r = 0; r < W; r++)
      k[r] = model_round(api_ndts[j], (double)(0.1f * (float)(r + 1)));
    for (i = 0; i < N && bad[0] == '\0'; i++) {
      for (r = 0; r < W; r++) v[r] = elem(api_ndts[j], api_in[r][j], i);
      want = model_reduce(api_ndts[j], ncclSum, v, k);
      for (r = 0; r < W && bad[0] == '\0'; r++) {
        got = elem(api_ndts[j], a.buf[r][j], i);
        if (!same(got, want))
          snprintf(bad, sizeof bad,
                   "premul buffer %d element %zu rank %d: %a, model %a", j, i,
                   r, got, want);
      }
    }
  }
  api_free(&a); /* first, so that a failure leaks nothing */
  if (bad[0] != '\0') fail_msg("%s", bad);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_premul_scalar_values),
      cmocka_unit_test(test_premul_scalar_refusals),
      cmocka_unit_test(test_check_numerics),
      cmocka_unit_test_setup_teardown(test_standin_half_types, setup, teardown),
      cmocka_unit_test_setup_teardown(test_standin_wide_floats, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_standin_f16_overflow, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_standin_nan_minmax, setup, teardown),
      cmocka_unit_test_setup_teardown(test_standin_bf16_avg_bias, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_standin_int_avg, setup, teardown),
      cmocka_unit_test_setup_teardown(test_standin_premul, setup, teardown),
      cmocka_unit_test_setup_teardown(test_api_i8_avg_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_api_premul_half_types, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
