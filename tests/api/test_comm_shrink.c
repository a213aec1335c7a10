/* SPDX-License-Identifier: Apache-2.0 */
/* test_comm_shrink.c: coll_comm_shrink on in-process comms (rank threads):
 * on a healthy comm, after a rank's owner aborted it, after a rank
 * destroyed its comm, with a rank that comes too late; then a collective
 * on the new comm against a serial reference and the member list every
 * survivor holds. And every argument a caller can get wrong. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
/* cmocka.h needs the headers above. */
#include <cmocka.h>

#include "api_test.h"
#include "mailbox.h"

#define WORLD 4
#define SHRINK_MS 10000

typedef enum role { R_SURVIVE, R_ABORT, R_DESTROY, R_LATE } role_t;

typedef struct rank_arg {
  coll_comm_t *comm;
  int rank;
  role_t role;
  int64_t timeout_ms, late_ms;
  /* results, read by the test thread after join */
  coll_status_t status;
  char text[512];
  int size, new_rank;
  int32_t members[WORLD];
  int64_t sum;
} rank_arg_t;

static t_fail_t g_fails;

static void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void *rank_main(void *p) {
  rank_arg_t *a = p;
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_abort_handle_t *h = NULL;
  coll_comm_t *nc = NULL;
  int32_t me = a->rank;
  int64_t v = a->rank + 1;
  a->status = COLL_ERR_INTERNAL;
  if (a->role == R_DESTROY) {
    coll_comm_destroy(a->comm);
    a->comm = NULL;
    return NULL;
  }
  if (a->role == R_ABORT) {
    t_expect(&g_fails, coll_comm_abort_handle(a->comm, &h), COLL_OK,
             "abort_handle");
    coll_abort(h);
    coll_abort_handle_release(h);
  }
  if (a->role == R_LATE) sleep_ms(a->late_ms);
  cfg.timeout_ms = a->timeout_ms;
  a->status = coll_comm_shrink(a->comm, &cfg, &nc);
  snprintf(a->text, sizeof a->text, "%s", coll_last_error());
  if (a->status == COLL_OK) {
    a->size = coll_comm_size(nc);
    a->new_rank = coll_comm_rank(nc);
    t_expect(&g_fails, coll_allgather(nc, &me, a->members, 1, COLL_I32, NULL),
             COLL_OK, "allgather on the new comm");
    t_expect(&g_fails,
             coll_allreduce(nc, &v, &a->sum, 1, COLL_I64, COLL_SUM, NULL),
             COLL_OK, "allreduce on the new comm");
    /* The old comm is over for this rank. */
    if (coll_barrier(a->comm) == COLL_OK)
      t_fail(&g_fails, "rank %d: the old comm still works", a->rank);
    coll_comm_destroy(nc);
  } else if (a->status != COLL_OK && a->text[0] == '\0') {
    t_fail(&g_fails, "rank %d: shrink failed without a text", a->rank);
  }
  coll_comm_destroy(a->comm);
  a->comm = NULL;
  return NULL;
}

/* Runs WORLD rank threads with the given roles over an in-process
 * transport. */
static void run(const role_t *roles, int64_t timeout_ms, int64_t late_ms,
                rank_arg_t *a) {
  coll_transport_t *t[WORLD];
  pthread_t th[WORLD];
  int r;
  t_fail_init(&g_fails);
  assert_int_equal(coll_inproc_create(WORLD, t), COLL_OK);
  for (r = 0; r < WORLD; r++) {
    memset(&a[r], 0, sizeof a[r]);
    assert_int_equal(coll_comm_create(t[r], NULL, &a[r].comm), COLL_OK);
    a[r].rank = r;
    a[r].role = roles[r];
    a[r].timeout_ms = timeout_ms;
    a[r].late_ms = late_ms;
  }
  for (r = 0; r < WORLD; r++)
    assert_int_equal(pthread_create(&th[r], NULL, rank_main, &a[r]), 0);
  for (r = 0; r < WORLD; r++) pthread_join(th[r], NULL);
  assert_int_equal(t_fail_report(&g_fails, "shrink"), 0);
  t_fail_destroy(&g_fails);
}

