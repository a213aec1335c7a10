/* SPDX-License-Identifier: Apache-2.0 */
/* test_nccl_store.c: coll_comm_init_store building NCCL comms on the
 * stand-in: rank 0's unique id travels through the caller's store to the
 * other rank threads, and the comm sums device buffers; a unique id of the
 * wrong length, a rank 0 that never sets it, a failing set, an init that
 * fails on one rank (every rank returns the same), and an init ended
 * through the config's abort handle, a host without a driver. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include <cmocka.h>

#include "core/error.h"
#include "nccl_test_util.h"
#include "test_kv.h"
#include "test_util.h"

#define COUNT 5

typedef struct job {
  test_kv_t *kv;
  test_kv_view_t views[2];
  float *buf[2];
  coll_status_t s[2];
  char why[2][COLL_ERRMSG_MAX];
  int64_t timeout_ms; /* 0: 10 s */
} job_t;

static int setup(void **state) {
  setenv("COLL_BACKEND", "nccl", 1);
  return nt_setup2(state);
}

static int teardown(void **state) {
  unsetenv("COLL_BACKEND");
  return nt_teardown(state);
}

/* Each rank thread makes its own device current (two ranks of one NCCL
 * comm never share one), creates the comm, sums its buffer in place. */
static void rank_main(int rank, int world, void *arg) {
  job_t *j = arg;
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_store_ops_t ops;
  coll_comm_t *c = NULL;
  nt_set_device(rank);
  j->views[rank].kv = j->kv;
  test_kv_ops(&j->views[rank], &ops);
  cfg.timeout_ms = j->timeout_ms != 0 ? j->timeout_ms : 10000;
  j->s[rank] = coll_comm_init_store(&ops, rank, world, &cfg, &c);
  if (j->s[rank] == COLL_OK)
    j->s[rank] = coll_allreduce(c, j->buf[rank], j->buf[rank], COUNT, COLL_F32,
                                COLL_SUM, NULL);
  if (j->s[rank] != COLL_OK)
    snprintf(j->why[rank], sizeof j->why[rank], "%s", coll_last_error());
  coll_comm_destroy(c);
}

static void test_two_ranks(void **state) {
  job_t j;
  char id[256];
  int r, i;
  (void)state;
  memset(&j, 0, sizeof j);
  j.kv = test_kv_new();
  assert_non_null(j.kv);
  for (r = 0; r < 2; r++) {
    j.buf[r] = standin_dev_alloc(r, COUNT * sizeof(float));
    for (i = 0; i < COUNT; i++) j.buf[r][i] = (float)(r + 1) * (float)i;
  }
  test_run_ranks(2, rank_main, &j, 20000, "nccl comm from a caller's store");
  for (r = 0; r < 2; r++) {
    if (j.s[r] != COLL_OK) fail_msg("rank %d: %s", r, j.why[r]);
    for (i = 0; i < COUNT; i++)
      assert_float_equal(j.buf[r][i], 3.0f * (float)i, 0);
    standin_dev_free(j.buf[r]);
  }
  /* The id went through the store, beside each rank's compatibility
   * record and outcome (and nothing else did). */
  assert_int_equal(test_kv_count(j.kv), 5);
  assert_true(test_kv_peek(j.kv, "coll/nccl/unique_id", id, sizeof id));
  for (r = 0; r < 2; r++) {
    char key[32];
    snprintf(key, sizeof key, "coll/outcome/%d", r);
    assert_true(test_kv_peek(j.kv, key, id, sizeof id));
    assert_string_equal(id, "ok");
  }
  test_kv_free(j.kv);
  assert_true(nt_no_misuse());
}

/* Rank 1 alone on view v (rank 0's record and "ok" outcome planted), with
 * `planted` (len bytes) as the unique id when not NULL, and timeout_ms;
 * its status, and its text in why. */
static coll_status_t rank1_alone(test_kv_view_t *v, const void *planted,
                                 size_t len, int64_t timeout_ms, char *why) {
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_store_ops_t ops;
  coll_comm_t *c = NULL;
  coll_status_t s;
  test_kv_plant_peers(v->kv, 1, 2, 1);
  if (planted != NULL) test_kv_put(v->kv, "coll/nccl/unique_id", planted, len);
  test_kv_ops(v, &ops);
  cfg.timeout_ms = timeout_ms;
  nt_set_device(1);
  s = coll_comm_init_store(&ops, 1, 2, &cfg, &c);
  snprintf(why, COLL_ERRMSG_MAX, "%s", coll_last_error());
  assert_null(c);
  return s;
}

static void test_bad_unique_id(void **state) {
  test_kv_view_t v = {0};
  char why[COLL_ERRMSG_MAX], big[300];
  (void)state;
  v.kv = test_kv_new();
  assert_int_equal(rank1_alone(&v, "short", 5, 2000, why), COLL_ERR_PROTOCOL);
  if (strstr(why,
             "rank 1: nccl init: the unique id in the store "
             "('coll/nccl/unique_id') is 5 bytes, expected 128") == NULL)
    fail_msg("%s", why);
  memset(big, 1, sizeof big);
  assert_int_equal(rank1_alone(&v, big, sizeof big, 2000, why),
                   COLL_ERR_PROTOCOL);
  assert_non_null(strstr(why, "is 300 bytes, expected 128"));
  test_kv_free(v.kv);
}

static void test_rank0_never_sets(void **state) {
  test_kv_view_t v = {0};
  char why[COLL_ERRMSG_MAX];
  (void)state;
  v.kv = test_kv_new();
  assert_int_equal(rank1_alone(&v, NULL, 0, 300, why), COLL_ERR_TIMEOUT);
  if (strstr(why,
             "rank 1: nccl init: rank 0 did not set the NCCL unique id "
             "('coll/nccl/unique_id') in the store within ") == NULL)
    fail_msg("%s", why);
  test_kv_free(v.kv);
}

