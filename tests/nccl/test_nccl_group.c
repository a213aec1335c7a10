/* SPDX-License-Identifier: Apache-2.0 */
/* test_nccl_group.c: NCCL groups on the stand-in: validation of the device
 * list, the caller's current device kept, collectives over one buffer per
 * device, root and stream checks, split and ownership. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cuda/gpu_table.h"
#include "nccl_test_util.h"
#include "test_util.h"

static void expect_create_error(const int *devs, int ndev, const char *text) {
  coll_group_t *g = (coll_group_t *)(uintptr_t)1;
  coll_status_t s = coll_group_create(devs, ndev, &g);
  assert_int_equal(s, COLL_ERR_INVALID_ARG);
  assert_null(g);
  if (strstr(coll_last_error(), text) == NULL)
    fail_msg("error text \"%s\" lacks \"%s\"", coll_last_error(), text);
}

static void test_create_validation(void **state) {
  int dup[] = {0, 2, 0}, neg[] = {1, -1}, absent[] = {0, 7}, ok[] = {3};
  standin_stats_t st;
  coll_group_t *g = NULL;
  (void)state;
  expect_create_error(ok, 0, "empty");
  expect_create_error(NULL, 1, "devices is NULL");
  expect_create_error(dup, 3, "device 0 is listed twice");
  expect_create_error(neg, 2, "device -1 (entry 1) is negative");
  expect_create_error(absent, 2, "device 7 (entry 1) is not present");
  standin_stats(&st);
  assert_int_equal(st.comms_live, 0); /* refused before NCCL saw them */
  assert_int_equal(coll_group_create(ok, 1, &g), COLL_OK);
  assert_int_equal(coll_group_size(g), 1);
  assert_int_equal(coll_group_devices(g)[0], 3);
  assert_int_equal(coll_group_destroy(g), COLL_OK);
  assert_int_equal(coll_group_destroy(NULL), COLL_OK);
  assert_true(nt_no_misuse());
}

/* Fills bufs[i] (on devs[i]) with i + 1 + k/8 and checks the sum. */
static void test_allreduce_and_device_kept(void **state) {
  int devs[] = {3, 0, 2};
  enum { N = 1000 };
  float *bufs[3];
  coll_group_t *g = NULL;
  standin_stats_t before, after;
  int i, k;
  (void)state;
  nt_set_device(1);
  assert_int_equal(coll_group_create(devs, 3, &g), COLL_OK);
  assert_int_equal(nt_current_device(), 1);
  for (i = 0; i < 3; i++) {
    bufs[i] = standin_dev_alloc(devs[i], N * sizeof(float));
    for (k = 0; k < N; k++) bufs[i][k] = (float)(i + 1) + (float)k / 8;
  }
  standin_stats(&before);
  assert_int_equal(coll_group_allreduce(g, (void *const *)bufs, 3, N, COLL_F32,
                                        COLL_SUM, NULL, 0),
                   COLL_OK);
  standin_stats(&after);
  assert_int_equal(after.group_ends - before.group_ends, 1); /* one launch */
  assert_int_equal(nt_current_device(), 1);
  for (i = 0; i < 3; i++)
    for (k = 0; k < N; k++)
      assert_float_equal(bufs[i][k], 6.0f + 3.0f * (float)k / 8, 0);
  assert_int_equal(coll_group_allreduce(g, (void *const *)bufs, 3, N, COLL_F32,
                                        COLL_AVG, NULL, 0),
                   COLL_OK);
  assert_float_equal(bufs[2][8], 9.0f, 0); /* the mean of equal sums */
  assert_int_equal(nt_current_device(), 1);
  assert_int_equal(coll_group_destroy(g), COLL_OK);
  assert_int_equal(nt_current_device(), 1);
  for (i = 0; i < 3; i++) standin_dev_free(bufs[i]);
  assert_true(nt_no_misuse());
}

/* NCCL comms keep NCCL's wrap-around for 8-bit sums (DESIGN 3.5). */
static void test_i8_wraps(void **state) {
  int devs[] = {0, 1};
  int8_t *bufs[2];
  coll_group_t *g = NULL;
  int i;
  (void)state;
  assert_int_equal(coll_group_create(devs, 2, &g), COLL_OK);
  for (i = 0; i < 2; i++) {
    bufs[i] = standin_dev_alloc(devs[i], 1);
    bufs[i][0] = 100;
  }
  assert_int_equal(coll_group_allreduce(g, (void *const *)bufs, 2, 1, COLL_I8,
                                        COLL_SUM, NULL, 0),
                   COLL_OK);
  assert_int_equal(bufs[0][0], -56);
  assert_int_equal(bufs[1][0], -56);
  coll_group_destroy(g);
  for (i = 0; i < 2; i++) standin_dev_free(bufs[i]);
}