/* Each survivor got a comm of exactly the ranks in `want` (old ranks, in
 * order), at its place among them, and a sum over those ranks. */
static void expect_members(const rank_arg_t *a, const int *want, int n) {
  int64_t sum = 0;
  int i, k;
  for (i = 0; i < n; i++) sum += want[i] + 1;
  for (i = 0; i < n; i++) {
    const rank_arg_t *s = &a[want[i]];
    if (s->status != COLL_OK)
      fail_msg("rank %d: shrink returned %s: %s", want[i],
               coll_status_name(s->status), s->text);
    assert_int_equal(s->size, n);
    assert_int_equal(s->new_rank, i);
    for (k = 0; k < n; k++) assert_int_equal(s->members[k], want[k]);
    assert_int_equal(s->sum, sum);
  }
}

static void test_healthy(void **state) {
  static const role_t roles[WORLD] = {R_SURVIVE, R_SURVIVE, R_SURVIVE,
                                      R_SURVIVE};
  static const int want[] = {0, 1, 2, 3};
  rank_arg_t a[WORLD];
  (void)state;
  run(roles, SHRINK_MS, 0, a);
  expect_members(a, want, 4);
}

static void test_after_abort(void **state) {
  static const role_t roles[WORLD] = {R_SURVIVE, R_SURVIVE, R_ABORT, R_SURVIVE};
  static const int want[] = {0, 1, 3};
  rank_arg_t a[WORLD];
  (void)state;
  run(roles, SHRINK_MS, 0, a);
  expect_members(a, want, 3);
  assert_int_equal(a[2].status, COLL_ERR_ABORTED);
  assert_non_null(strstr(a[2].text, "aborted"));
}

static void test_after_destroy(void **state) {
  static const role_t roles[WORLD] = {R_SURVIVE, R_DESTROY, R_SURVIVE,
                                      R_SURVIVE};
  static const int want[] = {0, 2, 3};
  rank_arg_t a[WORLD];
  (void)state;
  run(roles, SHRINK_MS, 0, a);
  expect_members(a, want, 3);
}

/* Rank 3 comes after the others stopped waiting for hellos (half the
 * timeout) and before the timeout: the estimates of the rounds before its
 * own leave it out, so it is a non-survivor, refused. */
static void test_late_rank_refused(void **state) {
  static const role_t roles[WORLD] = {R_SURVIVE, R_SURVIVE, R_SURVIVE, R_LATE};
  static const int want[] = {0, 1, 2};
  rank_arg_t a[WORLD];
  (void)state;
  run(roles, 6000, 4000, a);
  expect_members(a, want, 3);
  assert_int_equal(a[3].status, COLL_ERR_PEER_LOST);
  assert_non_null(strstr(a[3].text, "left rank 3 out"));
}

static void expect_err(coll_status_t s, coll_status_t want, const char *has) {
  if (s != want || strstr(coll_last_error(), has) == NULL)
    fail_msg("want %s mentioning '%s', got %s: '%s'", coll_status_name(want),
             has, coll_status_name(s), coll_last_error());
}

static void test_bad_arguments(void **state) {
  coll_transport_t *t[1];
  coll_comm_t *c = NULL, *nc = (coll_comm_t *)&nc, *one = NULL, *mb[1];
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_abort_handle_t *h = NULL;
  (void)state;
  assert_int_equal(coll_inproc_create(1, t), COLL_OK);
  assert_int_equal(coll_comm_create(t[0], NULL, &c), COLL_OK);
  expect_err(coll_comm_shrink(NULL, NULL, &nc), COLL_ERR_INVALID_ARG,
             "comm is NULL");
  assert_null(nc);
  expect_err(coll_comm_shrink(c, NULL, NULL), COLL_ERR_INVALID_ARG,
             "newcomm is NULL");
  cfg.size = 3;
  expect_err(coll_comm_shrink(c, &cfg, &nc), COLL_ERR_INVALID_ARG,
             "COLL_COMM_CONFIG_INIT");
  cfg = (coll_comm_config_t)COLL_COMM_CONFIG_INIT;
  assert_int_equal(coll_comm_abort_handle(c, &h), COLL_OK);
  cfg.abort_handle = h;
  expect_err(coll_comm_shrink(c, &cfg, &nc), COLL_ERR_INVALID_ARG,
             "abort handle");
  coll_abort_handle_release(h);
  /* A world of one shrinks to itself; then the old comm is spent. */
  assert_int_equal(coll_comm_shrink(c, NULL, &one), COLL_OK);
  assert_int_equal(coll_comm_size(one), 1);
  expect_err(coll_comm_shrink(c, NULL, &nc), COLL_ERR_INVALID_ARG,
             "shrunk before");
  assert_null(nc);
  coll_comm_destroy(one);
  coll_comm_destroy(c);
  /* A third party's transport cannot shrink. */
  assert_int_equal(mb_comms(1, MB_FULL_NO_BARRIER, 5000, mb), 0);
  expect_err(coll_comm_shrink(mb[0], NULL, &nc), COLL_ERR_NOT_AVAILABLE,
             "cannot shrink");
  coll_comm_destroy(mb[0]);
}

