/* SPDX-License-Identifier: Apache-2.0 */
/* test_nccl_abort.c: abort on NCCL comms (stand-in): a stuck collective
 * released from another thread, use after abort, abort racing destroy, the
 * watchdog (async error, timeout) aborting the comm with a sticky reason,
 * destroy with work in flight. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include <cmocka.h>

#include "nccl_test_util.h"
#include "test_util.h"

/* A world-1 comm made by group + split (no rank threads needed). */
static coll_comm_t *one_comm(int64_t timeout_ms) {
  coll_comm_t *c = NULL;
  if (timeout_ms == 0) {
    int dev = 0;
    coll_group_t *g = NULL;
    if (coll_group_create(&dev, 1, &g) != COLL_OK) return NULL;
    coll_group_split(g, &c);
    coll_group_destroy(g);
    return c;
  }
  return nt_rank_comms(1, timeout_ms, &c) == 0 ? c : NULL;
}

struct stuck_arg {
  coll_comm_t *c;
  float *buf;
  coll_status_t s;
};

static void stuck_rank(int rank, int world, void *p) {
  struct stuck_arg *a = p;
  (void)rank, (void)world;
  a->s = coll_allreduce(a->c, a->buf, a->buf, 4, COLL_F32, COLL_SUM, NULL);
}

static void aborter(void *p) {
  test_sleep_ms(50);
  coll_abort(p);
}

static void test_abort_releases_stuck(void **state) {
  struct stuck_arg a;
  coll_abort_handle_t *h = NULL;
  uv_thread_t th;
  standin_stats_t st;
  (void)state;
  memset(&a, 0, sizeof a);
  a.c = one_comm(0);
  assert_non_null(a.c);
  a.buf = standin_dev_alloc(0, 4 * sizeof(float));
  assert_int_equal(coll_comm_abort_handle(a.c, &h), COLL_OK);
  standin_set_hang(1);
  assert_int_equal(uv_thread_create(&th, aborter, h), 0);
  test_run_ranks(1, stuck_rank, &a, 10000, "stuck allreduce");
  uv_thread_join(&th);
  assert_int_equal(a.s, COLL_ERR_ABORTED);
  assert_true(coll_is_aborted(h));
  /* Use after abort: refused at once, nothing reaches NCCL. */
  standin_stats(&st);
  assert_int_equal(
      coll_allreduce(a.c, a.buf, a.buf, 4, COLL_F32, COLL_SUM, NULL),
      COLL_ERR_ABORTED);
  assert_int_equal(coll_barrier(a.c), COLL_ERR_ABORTED);
  {
    standin_stats_t st2;
    standin_stats(&st2);
    assert_int_equal(st2.collectives, st.collectives);
  }
  assert_int_equal(coll_abort(h), COLL_OK); /* idempotent */
  standin_stats(&st);
  assert_int_equal(st.revokes, 1); /* the abort stopped NCCL's kernels */
  assert_int_equal(st.comms_live, 1);
  assert_int_equal(coll_comm_destroy(a.c), COLL_OK);
  standin_stats(&st);
  assert_int_equal(st.comm_aborts + st.comm_destroys, 1);
  assert_int_equal(st.destroy_refused, 0);
  assert_int_equal(st.comms_live, 0);
  coll_abort_handle_release(h);
  standin_dev_free(a.buf);
  assert_true(nt_no_misuse());
}

/* Rank 1 never joins: rank 0's allreduce waits until abort. */
static void test_abort_peer_never_joins(void **state) {
  coll_comm_t *comms[2] = {0};
  struct stuck_arg a;
  coll_abort_handle_t *h = NULL;
  uv_thread_t th;
  standin_stats_t st;
  (void)state;
  memset(&a, 0, sizeof a);
  assert_int_equal(nt_rank_comms(2, 0, comms), 0);
  a.c = comms[0];
  a.buf = standin_dev_alloc(0, 4 * sizeof(float));
  coll_comm_abort_handle(a.c, &h);
  assert_int_equal(uv_thread_create(&th, aborter, h), 0);
  test_run_ranks(1, stuck_rank, &a, 10000, "allreduce without a peer");
  uv_thread_join(&th);
  assert_int_equal(a.s, COLL_ERR_ABORTED);
  assert_int_equal(coll_comm_destroy(comms[0]), COLL_OK);
  assert_int_equal(coll_comm_destroy(comms[1]), COLL_OK);
  standin_stats(&st);
  assert_int_equal(st.destroy_blocked, 0);
  assert_int_equal(st.comms_live, 0);
  coll_abort_handle_release(h);
  standin_dev_free(a.buf);
  assert_true(nt_no_misuse());
}

static void abort_now(void *p) { coll_abort(p); }

/* Exactly one of abort and destroy tears the NCCL comm down, every time;
 * half of the rounds have a collective stuck in flight. */