static void test_call_checks(void **state) {
  int devs[] = {0, 1};
  float *bufs[2], *host = calloc(4, sizeof(float));
  void *wrong[2];
  void *streams[2] = {NULL, NULL};
  coll_group_t *g = NULL;
  (void)state;
  assert_int_equal(coll_group_create(devs, 2, &g), COLL_OK);
  bufs[0] = standin_dev_alloc(0, 4 * sizeof(float));
  bufs[1] = standin_dev_alloc(1, 4 * sizeof(float));
  assert_int_equal(coll_group_allreduce(g, (void *const *)bufs, 1, 4, COLL_F32,
                                        COLL_SUM, NULL, 0),
                   COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "1 buffers for a group of 2"));
  assert_int_equal(coll_group_allreduce(g, (void *const *)bufs, 2, 4, COLL_F32,
                                        COLL_SUM, streams, 1),
                   COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "nstreams is 1"));
  assert_int_equal(coll_group_allreduce(g, (void *const *)bufs, 2, 4, COLL_F32,
                                        COLL_SUM, NULL, 2),
                   COLL_ERR_INVALID_ARG);
  assert_int_equal(coll_group_allreduce(g, (void *const *)bufs, 2, 4, COLL_F32,
                                        COLL_OP_COUNT, NULL, 0),
                   COLL_ERR_INVALID_ARG);
  /* Buffers swapped: each lives on the other rank's device. */
  wrong[0] = bufs[1];
  wrong[1] = bufs[0];
  assert_int_equal(
      coll_group_allreduce(g, wrong, 2, 4, COLL_F32, COLL_SUM, NULL, 0),
      COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "CUDA device 1"));
  wrong[0] = bufs[0];
  wrong[1] = host;
  assert_int_equal(
      coll_group_allreduce(g, wrong, 2, 4, COLL_F32, COLL_SUM, NULL, 0),
      COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "host memory"));
  /* Roots are ranks of the group. */
  assert_int_equal(
      coll_group_broadcast(g, (void *const *)bufs, 2, 4, COLL_F32, 2, NULL, 0),
      COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "root 2 is out of range"));
  assert_int_equal(
      coll_group_broadcast(g, (void *const *)bufs, 2, 4, COLL_F32, -1, NULL, 0),
      COLL_ERR_INVALID_ARG);
  coll_group_destroy(g);
  standin_dev_free(bufs[0]);
  standin_dev_free(bufs[1]);
  free(host);
  assert_true(nt_no_misuse());
}

static void test_broadcast_with_streams(void **state) {
  const coll_nccl_table_t *t = coll__nccl_table();
  int devs[] = {2, 1, 0}, i, k;
  double *bufs[3];
  cudaStream_t streams[3];
  coll_group_t *g = NULL;
  (void)state;
  for (i = 0; i < 3; i++) {
    nt_set_device(devs[i]);
    assert_int_equal(t->cuda_stream_create(&streams[i]), cudaSuccess);
    bufs[i] = standin_dev_alloc(devs[i], 64 * sizeof(double));
    for (k = 0; k < 64; k++) bufs[i][k] = i * 100 + k;
  }
  nt_set_device(0);
  assert_int_equal(coll_group_create(devs, 3, &g), COLL_OK);
  assert_int_equal(coll_group_broadcast(g, (void *const *)bufs, 3, 64, COLL_F64,
                                        1, (void *const *)streams, 3),
                   COLL_OK);
  for (i = 0; i < 3; i++)
    for (k = 0; k < 64; k++) assert_float_equal(bufs[i][k], 100 + k, 0);
  assert_int_equal(nt_current_device(), 0);
  coll_group_destroy(g);
  for (i = 0; i < 3; i++) standin_dev_free(bufs[i]);
  assert_true(nt_no_misuse());
}

struct split_arg {
  coll_comm_t **comms;
  float *bufs[4];
  coll_status_t s[4];
};

static void split_rank(int rank, int world, void *p) {
  struct split_arg *a = p;
  (void)world;
  a->s[rank] = coll_allreduce(a->comms[rank], a->bufs[rank], a->bufs[rank], 16,
                              COLL_F32, COLL_MAX, NULL);
}

