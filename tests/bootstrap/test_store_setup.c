/* SPDX-License-Identifier: Apache-2.0 */
/* test_store_setup.c: coll_comm_init_store gives the guarantees the
 * rendezvous gives, through the caller's store: ranks of incompatible
 * builds all fail at once, one link that cannot connect fails every rank
 * with the same status and text, and a rank that never arrives is named by
 * every other at the timeout. Four rank threads meet through an in-memory
 * store (tests/common/test_kv.c); test hooks (rendezvous.h) make one rank
 * claim other versions or publish a dead address. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "boot_test.h"
#include "bootstrap/rendezvous/rendezvous.h"
#include "core/error.h"
#include "test_kv.h"
#include "test_util.h"

#define WORLD 4
#define COUNT 1000

typedef struct job {
  test_kv_t *kv;
  int64_t timeout_ms;
  int absent; /* this rank never calls; -1: none */
  test_kv_view_t views[WORLD];
  coll_status_t s[WORLD];
  char why[WORLD][COLL_ERRMSG_MAX];
  int wrong[WORLD];
} job_t;

static int setup(void **state) {
  (void)state;
  unsetenv("COLL_TIMEOUT_MS");
  setenv("COLL_BACKEND", "cpu", 1);
  setenv("COLL_SOCKET_IFNAME", "lo", 1);
  coll__rdv_test_hooks = (coll_rdv_test_hooks_t)COLL_RDV_TEST_HOOKS_OFF;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  unsetenv("COLL_BACKEND");
  unsetenv("COLL_SOCKET_IFNAME");
  coll__rdv_test_hooks = (coll_rdv_test_hooks_t)COLL_RDV_TEST_HOOKS_OFF;
  return 0;
}

/* One rank: create, and when that worked, one allreduce checked against
 * the serial sum. Records the status and text for the test thread. */
static void rank_main(int rank, int world, void *arg) {
  job_t *j = arg;
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_store_ops_t ops;
  coll_comm_t *c = NULL;
  int32_t x[COUNT];
  int i;
  if (rank == j->absent) return;
  j->views[rank].kv = j->kv;
  test_kv_ops(&j->views[rank], &ops);
  cfg.timeout_ms = j->timeout_ms;
  j->s[rank] = coll_comm_init_store(&ops, rank, world, &cfg, &c);
  if (j->s[rank] == COLL_OK) {
    for (i = 0; i < COUNT; i++) x[i] = rank * 7 + i;
    j->s[rank] = coll_allreduce(c, x, x, COUNT, COLL_I32, COLL_SUM, NULL);
    for (i = 0; j->s[rank] == COLL_OK && i < COUNT; i++)
      if (x[i] != 7 * (0 + 1 + 2 + 3) + WORLD * i) j->wrong[rank]++;
  }
  if (j->s[rank] != COLL_OK)
    snprintf(j->why[rank], sizeof j->why[rank], "%s", coll_last_error());
  coll_comm_destroy(c);
}

static job_t *new_job(int64_t timeout_ms) {
  job_t *j = calloc(1, sizeof *j);
  assert_non_null(j);
  j->kv = test_kv_new();
  assert_non_null(j->kv);
  j->timeout_ms = timeout_ms;
  j->absent = -1;
  return j;
}

static void free_job(job_t *j) {
  test_kv_free(j->kv);
  free(j);
}

/* Every rank in `ranks` failed with status s and the very same text. */
/* Every rank in ranks: status s and one text (bt_expect_same_failure). */
static void assert_same_failure(const job_t *j, const int *ranks, int n,
                                coll_status_t s) {
  bt_expect_same_failure(j->s, j->why, ranks, n, s);
}

/* The hooks off, the sums right on every rank: the baseline the failures
 * below differ from. */
