/* SPDX-License-Identifier: Apache-2.0 */
/* test_tcp_create.c: coll_tcp_create with every rank a thread of this
 * process: a job that runs an allreduce, a job of one rank, and a job where
 * one rank never comes (the others name it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "boot_test.h"
#include "core/error.h"
#include "test_util.h"

#define MAXW 4
#define COUNT 4099 /* not a multiple of the world: uneven chunks */

typedef struct job {
  int port;
  int world;
  int absent; /* a rank that never calls, or -1 */
  int64_t timeout_ms;
  const char *ifname;
  coll_status_t s[MAXW];
  char why[MAXW][COLL_ERRMSG_MAX];
  int wrong[MAXW];
} job_t;

static void rank_main(int rank, int world, void *arg) {
  job_t *j = arg;
  coll_tcp_config_t cfg = COLL_TCP_CONFIG_INIT;
  coll_transport_t *t = NULL;
  coll_comm_t *c = NULL;
  double *x;
  int i;
  if (rank == j->absent) return;
  cfg.rank = rank;
  cfg.world = world;
  cfg.master_addr = "127.0.0.1";
  cfg.master_port = j->port;
  cfg.timeout_ms = j->timeout_ms;
  cfg.ifname = j->ifname;
  cfg.auth_token = "job-token";
  j->s[rank] = coll_tcp_create(&cfg, &t);
  if (j->s[rank] == COLL_OK) j->s[rank] = coll_comm_create(t, NULL, &c);
  x = malloc(COUNT * sizeof *x);
  if (j->s[rank] == COLL_OK && x != NULL) {
    for (i = 0; i < COUNT; i++) x[i] = rank + i * 0.5;
    j->s[rank] = coll_allreduce(c, x, x, COUNT, COLL_F64, COLL_SUM, NULL);
    for (i = 0; j->s[rank] == COLL_OK && i < COUNT; i++)
      if (x[i] != world * (world - 1) / 2.0 + world * i * 0.5) j->wrong[rank]++;
  }
  if (j->s[rank] != COLL_OK)
    snprintf(j->why[rank], sizeof j->why[rank], "%s", coll_last_error());
  free(x);
  coll_comm_destroy(c);
}

static void run(job_t *j) {
  j->port = bt_free_port("127.0.0.1");
  assert_true(j->port > 0);
  test_run_ranks(j->world, rank_main, j, 60000, "tcp_create ranks");
}

static void test_three_ranks(void **state) {
  job_t j;
  int r;
  (void)state;
  memset(&j, 0, sizeof j);
  j.world = 3;
  j.absent = -1;
  j.timeout_ms = 30000;
  j.ifname = "lo";
  run(&j);
  for (r = 0; r < 3; r++) {
    if (j.s[r] != COLL_OK) fail_msg("rank %d: %s", r, j.why[r]);
    assert_int_equal(j.wrong[r], 0);
  }
}

static void test_one_rank(void **state) {
  job_t j;
  (void)state;
  memset(&j, 0, sizeof j);
  j.world = 1;
  j.absent = -1;
  j.timeout_ms = 10000;
  run(&j);
  if (j.s[0] != COLL_OK) fail_msg("rank 0: %s", j.why[0]);
  assert_int_equal(j.wrong[0], 0);
}

static void test_absent_rank(void **state) {
  job_t j;
  int r;
  (void)state;
  memset(&j, 0, sizeof j);
  j.world = 4;
  j.absent = 1;
  j.timeout_ms = 2000;
  run(&j);
  for (r = 0; r < 4; r++) {
    if (r == 1) continue;
    assert_int_equal(j.s[r], COLL_ERR_TIMEOUT);
    if (strstr(j.why[r], "1 of 4 ranks did not join") == NULL ||
        strstr(j.why[r], ": rank 1") == NULL)
      fail_msg("rank %d: %s", r, j.why[r]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_three_ranks),
      cmocka_unit_test(test_one_rank),
      cmocka_unit_test(test_absent_rank),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
