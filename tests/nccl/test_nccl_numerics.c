/* SPDX-License-Identifier: Apache-2.0 */
/* test_nccl_numerics.c: what reductions compute on NCCL comms: the
 * helpers of src/nccl/nccl_premul.c, and the stand-in's reductions, called
 * through the NCCL table, against a model of NCCL 2.28's kernels
 * (numerics_model.c). test_nccl_numerics_api.c checks libcoll's calls.
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
#include "numerics_model.h"
#include "test_util.h"

#define N 4096

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

/* Destroys the comms; poisoned ones (their state is an error, which
 * ncclCommDestroy would return) are aborted. */
static void tri_free(tri_t *x) {
  int i;
  for (i = 0; i < W; i++) {
    ncclResult_t state = ncclSuccess;
    x->t->nccl_comm_get_async_error(x->c[i], &state);
    if (state == ncclSuccess)
      assert_int_equal(x->t->nccl_comm_destroy(x->c[i]), ncclSuccess);
    else
      assert_int_equal(x->t->nccl_comm_abort(x->c[i]), ncclSuccess);
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
    if (i == 3) /* an f64 op with f32 buffers: NCCL's invalid argument */
      assert_int_equal(tri_allreduce(&x, 1, ncclFloat32, ops),
                       ncclInvalidArgument);
    for (r = 0; r < W; r++)
      assert_int_equal(x.t->nccl_red_op_destroy(ops[r], x.c[r]), ncclSuccess);
  }
  /* NCCL keeps an argument error as a nonblocking comm's state
   * (enqueue.cc:2660-2661): every later call reports it. */
  for (r = 0; r < W; r++) {
    ncclResult_t poison = ncclSuccess;
    assert_int_equal(x.t->nccl_comm_get_async_error(x.c[r], &poison),
                     ncclSuccess);
    assert_int_equal(poison, ncclInvalidArgument);
    ops[r] = ncclSum;
  }
  assert_int_equal(tri_allreduce(&x, 1, ncclFloat32, ops), ncclInvalidArgument);
  tri_free(&x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_premul_scalar_values),
      cmocka_unit_test(test_premul_scalar_refusals),
      cmocka_unit_test(test_check_numerics),
      cmocka_unit_test_setup_teardown(test_standin_half_types, nt_setup3,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_standin_wide_floats, nt_setup3,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_standin_f16_overflow, nt_setup3,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_standin_nan_minmax, nt_setup3,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_standin_bf16_avg_bias, nt_setup3,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_standin_int_avg, nt_setup3,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_standin_premul, nt_setup3,
                                      nt_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