/* The config's abort handle becomes the new comm's: aborting it ends a
 * collective on the new comm. */
static void test_config_abort_handle(void **state) {
  coll_transport_t *t[2];
  coll_comm_t *c[2], *nc = NULL;
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_abort_handle_t *h = NULL;
  float x = 1;
  (void)state;
  assert_int_equal(coll_inproc_create(2, t), COLL_OK);
  assert_int_equal(coll_comm_create(t[0], NULL, &c[0]), COLL_OK);
  assert_int_equal(coll_comm_create(t[1], NULL, &c[1]), COLL_OK);
  /* Rank 1 leaves: rank 0 shrinks to a world of one. */
  coll_comm_destroy(c[1]);
  assert_int_equal(coll_abort_handle_create(&h), COLL_OK);
  cfg.abort_handle = h;
  assert_int_equal(coll_comm_shrink(c[0], &cfg, &nc), COLL_OK);
  assert_int_equal(coll_comm_size(nc), 1);
  coll_abort(h);
  expect_err(coll_allreduce(nc, &x, &x, 1, COLL_F32, COLL_SUM, NULL),
             COLL_ERR_ABORTED, "aborted");
  coll_abort_handle_release(h);
  coll_comm_destroy(nc);
  coll_comm_destroy(c[0]);
}

/* A request not yet waited for: refused before the agreement, and the
 * comm still shrinks once it was waited. */
static void test_pending_request(void **state) {
  coll_transport_t *t[2];
  coll_comm_t *c[2], *nc = NULL;
  coll_request_t *req = NULL;
  coll_abort_handle_t *h = NULL;
  float x = 1;
  (void)state;
  assert_int_equal(coll_inproc_create(2, t), COLL_OK);
  assert_int_equal(coll_comm_create(t[0], NULL, &c[0]), COLL_OK);
  assert_int_equal(coll_comm_create(t[1], NULL, &c[1]), COLL_OK);
  /* Rank 1 never joins: rank 0's allreduce stays pending. */
  assert_int_equal(
      coll_iallreduce(c[0], &x, &x, 1, COLL_F32, COLL_SUM, NULL, &req),
      COLL_OK);
  expect_err(coll_comm_shrink(c[0], NULL, &nc), COLL_ERR_INVALID_ARG,
             "pending");
  assert_null(nc);
  assert_int_equal(coll_comm_abort_handle(c[0], &h), COLL_OK);
  coll_abort(h);
  coll_abort_handle_release(h);
  assert_int_equal(coll_wait(req), COLL_ERR_ABORTED);
  /* Rank 0 aborted: it left, and cannot shrink; rank 1 goes on alone. */
  expect_err(coll_comm_shrink(c[0], NULL, &nc), COLL_ERR_ABORTED, "aborted");
  assert_int_equal(coll_comm_shrink(c[1], NULL, &nc), COLL_OK);
  assert_int_equal(coll_comm_size(nc), 1);
  coll_comm_destroy(nc);
  coll_comm_destroy(c[0]);
  coll_comm_destroy(c[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_healthy),
      cmocka_unit_test(test_after_abort),
      cmocka_unit_test(test_after_destroy),
      cmocka_unit_test(test_late_rank_refused),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_pending_request),
      cmocka_unit_test(test_config_abort_handle),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