static void test_set_fails(void **state) {
  test_kv_view_t v = {0};
  coll_store_ops_t ops;
  coll_comm_t *c = NULL;
  char val[8];
  (void)state;
  v.kv = test_kv_new();
  v.fail_set = COLL_ERR_SYSTEM;
  v.fail_text = "kv service down";
  v.only = "nccl/";
  test_kv_plant_peers(v.kv, 0, 2, 1);
  test_kv_ops(&v, &ops);
  nt_set_device(0);
  assert_int_equal(coll_comm_init_store(&ops, 0, 2, NULL, &c), COLL_ERR_SYSTEM);
  assert_null(c);
  assert_non_null(strstr(coll_last_error(),
                         "rank 0: nccl init: the store's set of "
                         "'coll/nccl/unique_id' failed: kv service down"));
  assert_false(test_kv_peek(v.kv, "coll/nccl/unique_id", val, sizeof val));
  test_kv_free(v.kv);
}

/* Rank 1's NCCL init fails (the stand-in refuses it) while rank 0 waits in
 * its own for rank 1: both return the same status and the same text,
 * naming both ranks and why each failed. */
static void test_init_fails_on_one_rank(void **state) {
  job_t j;
  int r;
  (void)state;
  memset(&j, 0, sizeof j);
  j.kv = test_kv_new();
  assert_non_null(j.kv);
  for (r = 0; r < 2; r++)
    j.buf[r] = standin_dev_alloc(r, COUNT * sizeof(float));
  standin_fail_init(1, ncclSystemError);
  j.timeout_ms = 1000;
  test_run_ranks(2, rank_main, &j, 20000, "nccl init failing on rank 1");
  for (r = 0; r < 2; r++) {
    if (j.s[r] != COLL_ERR_TIMEOUT)
      fail_msg("rank %d: %s: %s", r, coll_status_name(j.s[r]), j.why[r]);
    standin_dev_free(j.buf[r]);
  }
  if (strcmp(j.why[0], j.why[1]) != 0)
    fail_msg("the ranks differ:\n  %s\n  %s", j.why[0], j.why[1]);
  if (strstr(j.why[0],
             "comm_init_store: setup failed on 2 of 2 ranks "
             "(ranks 0, 1); rank 0: ") == NULL ||
      strstr(j.why[0], "NCCL's init did not finish") == NULL ||
      strstr(j.why[0],
             "; rank 1: comm_init_rank: ncclCommInitRankConfig: "
             "NCCL error 2") == NULL)
    fail_msg("%s", j.why[0]);
  test_kv_free(j.kv);
}

static void aborter(void *p) {
  test_sleep_ms(100);
  coll_abort(p);
}

/* Rank 0 of 2 sets the id and waits in NCCL's init for a rank 1 that
 * arrived (its record is planted) but never joins NCCL: coll_abort on the
 * config's handle ends it, and rank 0 returns at once, without waiting
 * for rank 1's outcome (20 s), having reported its own. */
static void test_abort_ends_init(void **state) {
  test_kv_view_t v = {0};
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_abort_handle_t *h = NULL;
  coll_store_ops_t ops;
  coll_comm_t *c = NULL;
  char want[16], got[64];
  uv_thread_t th;
  (void)state;
  v.kv = test_kv_new();
  test_kv_plant_peers(v.kv, 0, 2, 0);
  test_kv_ops(&v, &ops);
  assert_int_equal(coll_abort_handle_create(&h), COLL_OK);
  cfg.abort_handle = h;
  cfg.timeout_ms = 20000;
  nt_set_device(0);
  assert_int_equal(uv_thread_create(&th, aborter, h), 0);
  assert_int_equal(coll_comm_init_store(&ops, 0, 2, &cfg, &c),
                   COLL_ERR_ABORTED);
  if (strstr(coll_last_error(), "setup failed") != NULL)
    fail_msg("waited for rank 1: %s", coll_last_error());
  uv_thread_join(&th);
  assert_null(c);
  /* Rank 1 would read why. */
  snprintf(want, sizeof want, "%d ", (int)COLL_ERR_ABORTED);
  assert_true(test_kv_peek(v.kv, "coll/outcome/0", got, sizeof got));
  if (strncmp(got, want, strlen(want)) != 0) fail_msg("outcome/0: %s", got);
  coll_abort_handle_release(h);
  test_kv_free(v.kv);
  assert_true(nt_no_misuse());
}

/* COLL_BACKEND=nccl on a host without a CUDA driver: NOT_AVAILABLE at
 * once, saying why, before the store is touched. */
static void test_no_driver(void **state) {
  test_kv_view_t v = {0};
  standin_config_t sc;
  coll_store_ops_t ops;
  coll_comm_t *c = NULL;
  (void)state;
  standin_uninstall();
  memset(&sc, 0, sizeof sc);
  sc.ndev = 1;
  sc.no_driver = 1;
  standin_install(&sc);
  v.kv = test_kv_new();
  test_kv_ops(&v, &ops);
  assert_int_equal(coll_comm_init_store(&ops, 1, 2, NULL, &c),
                   COLL_ERR_NOT_AVAILABLE);
  assert_null(c);
  assert_non_null(
      strstr(coll_last_error(), "comm_init_store: COLL_BACKEND=nccl"));
  assert_int_equal(test_kv_count(v.kv), 0);
  test_kv_free(v.kv);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_two_ranks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_unique_id, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rank0_never_sets, setup, teardown),
      cmocka_unit_test_setup_teardown(test_set_fails, setup, teardown),
      cmocka_unit_test_setup_teardown(test_init_fails_on_one_rank, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_abort_ends_init, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_driver, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
