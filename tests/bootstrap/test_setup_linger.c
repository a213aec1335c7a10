/* SPDX-License-Identifier: Apache-2.0 */
/* test_setup_linger.c: rank 0 keeps its store up while slow ranks are still
 * reading the setup's verdict. Every rank reads it from rank 0's store;
 * with many ranks on few cores the last ones finish seconds after the
 * first. Here rank r starts reading r * STEP_MS late, so the last
 * finishes well past one COLL_RDV_GRACE_MS (1.5 s) after rank 0, each
 * within one of the rank before: every rank's setup must succeed. (Before,
 * rank 0 closed its store one grace after its own verdict and ranks 3 and 4
 * failed with "the store's get of 'outcome/N' failed".) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "boot_test.h"
#include "bootstrap/rendezvous/rendezvous.h"
#include "core/error.h"
#include "test_util.h"

#define WORLD 5
/* Rank r starts reading r * STEP_MS late: rank 4 2.8 s after rank 0, while
 * each rank finishes 0.7 s after the one before, half the grace. */
#define STEP_MS 700
#define TIMEOUT_MS 30000

typedef struct job {
  int store_port;
  coll_status_t s[WORLD];
  char why[WORLD][COLL_ERRMSG_MAX];
} job_t;

static void on_phase(int rank, const char *phase) {
  if (strcmp(phase, "hearing") == 0 && rank > 0)
    test_sleep_ms((int64_t)rank * STEP_MS);
}

static void rank_main(int rank, int world, void *arg) {
  job_t *j = arg;
  j->s[rank] = bt_tcp_setup(rank, world, j->store_port, "linger", TIMEOUT_MS,
                            j->why[rank], sizeof j->why[rank]);
}

static void test_slow_readers_keep_the_store(void **state) {
  job_t j;
  int r;
  (void)state;
  memset(&j, 0, sizeof j);
  j.store_port = bt_free_port("127.0.0.1");
  assert_true(j.store_port > 0);
  coll__rdv_test_hooks = (coll_rdv_test_hooks_t)COLL_RDV_TEST_HOOKS_OFF;
  coll__rdv_test_hooks.phase = on_phase;
  test_run_ranks(WORLD, rank_main, &j, 60000, "slow outcome readers");
  coll__rdv_test_hooks = (coll_rdv_test_hooks_t)COLL_RDV_TEST_HOOKS_OFF;
  for (r = 0; r < WORLD; r++)
    if (j.s[r] != COLL_OK)
      fail_msg("rank %d: %s: %s", r, coll_status_name(j.s[r]), j.why[r]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_slow_readers_keep_the_store),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