static void test_all_ok(void **state) {
  job_t *j = new_job(30000);
  int r;
  (void)state;
  test_run_ranks(WORLD, rank_main, j, 60000, "four ranks");
  for (r = 0; r < WORLD; r++) {
    if (j->s[r] != COLL_OK) fail_msg("rank %d: %s", r, j->why[r]);
    assert_int_equal(j->wrong[r], 0);
  }
  free_job(j);
}

/* Rank 2 claims libcoll 0.2.0 and wire 2: every rank fails with PROTOCOL
 * naming it, long before its 120 s timeout (the run is bounded by 30 s:
 * waiting for the timeout would be a HANG), and no rank set an address. */
static void test_version_mismatch(void **state) {
  static const int all[WORLD] = {0, 1, 2, 3};
  job_t *j = new_job(120000);
  char val[8];
  (void)state;
  coll__rdv_test_hooks.claim_rank = 2;
  coll__rdv_test_hooks.claim_version = 200;
  coll__rdv_test_hooks.claim_wire = 2;
  test_run_ranks(WORLD, rank_main, j, 30000, "version mismatch");
  assert_same_failure(j, all, WORLD, COLL_ERR_PROTOCOL);
  bt_must_contain(j->why[0],
                  "comm_init_store: store bootstrap: ranks built or configured "
                  "incompatibly: rank 2 runs libcoll 0.2.0 wire 2");
  bt_must_contain(j->why[0], "ranks 0, 1, 3 run libcoll ");
  assert_false(test_kv_peek(j->kv, "coll/addr/0", val, sizeof val));
  free_job(j);
}

/* Rank 2 publishes a port nobody listens on: only the link 2-3 (rank 3
 * dials rank 2) cannot connect, and still no rank returns OK: all four
 * return the same status and text, naming ranks 2 and 3 and why. */
static void test_one_link_down(void **state) {
  static const int all[WORLD] = {0, 1, 2, 3};
  job_t *j = new_job(3000);
  char bogus[64];
  int dead_fd;
  (void)state;
  /* Held shut for the whole run: a port found free and closed again may be
   * taken by another test's listener meanwhile. */
  snprintf(bogus, sizeof bogus, "127.0.0.1:%d",
           bt_dead_port("127.0.0.1", &dead_fd));
  assert_true(dead_fd >= 0);
  coll__rdv_test_hooks.publish_rank = 2;
  coll__rdv_test_hooks.publish_addr = bogus;
  test_run_ranks(WORLD, rank_main, j, 60000, "one link down");
  assert_same_failure(j, all, WORLD, COLL_ERR_TIMEOUT);
  bt_must_contain(j->why[0],
                  "comm_init_store: setup failed on 2 of 4 ranks (ranks 2, 3)");
  bt_must_contain(j->why[0], "no connection from rank 3 (rank 3: ");
  bt_must_contain(j->why[0], "no connection to rank 2 (rank 2 at ");
  /* A side with nothing missing is left out, not called "none". */
  bt_must_not_contain(j->why[0], "none");
  bt_must_contain(j->why[0], "onnection refused");
  close(dead_fd);
  free_job(j);
}

/* Rank 3 never calls: the other three fail at the timeout with the same
 * status and text, naming it. */
static void test_rank_never_arrives(void **state) {
  static const int others[3] = {0, 1, 2};
  job_t *j = new_job(1000);
  (void)state;
  j->absent = 3;
  test_run_ranks(WORLD, rank_main, j, 60000, "rank 3 absent");
  assert_same_failure(j, others, 3, COLL_ERR_TIMEOUT);
  bt_must_contain(
      j->why[0],
      "comm_init_store: store bootstrap: 1 of 4 ranks did not arrive "
      "within 1000 ms (no coll/compat/<rank> in the store): rank 3");
  free_job(j);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_all_ok, setup, teardown),
      cmocka_unit_test_setup_teardown(test_version_mismatch, setup, teardown),
      cmocka_unit_test_setup_teardown(test_one_link_down, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rank_never_arrives, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