static void test_abort_destroy_race(void **state) {
  enum { ROUNDS = 1000 };
  float *buf = standin_dev_alloc(0, sizeof(float));
  standin_stats_t st;
  int i, waited_bad = 0;
  (void)state;
  for (i = 0; i < ROUNDS; i++) {
    coll_comm_t *c = one_comm(0);
    coll_abort_handle_t *h = NULL;
    coll_request_t *req = NULL;
    uv_thread_t th;
    if (c == NULL) fail_msg("round %d: %s", i, coll_last_error());
    coll_comm_abort_handle(c, &h);
    if (i % 2) {
      standin_set_hang(1);
      assert_int_equal(
          coll_iallreduce(c, buf, buf, 1, COLL_F32, COLL_SUM, NULL, &req),
          COLL_OK);
      standin_set_hang(0);
    }
    assert_int_equal(uv_thread_create(&th, abort_now, h), 0);
    coll_comm_destroy(c);
    uv_thread_join(&th);
    if (req != NULL && coll_wait(req) != COLL_ERR_ABORTED) waited_bad++;
    coll_abort_handle_release(h);
  }
  standin_stats(&st);
  assert_int_equal(waited_bad, 0);
  assert_int_equal(st.comm_aborts + st.comm_destroys, ROUNDS);
  assert_int_equal(st.comms_live, 0);
  assert_int_equal(st.destroy_blocked, 0);
  assert_int_equal(st.events_live, 0);
  standin_dev_free(buf);
  assert_true(nt_no_misuse());
}

static void test_async_error_aborts(void **state) {
  coll_comm_t *c = one_comm(0);
  coll_abort_handle_t *h = NULL;
  coll_request_t *req = NULL;
  float *buf = standin_dev_alloc(0, sizeof(float));
  standin_stats_t st;
  (void)state;
  coll_comm_abort_handle(c, &h);
  standin_set_hang(1);
  assert_int_equal(
      coll_iallreduce(c, buf, buf, 1, COLL_F32, COLL_SUM, NULL, &req), COLL_OK);
  standin_inject_async_error(ncclSystemError);
  assert_int_equal(coll_wait(req), COLL_ERR_BACKEND);
  assert_non_null(strstr(coll_last_error(), "asynchronous error"));
  assert_non_null(strstr(coll_last_error(), "unhandled system error"));
  assert_true(coll_is_aborted(h));
  standin_stats(&st);
  assert_int_equal(st.revokes, 1);
  /* The reason sticks: the next call reports it. */
  assert_int_equal(coll_allreduce(c, buf, buf, 1, COLL_F32, COLL_SUM, NULL),
                   COLL_ERR_BACKEND);
  assert_non_null(strstr(coll_last_error(), "asynchronous error"));
  assert_int_equal(coll_barrier(c), COLL_ERR_BACKEND);
  assert_int_equal(coll_comm_destroy(c), COLL_OK);
  coll_abort_handle_release(h);
  standin_dev_free(buf);
  assert_true(nt_no_misuse());
}

static void test_timeout_aborts(void **state) {
  coll_comm_t *c = one_comm(100);
  coll_abort_handle_t *h = NULL;
  float *buf = standin_dev_alloc(0, sizeof(float));
  (void)state;
  assert_non_null(c);
  coll_comm_abort_handle(c, &h);
  standin_set_hang(1);
  assert_int_equal(coll_allreduce(c, buf, buf, 1, COLL_F32, COLL_SUM, NULL),
                   COLL_ERR_TIMEOUT);
  assert_non_null(strstr(coll_last_error(), "within 100 ms"));
  assert_true(coll_is_aborted(h));
  assert_int_equal(coll_broadcast(c, buf, 1, COLL_F32, 0, NULL),
                   COLL_ERR_TIMEOUT);
  assert_int_equal(coll_comm_destroy(c), COLL_OK);
  coll_abort_handle_release(h);
  standin_dev_free(buf);
  assert_true(nt_no_misuse());
}

/* Destroy with a request still running aborts the NCCL comm (destroy would
 * wait forever); the request then completes with ABORTED. */
static void test_destroy_with_work_in_flight(void **state) {
  coll_comm_t *c = one_comm(0);
  coll_request_t *req = NULL;
  float *buf = standin_dev_alloc(0, sizeof(float));
  standin_stats_t st;
  int done = 0;
  (void)state;
  standin_set_hang(1);
  assert_int_equal(
      coll_iallreduce(c, buf, buf, 1, COLL_F32, COLL_SUM, NULL, &req), COLL_OK);
  assert_int_equal(coll_test(req, &done), COLL_OK);
  assert_int_equal(done, 0);
  assert_int_equal(coll_comm_destroy(c), COLL_OK);
  standin_stats(&st);
  assert_int_equal(st.destroy_blocked, 0);
  assert_int_equal(st.comm_aborts, 1);
  assert_int_equal(coll_test(req, &done), COLL_OK);
  assert_int_equal(done, 1);
  assert_int_equal(coll_wait(req), COLL_ERR_ABORTED);
  assert_non_null(strstr(coll_last_error(), "destroyed"));
  standin_dev_free(buf);
  assert_true(nt_no_misuse());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_abort_releases_stuck, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_abort_peer_never_joins, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_abort_destroy_race, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_async_error_aborts, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_timeout_aborts, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_destroy_with_work_in_flight,
                                      nt_setup2, nt_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
