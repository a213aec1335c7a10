/* SPDX-License-Identifier: Apache-2.0 */
/* test_nccl_device.c: the calling thread's CUDA state around a call on an
 * NCCL comm of another device (N13 of the second review). A thread whose
 * current context is one it made (cuCtxCreate, a green context) gets that
 * context back, not its device's primary one; with a runtime before CUDA
 * 12, where cudaSetDevice binds no context, a thread that chose a device
 * without using it yet keeps that choice, and no context is made there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cuda/gpu_table.h"
#include "nccl_test_util.h"
#include "test_util.h"

/* A world-1 comm on device 1, and what a thread saw after a call on it. */
typedef struct job {
  coll_unique_id_t id;
  coll_comm_t *c;
  coll_status_t s;
  float *buf;
  CUcontext made, after;
  int dev_after;
} job_t;

static void init_on_device1(int rank, int world, void *p) {
  job_t *j = p;
  (void)rank, (void)world;
  nt_set_device(1);
  j->s = coll_comm_init_rank(0, 1, &j->id, NULL, &j->c);
}

static void open_comm(job_t *j) {
  memset(j, 0, sizeof *j);
  assert_int_equal(coll_unique_id_create(&j->id), COLL_OK);
  test_run_ranks(1, init_on_device1, j, 10000, "init on device 1");
  assert_int_equal(j->s, COLL_OK);
  j->buf = standin_dev_alloc(1, 4 * sizeof(float));
}

static void close_comm(job_t *j) {
  assert_int_equal(coll_comm_destroy(j->c), COLL_OK);
  standin_dev_free(j->buf);
}

/* The call both tests make: a sum on device 1, then what is current. */
static void call_and_look(job_t *j) {
  const coll_nccl_table_t *t = coll__nccl_table();
  j->s = coll_allreduce(j->c, j->buf, j->buf, 4, COLL_F32, COLL_SUM, NULL);
  if (t->cu_ctx_get_current(&j->after) != CUDA_SUCCESS) j->after = NULL;
  if (t->cuda_get_device(&j->dev_after) != cudaSuccess) j->dev_after = -1;
}

static void made_context_thread(int rank, int world, void *p) {
  job_t *j = p;
  (void)rank, (void)world;
  coll__nccl_table()->cu_ctx_set_current(j->made);
  call_and_look(j);
}

/* (a) A context the thread made on device 0 is current again after a call
 * on device 1. Before, the device was restored, which binds device 0's
 * primary context instead. */
static void test_made_context_comes_back(void **state) {
  job_t j;
  (void)state;
  open_comm(&j);
  j.made = standin_ctx_create(0);
  test_run_ranks(1, made_context_thread, &j, 10000, "call from a made ctx");
  assert_int_equal(j.s, COLL_OK);
  assert_ptr_equal(j.after, j.made);
  assert_int_equal(j.dev_after, 0);
  close_comm(&j);
  assert_true(nt_no_misuse());
}

static void chosen_device_thread(int rank, int world, void *p) {
  job_t *j = p;
  (void)rank, (void)world;
  nt_set_device(2); /* chosen, not used: no context yet (CUDA 11) */
  call_and_look(j);
}

/* (b) With a CUDA 11 runtime, a thread that chose device 2 and has no
 * context yet still has device 2 chosen after a call on device 1, still
 * without a context, and none was made on device 2. Before, dropping the
 * context left device 1 chosen. */
static void test_cuda11_choice_kept(void **state) {
  standin_config_t cfg;
  standin_stats_t st;
  job_t j;
  (void)state;
  standin_uninstall();
  memset(&cfg, 0, sizeof cfg);
  cfg.ndev = 3;
  cfg.cuda_runtime = 11080;
  standin_install(&cfg);
  open_comm(&j);
  test_run_ranks(1, chosen_device_thread, &j, 10000, "call after a choice");
  assert_int_equal(j.s, COLL_OK);
  assert_null(j.after);
  assert_int_equal(j.dev_after, 2);
  standin_stats(&st);
  assert_int_equal(st.contexts & (1u << 2), 0);
  close_comm(&j);
  assert_true(nt_no_misuse());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_made_context_comes_back, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_cuda11_choice_kept, nt_setup2,
                                      nt_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
