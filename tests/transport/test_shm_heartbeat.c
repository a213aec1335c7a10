/* SPDX-License-Identifier: Apache-2.0 */
/* test_shm_heartbeat.c: heartbeats on the shared-memory transport, between
 * forked rank processes, as over TCP (test_tcp_blame.c): a stopped rank is
 * reported unresponsive, naming it, by a rank waiting on it and, through
 * that rank's close, by a rank waiting on another; a rank busy in its own
 * code for three heartbeat timeouts is not; a heartbeat timeout that is not
 * a number is refused when the endpoint is made. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "shm_test.h"

#define TAG_A 5u
#define HB_MS "1000"

static void expect(tt_result_t *res, coll_status_t got, coll_status_t want,
                   const char *what) {
  if (got != want)
    tt_fail(res, "%s: %s, expected %s (%s)", what, coll_status_name(got),
            coll_status_name(want), coll_last_error());
}

/* The stopped rank's pid, for the rank that ends it; in memory shared
 * across fork. */
typedef struct stop_shared {
  volatile pid_t pid;
  int64_t took_ms[3];
} stop_shared_t;

/* Rank 1 stops itself. Rank 0 waits on a message from it; rank 2 waits on
 * one from rank 0, which never comes: rank 0's close tells it. Both must
 * fail with PEER_LOST naming rank 1 unresponsive. Rank 0 then kills rank
 * 1. */
static void stop_rank(coll_transport_t *t, int rank, int world,
                      tt_result_t *res, void *arg) {
  stop_shared_t *sh = arg;
  uint64_t v = 0;
  int64_t t0;
  coll_status_t s;
  (void)world;
  if (rank == 1) {
    sh->pid = getpid();
    kill(getpid(), SIGSTOP);
    for (;;) pause(); /* killed */
  }
  t0 = test_now_ms();
  s = tt_recv(t, rank == 0 ? 1 : 0, TAG_A, &v, 8, NULL);
  sh->took_ms[rank] = test_now_ms() - t0;
  expect(res, s, COLL_ERR_PEER_LOST, "receive while rank 1 is stopped");
  if (strstr(coll_last_error(), "rank 1 unresponsive") == NULL)
    tt_fail(res, "the text does not name rank 1 unresponsive: %s",
            coll_last_error());
  if (rank == 0) {
    while (sh->pid == 0) test_sleep_ms(1);
    kill(sh->pid, SIGKILL);
  }
}

static void test_stopped_rank_unresponsive(void **state) {
  tt_result_t res[3];
  int status[3];
  stop_shared_t *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  char *before = shm_devshm_list(), *after;
  const char *extra;
  (void)state;
  assert_true(sh != MAP_FAILED);
  memset(sh, 0, sizeof *sh);
  setenv("COLL_HEARTBEAT_TIMEOUT_MS", HB_MS, 1);
  shm_run(3, stop_rank, sh, res, status, NULL);
  unsetenv("COLL_HEARTBEAT_TIMEOUT_MS");
  after = shm_devshm_list();
  extra = shm_devshm_new(before, after);
  free(before);
  free(after);
  /* Printed, not asserted: the machine may be busy. */
  printf(
      "SIGSTOP rank 1, heartbeat timeout %s ms: rank 0 failed after %lld "
      "ms, rank 2 after %lld ms\n",
      HB_MS, (long long)sh->took_ms[0], (long long)sh->took_ms[2]);
  munmap(sh, sizeof *sh);
  if (res[0].failed) fail_msg("rank 0: %s", res[0].msg);
  if (res[2].failed) fail_msg("rank 2: %s", res[2].msg);
  assert_int_equal(status[0], 0);
  assert_int_equal(status[2], 0);
  assert_int_equal(status[1], 128 + SIGKILL);
  if (extra != NULL) fail_msg("new in /dev/shm: %s", extra);
}

/* Rank 1 spends three heartbeat timeouts in its own code before it sends;
 * the others wait on it all along. Its heartbeat thread keeps counting:
 * both receive. */
static void busy_rank(coll_transport_t *t, int rank, int world,
                      tt_result_t *res, void *arg) {
  uint64_t v = 0;
  (void)world;
  (void)arg;
  if (rank == 1) {
    uint64_t w = 77;
    test_sleep_ms(3000);
    expect(res, tt_send(t, 0, TAG_A, &w, 8), COLL_OK, "send to 0");
    expect(res, tt_send(t, 2, TAG_A, &w, 8), COLL_OK, "send to 2");
    expect(res, tt_recv(t, 0, TAG_A, &v, 8, NULL), COLL_OK, "ack from 0");
    expect(res, tt_recv(t, 2, TAG_A, &v, 8, NULL), COLL_OK, "ack from 2");
    return;
  }
  expect(res, tt_recv(t, 1, TAG_A, &v, 8, NULL), COLL_OK,
         "receive from the busy rank");
  if (v != 77)
    tt_fail(res, "received %llu, expected 77", (unsigned long long)v);
  expect(res, tt_send(t, 1, TAG_A, &v, 8), COLL_OK, "ack");
}

static void test_busy_rank_not_unresponsive(void **state) {
  tt_result_t res[3];
  int rc;
  (void)state;
  setenv("COLL_HEARTBEAT_TIMEOUT_MS", HB_MS, 1);
  rc = shm_run(3, busy_rank, NULL, res, NULL, NULL);
  unsetenv("COLL_HEARTBEAT_TIMEOUT_MS");
  TT_ASSERT_RANKS_OK(res, 3);
  assert_int_equal(rc, 0);
}

static void never_run(coll_transport_t *t, int rank, int world,
                      tt_result_t *res, void *arg) {
  (void)t;
  (void)rank;
  (void)world;
  (void)arg;
  tt_fail(res, "the endpoint was made with a bad heartbeat timeout");
}

static void test_bad_heartbeat_env_refused(void **state) {
  tt_result_t res[2];
  int status[2];
  (void)state;
  setenv("COLL_HEARTBEAT_TIMEOUT_MS", "soon", 1);
  shm_run(2, never_run, NULL, res, status, NULL);
  unsetenv("COLL_HEARTBEAT_TIMEOUT_MS");
  for (int r = 0; r < 2; r++) {
    assert_int_equal(status[r], 2);
    if (strstr(res[r].msg, "COLL_HEARTBEAT_TIMEOUT_MS='soon'") == NULL)
      fail_msg("rank %d: %s", r, res[r].msg);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stopped_rank_unresponsive),
      cmocka_unit_test(test_busy_rank_not_unresponsive),
      cmocka_unit_test(test_bad_heartbeat_env_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
