/* SPDX-License-Identifier: Apache-2.0 */
/* test_setup_requests.c: what a TCP comm's setup costs rank 0's store as
 * the world grows. 8 and then 16 ranks (threads over 127.0.0.1,
 * coll_tcp_create, COLL_TRANSPORT=tcp) set up once each, and rank 0 says
 * how many requests its store served (coll__store_server_stats, through a
 * test hook). The setup reads no rank's record once per rank: about 15
 * requests a rank, so the count stays under REQUESTS_PER_RANK * n and
 * doubling the world at most doubles it, give or take a few. (Every rank
 * reading every rank's host record and outcome, and looking up the address
 * of every lower rank, cost about 2.5 n squared: 229 requests at 8 ranks,
 * 42,050 at 128.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "boot_test.h"
#include "bootstrap/rendezvous/rendezvous.h"
#include "core/error.h"
#include "test_util.h"

#define TIMEOUT_MS 60000
#define REQUESTS_PER_RANK 24

typedef struct job {
  int store_port;
  int world;
  coll_status_t s[16];
  char why[16][COLL_ERRMSG_MAX];
} job_t;

static _Atomic uint64_t served;

static void on_served(uint64_t requests) { atomic_store(&served, requests); }

static void rank_main(int rank, int world, void *arg) {
  job_t *j = arg;
  j->s[rank] = bt_tcp_setup(rank, world, j->store_port, "requests", TIMEOUT_MS,
                            j->why[rank], sizeof j->why[rank]);
}

/* The requests rank 0's store served for one setup of `world` ranks. */
static uint64_t setup_of(int world) {
  job_t *j = calloc(1, sizeof *j);
  uint64_t n;
  int r;
  assert_non_null(j);
  j->world = world;
  j->store_port = bt_free_port("127.0.0.1");
  assert_true(j->store_port > 0);
  atomic_store(&served, 0);
  coll__rdv_test_hooks = (coll_rdv_test_hooks_t)COLL_RDV_TEST_HOOKS_OFF;
  coll__rdv_test_hooks.store_served = on_served;
  test_run_ranks(world, rank_main, j, 120000, "setup");
  coll__rdv_test_hooks = (coll_rdv_test_hooks_t)COLL_RDV_TEST_HOOKS_OFF;
  for (r = 0; r < world; r++)
    if (j->s[r] != COLL_OK)
      fail_msg("%d ranks: rank %d: %s: %s", world, r, coll_status_name(j->s[r]),
               j->why[r]);
  free(j);
  n = atomic_load(&served);
  printf("%d ranks: rank 0's store served %llu requests (%.1f a rank)\n", world,
         (unsigned long long)n, (double)n / world);
  return n;
}

static void test_store_requests_linear(void **state) {
  uint64_t at8, at16;
  (void)state;
  setenv("COLL_TRANSPORT", "tcp", 1);
  at8 = setup_of(8);
  at16 = setup_of(16);
  assert_true(at8 > 0);
  if (at16 > (uint64_t)REQUESTS_PER_RANK * 16)
    fail_msg("16 ranks cost %llu requests: more than %d a rank",
             (unsigned long long)at16, REQUESTS_PER_RANK);
  /* Linear: twice the ranks, twice the requests and a little more (the
   * linger's waits, a retried connect). */
  if (at16 > 2 * at8 + 32)
    fail_msg("8 ranks cost %llu requests, 16 ranks %llu: faster than linear",
             (unsigned long long)at8, (unsigned long long)at16);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_store_requests_linear),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
