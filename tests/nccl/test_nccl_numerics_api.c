/* SPDX-License-Identifier: Apache-2.0 */
/* test_nccl_numerics_api.c: libcoll's calls on NCCL comms against the
 * numerics NCCL has (numerics_model.c): i8 AVG refused before any NCCL call
 * (NCCL wraps the sum before it divides), i32 AVG kept; a premul batch over
 * f16, bf16 and f64, one op per dtype with the factor in that dtype, bit for
 * bit against the model. */
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
      cmocka_unit_test_setup_teardown(test_api_i8_avg_refused, nt_setup3,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_api_premul_half_types, nt_setup3,
                                      nt_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
