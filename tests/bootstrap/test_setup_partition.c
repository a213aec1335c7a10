/* SPDX-License-Identifier: Apache-2.0 */
/* test_setup_partition.c: a network cut during setup ends every rank at
 * the timeout plus at most 2 s, with the same status. Rank 1 reaches the
 * store and rank 0 through blackholing proxies (tests/common/tcp_proxy.h):
 * one carries its store connection, the other its mesh connection to rank
 * 0 (rank 0 publishes the proxy's address). The proxies go silent before
 * rank 1 arrives, right after the rendezvous, after the mesh, and (with a
 * third rank absent) while rank 1 waits for rank 0's verdict. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include <cmocka.h>

#include "boot_test.h"
#include "bootstrap/rendezvous/rendezvous.h"
#include "core/error.h"
#include "tcp_proxy.h"
#include "test_util.h"

#define WORLD_MAX 3
#define TIMEOUT_MS 3000
/* The promise: the timeout plus at most END_MS. The assertion allows
 * SLACK_MS more for a loaded machine; before, the cut-off rank ended at
 * the timeout plus 5 s or more. */
#define END_MS 2000
#define SLACK_MS 1000

typedef struct job {
  int world, present; /* ranks 0..present-1 run */
  int store_port;
  tcp_proxy_t *store_px, *mesh_px;
  const char *cut_at; /* rank 1 cuts itself off at this phase; NULL */
  coll_status_t s[WORLD_MAX];
  char why[WORLD_MAX][COLL_ERRMSG_MAX];
  int64_t ms[WORLD_MAX]; /* how long coll_tcp_create took */
} job_t;

static job_t *the_job; /* for the hooks */

static int proxy_port(const tcp_proxy_t *p) {
  const char *a = strrchr(tcp_proxy_addr(p), ':');
  return a != NULL ? atoi(a + 1) : -1;
}

/* Both directions of both proxies stop forwarding: rank 1 is cut off
 * from rank 0 and its store, and nobody is told. */
static int cut(job_t *j) {
  int rc = 0, d;
  for (d = 0; d < 2; d++) {
    rc |= tcp_proxy_stall(j->store_px, (tcp_proxy_dir_t)d);
    rc |= tcp_proxy_stall(j->mesh_px, (tcp_proxy_dir_t)d);
  }
  return rc;
}

static void on_phase(int rank, const char *phase) {
  if (rank == 1 && the_job->cut_at != NULL &&
      strcmp(phase, the_job->cut_at) == 0)
    (void)cut(the_job);
}

/* Rank 0's listener is reached through the mesh proxy. */
static const char *publish_as(int rank, const char *addr) {
  if (rank != 0 || tcp_proxy_set_target(the_job->mesh_px, addr) != 0)
    return NULL;
  return tcp_proxy_addr(the_job->mesh_px);
}

static void rank_main(int rank, int world, void *arg) {
  job_t *j = arg;
  coll_tcp_config_t cfg = COLL_TCP_CONFIG_INIT;
  coll_transport_t *t = NULL;
  int64_t t0 = test_now_ms();
  (void)world;
  if (rank >= j->present) return;
  cfg.rank = rank;
  cfg.world = j->world;
  cfg.master_addr = "127.0.0.1";
  /* Rank 1 meets the store through its proxy; one job id for both. */
  cfg.master_port = rank == 1 ? proxy_port(j->store_px) : j->store_port;
  cfg.job_id = "partition";
  cfg.timeout_ms = TIMEOUT_MS;
  cfg.auth_token = "partition-token";
  j->s[rank] = coll_tcp_create(&cfg, &t);
  j->ms[rank] = test_now_ms() - t0;
  snprintf(j->why[rank], sizeof j->why[rank], "%s", coll_last_error());
  if (t != NULL) coll_transport_destroy(t);
}

static job_t *start(int world, int present, const char *cut_at) {
  job_t *j = calloc(1, sizeof *j);
  char target[64];
  assert_non_null(j);
  j->world = world;
  j->present = present;
  j->cut_at = cut_at;
  j->store_port = bt_free_port("127.0.0.1");
  assert_true(j->store_port > 0);
  assert_int_equal(tcp_proxy_start(&j->store_px), 0);
  assert_int_equal(tcp_proxy_start(&j->mesh_px), 0);
  snprintf(target, sizeof target, "127.0.0.1:%d", j->store_port);
  assert_int_equal(tcp_proxy_set_target(j->store_px, target), 0);
  the_job = j;
  coll__rdv_test_hooks = (coll_rdv_test_hooks_t)COLL_RDV_TEST_HOOKS_OFF;
  coll__rdv_test_hooks.phase = on_phase;
  coll__rdv_test_hooks.publish_as = publish_as;
  return j;
}