static void test_split_and_ownership(void **state) {
  int devs[] = {0, 1, 2, 3}, i, k;
  coll_comm_t *comms[4] = {0};
  struct split_arg a;
  standin_stats_t st;
  coll_group_t *g = NULL;
  (void)state;
  assert_int_equal(coll_group_create(devs, 4, &g), COLL_OK);
  assert_int_equal(coll_group_split(g, comms), COLL_OK);
  assert_int_equal(coll_group_size(g), 0); /* left empty */
  assert_null(coll_group_devices(g));
  assert_int_equal(coll_group_split(g, comms), COLL_ERR_INVALID_ARG);
  assert_int_equal(
      coll_group_allreduce(g, NULL, 4, 1, COLL_F32, COLL_SUM, NULL, 0),
      COLL_ERR_INVALID_ARG);
  assert_int_equal(coll_group_destroy(g), COLL_OK); /* leaves the comms */
  standin_stats(&st);
  assert_int_equal(st.comms_live, 4);
  memset(&a, 0, sizeof a);
  a.comms = comms;
  for (i = 0; i < 4; i++) {
    assert_int_equal(coll_comm_rank(comms[i]), i);
    assert_int_equal(coll_comm_size(comms[i]), 4);
    assert_string_equal(coll_comm_backend(comms[i]), "nccl");
    a.bufs[i] = standin_dev_alloc(i, 16 * sizeof(float));
    for (k = 0; k < 16; k++) a.bufs[i][k] = (float)(i * k);
  }
  test_run_ranks(4, split_rank, &a, 10000, "split comms allreduce");
  for (i = 0; i < 4; i++) {
    assert_int_equal(a.s[i], COLL_OK);
    for (k = 0; k < 16; k++) assert_float_equal(a.bufs[i][k], 3.0f * k, 0);
    assert_int_equal(coll_comm_destroy(comms[i]), COLL_OK);
    standin_dev_free(a.bufs[i]);
  }
  standin_stats(&st);
  assert_int_equal(st.comms_live, 0);
  assert_int_equal(st.destroy_blocked, 0);
  assert_true(nt_no_misuse());
}

static void test_deferred_streams(void **state) {
  int devs[] = {0, 1};
  int32_t *bufs[2];
  coll_group_t *g = NULL;
  int i;
  (void)state;
  standin_uninstall();
  nt_install(2, 1, 0);
  assert_int_equal(coll_group_create(devs, 2, &g), COLL_OK);
  for (i = 0; i < 2; i++) {
    bufs[i] = standin_dev_alloc(i, 3 * sizeof(int32_t));
    bufs[i][0] = i + 1;
    bufs[i][1] = -7 * (i + 1);
    bufs[i][2] = INT32_MAX; /* wraps like NCCL */
  }
  assert_int_equal(coll_group_allreduce(g, (void *const *)bufs, 2, 3, COLL_I32,
                                        COLL_SUM, NULL, 0),
                   COLL_OK);
  assert_int_equal(bufs[1][0], 3);
  assert_int_equal(bufs[1][1], -21);
  assert_int_equal(bufs[0][2], -2);
  coll_group_destroy(g);
  for (i = 0; i < 2; i++) standin_dev_free(bufs[i]);
}

static void test_not_available(void **state) {
  standin_config_t cfg;
  int devs[] = {0};
  coll_group_t *g = NULL;
  (void)state;
  standin_uninstall();
  memset(&cfg, 0, sizeof cfg);
  cfg.ndev = 2;
  cfg.no_nccl = 1;
  standin_install(&cfg);
  assert_int_equal(coll_group_create(devs, 1, &g), COLL_ERR_NOT_AVAILABLE);
  assert_non_null(strstr(coll_last_error(), "NCCL could not be loaded"));
  standin_uninstall();
  cfg.no_nccl = 0;
  cfg.no_driver = 1;
  standin_install(&cfg);
  assert_int_equal(coll_group_create(devs, 1, &g), COLL_ERR_NOT_AVAILABLE);
  assert_non_null(strstr(coll_last_error(), "driver"));
  assert_null(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_create_validation, nt_setup4,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_allreduce_and_device_kept, nt_setup4,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_i8_wraps, nt_setup4, nt_teardown),
      cmocka_unit_test_setup_teardown(test_call_checks, nt_setup4, nt_teardown),
      cmocka_unit_test_setup_teardown(test_broadcast_with_streams, nt_setup4,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_split_and_ownership, nt_setup4,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_deferred_streams, nt_setup4,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_not_available, nt_setup4,
                                      nt_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
