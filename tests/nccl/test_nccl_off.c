/* SPDX-License-Identifier: Apache-2.0 */
/* test_nccl_off.c: libcoll built without the NCCL backend: every NCCL entry
 * point answers COLL_ERR_NOT_AVAILABLE and says why; every pointer is host
 * memory; COLL_BACKEND=nccl is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/env_init.h"
#include "cuda/staging.h"
#include "nccl/nccl_env.h"
#include "test_util.h"

#define WHY "built without the NCCL backend"

static void expect_not_built(coll_status_t s) {
  assert_int_equal(s, COLL_ERR_NOT_AVAILABLE);
  if (strstr(coll_last_error(), WHY) == NULL)
    fail_msg("\"%s\" lacks \"%s\"", coll_last_error(), WHY);
}

static void test_entry_points(void **state) {
  coll_unique_id_t id;
  coll_comm_t *c = (coll_comm_t *)(uintptr_t)1;
  coll_group_t *g = (coll_group_t *)(uintptr_t)1;
  int dev = 0;
  float x = 0, *bufs[1] = {&x};
  (void)state;
  memset(&id, 0, sizeof id);
  expect_not_built(coll_unique_id_create(&id));
  expect_not_built(coll_comm_init_rank(0, 1, &id, NULL, &c));
  assert_null(c);
  expect_not_built(coll_group_create(&dev, 1, &g));
  assert_null(g);
  expect_not_built(coll_group_allreduce(NULL, (void *const *)bufs, 1, 1,
                                        COLL_F32, COLL_SUM, NULL, 0));
  expect_not_built(coll_group_broadcast(NULL, (void *const *)bufs, 1, 1,
                                        COLL_F32, 0, NULL, 0));
  expect_not_built(coll_group_split(NULL, &c));
  assert_int_equal(coll_group_size(NULL), 0);
  assert_null(coll_group_devices(NULL));
  assert_int_equal(coll_group_destroy(NULL), COLL_OK);
  expect_not_built(coll__env_nccl_comm(NULL, 0, 1, NULL, 0, &c));
}

static void test_env_and_staging(void **state) {
  float buf[2] = {1, 2};
  coll_work_t w;
  (void)state;
  unsetenv("COLL_BACKEND");
  assert_int_equal(coll__nccl_env_selected(), 0);
  setenv("COLL_BACKEND", "nccl", 1);
  assert_int_equal(coll__nccl_env_selected(), -1);
  expect_not_built(COLL_ERR_NOT_AVAILABLE);
  unsetenv("COLL_BACKEND");
  memset(&w, 0, sizeof w);
  w.kind = COLL_WORK_ALLREDUCE;
  w.send = w.recv = buf;
  w.count = 2;
  assert_int_equal(coll__work_on_device(&w), 0);
}

/* The CPU features work as ever. */
static void test_cpu_comm_works(void **state) {
  coll_comm_t *comms[1];
  float x = 3;
  (void)state;
  assert_int_equal(test_inproc_comms(1, 0, comms), 0);
  assert_int_equal(
      coll_allreduce(comms[0], &x, &x, 1, COLL_F32, COLL_SUM, NULL), COLL_OK);
  assert_float_equal(x, 3, 0);
  test_destroy_comms(1, comms);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_entry_points),
      cmocka_unit_test(test_env_and_staging),
      cmocka_unit_test(test_cpu_comm_works),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