static void print_ends(const job_t *j) {
  int r;
  for (r = 0; r < j->present; r++)
    printf("rank %d: %s after %lld ms (timeout %d): %s\n", r,
           coll_status_name(j->s[r]), (long long)j->ms[r], TIMEOUT_MS,
           j->why[r]);
}

static void run(job_t *j, const char *what) {
  test_run_ranks(j->world, rank_main, j, 60000, what);
  coll__rdv_test_hooks = (coll_rdv_test_hooks_t)COLL_RDV_TEST_HOOKS_OFF;
  print_ends(j);
}

/* Every present rank: COLL_ERR_TIMEOUT, no earlier than the timeout and
 * no later than the promise allows. */
static void check_ends(job_t *j) {
  int r;
  for (r = 0; r < j->present; r++) {
    if (j->s[r] != COLL_ERR_TIMEOUT)
      fail_msg("rank %d returned %s, not COLL_ERR_TIMEOUT", r,
               coll_status_name(j->s[r]));
    if (j->ms[r] < TIMEOUT_MS - 100)
      fail_msg("rank %d ended after %lld ms, before the timeout", r,
               (long long)j->ms[r]);
    if (j->ms[r] > TIMEOUT_MS + END_MS + SLACK_MS)
      fail_msg("rank %d ended after %lld ms: past the timeout + %d ms", r,
               (long long)j->ms[r], END_MS);
  }
  tcp_proxy_stop(j->store_px);
  tcp_proxy_stop(j->mesh_px);
  free(j);
}

/* The store is out of rank 1's reach from the start: its connection is
 * accepted (by the proxy) but never answered. */
static void test_cut_before_join(void **state) {
  job_t *j = start(2, 2, NULL);
  (void)state;
  assert_int_equal(cut(j), 0);
  run(j, "cut before join");
  bt_must_contain(j->why[0], "rank 1");
  bt_must_contain(j->why[1], "could not reach the rendezvous store");
  check_ends(j);
}

/* Cut right after the rendezvous: neither the mesh nor rank 1's outcome
 * gets through. */
static void test_cut_after_join(void **state) {
  job_t *j = start(2, 2, "joined");
  (void)state;
  run(j, "cut after join");
  bt_must_contain(j->why[0], "rank 1: it did not report its setup outcome");
  bt_must_contain(j->why[1], "did not answer by the end of the setup");
  check_ends(j);
}

/* Cut with the mesh connected: only rank 1's outcome is lost. */
static void test_cut_after_mesh(void **state) {
  job_t *j = start(2, 2, "meshed");
  (void)state;
  run(j, "cut after mesh");
  bt_must_contain(j->why[0], "rank 1: it did not report its setup outcome");
  bt_must_contain(j->why[1], "did not answer by the end of the setup");
  check_ends(j);
}

/* Rank 2 never comes; rank 1, joined and waiting for rank 0's verdict,
 * is cut off. Rank 0 names rank 2 at the timeout; rank 1 hears nothing. */
static void cut_when_joined(void *arg) {
  job_t *j = arg;
  coll_store_t *st = NULL;
  const char *key = "joined/1";
  int64_t until = test_now_ms() + 20000;
  while (st == NULL && test_now_ms() < until)
    if (coll__store_connect("127.0.0.1", j->store_port, "partition-token", 1000,
                            &st) != COLL_OK)
      test_sleep_ms(20);
  while (st != NULL && test_now_ms() < until &&
         coll__store_wait(st, &key, 1, 100) != COLL_OK) {
  }
  coll__store_close(st);
  (void)cut(j);
}

static void test_cut_waiting_for_verdict(void **state) {
  job_t *j = start(3, 2, NULL);
  uv_thread_t th;
  (void)state;
  assert_int_equal(uv_thread_create(&th, cut_when_joined, j), 0);
  run(j, "cut waiting for the verdict");
  uv_thread_join(&th);
  bt_must_contain(j->why[0], "did not join");
  bt_must_contain(j->why[0], "rank 2");
  bt_must_contain(j->why[1], "did not answer by the end of the setup");
  check_ends(j);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cut_before_join),
      cmocka_unit_test(test_cut_after_join),
      cmocka_unit_test(test_cut_after_mesh),
      cmocka_unit_test(test_cut_waiting_for_verdict),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
