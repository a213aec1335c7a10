/* SPDX-License-Identifier: Apache-2.0 */
/* test_nccl_faults.c: failures on NCCL comms as NCCL 2.28 shows them (the
 * stand-in's abort waits for the streams, its destroy refuses a comm with a
 * pending error, its argument errors poison the comm): coll_abort returns
 * at once whatever the stream holds (N4 of the second review), every wait
 * ends at the comm's timeout, also one queued behind a stuck request or
 * another comm's kernel (N5), destroy after an error libcoll had not seen
 * (N6), an NCCL argument error sticks (N8), a pre-multiplied op is never
 * destroyed beside an abort (N9), a group closes before it aborts (N14). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include <cmocka.h>

#include "nccl_test_util.h"
#include "test_util.h"

/* A thread that calls coll_abort(h) after delay_ms (unless h is NULL),
 * recording when, and another that calls standin_stall(0) after
 * release_ms (unless 0). */
struct timer {
  coll_abort_handle_t *h;
  int64_t delay_ms, release_ms;
  int64_t abort_at, abort_took;
  uv_thread_t th, rel;
};

static void timer_main(void *p) {
  struct timer *t = p;
  int64_t t1;
  test_sleep_ms(t->delay_ms);
  t1 = test_now_ms();
  coll_abort(t->h);
  t->abort_at = test_now_ms();
  t->abort_took = t->abort_at - t1;
}

static void release_main(void *p) {
  struct timer *t = p;
  test_sleep_ms(t->release_ms);
  standin_stall(0);
}

static void timer_start(struct timer *t, coll_abort_handle_t *h,
                        int64_t delay_ms, int64_t release_ms) {
  memset(t, 0, sizeof *t);
  t->h = h;
  t->delay_ms = delay_ms;
  t->release_ms = release_ms;
  if (h != NULL) assert_int_equal(uv_thread_create(&t->th, timer_main, t), 0);
  if (release_ms > 0)
    assert_int_equal(uv_thread_create(&t->rel, release_main, t), 0);
}

static void timer_join(struct timer *t) {
  if (t->h != NULL) uv_thread_join(&t->th);
  if (t->release_ms > 0) uv_thread_join(&t->rel);
}

struct warm {
  coll_comm_t **c;
  float **buf;
  coll_status_t s[2];
};

static void warm_rank(int rank, int world, void *p) {
  struct warm *w = p;
  (void)world;
  nt_set_device(rank);
  w->s[rank] = coll_allreduce(w->c[rank], w->buf[rank], w->buf[rank], 4,
                              COLL_F32, COLL_SUM, NULL);
}

/* Two connected rank comms: a first allreduce done on both, by rank
 * threads (a first use waits for the peer to connect). After that one
 * thread may issue on both. */
static void warm_pair(coll_comm_t **c, int64_t timeout_ms, float **buf) {
  struct warm w;
  int i;
  assert_int_equal(nt_rank_comms(2, timeout_ms, c), 0);
  for (i = 0; i < 2; i++) buf[i] = standin_dev_alloc(i, 4 * sizeof(float));
  w.c = c;
  w.buf = buf;
  test_run_ranks(2, warm_rank, &w, 20000, "warm-up");
  for (i = 0; i < 2; i++) assert_int_equal(w.s[i], COLL_OK);
  nt_set_device(0);
}

static void free_pair(coll_comm_t **c, float **buf) {
  int i;
  for (i = 0; i < 2; i++) {
    coll_comm_destroy(c[i]);
    standin_dev_free(buf[i]);
  }
}

/* N4: the stream is stalled (a long kernel ahead); NCCL's abort would wait
 * for it. coll_abort must return at once and end the wait. */
static void test_abort_prompt_with_stalled_stream(void **state) {
  coll_comm_t *c[2] = {0};
  float *buf[2];
  coll_request_t *r[2] = {0};
  coll_abort_handle_t *h[2] = {0};
  struct timer t;
  int64_t returned;
  coll_status_t s;
  int i;
  (void)state;
  warm_pair(c, 10000, buf);
  for (i = 0; i < 2; i++) coll_comm_abort_handle(c[i], &h[i]);
  standin_stall(1);
  for (i = 0; i < 2; i++) {
    nt_set_device(i);
    assert_int_equal(coll_iallreduce(c[i], buf[i], buf[i], 4, COLL_F32,
                                     COLL_SUM, NULL, &r[i]),
                     COLL_OK);
  }
  nt_set_device(0);
  timer_start(&t, h[0], 50, 2000);
  s = coll_wait(r[0]);
  returned = test_now_ms();
  timer_join(&t);
  print_message(
      "stalled stream: coll_abort took %lld ms, coll_wait ended "
      "%lld ms after it was called\n",
      (long long)t.abort_took, (long long)(returned - t.abort_at));
  assert_int_equal(s, COLL_ERR_ABORTED);
  assert_true(t.abort_took < 1000);
  assert_true(returned - (t.abort_at - t.abort_took) < 1000);
  coll_abort(h[1]);
  assert_int_equal(coll_wait(r[1]), COLL_ERR_ABORTED);
  for (i = 0; i < 2; i++) coll_abort_handle_release(h[i]);
  free_pair(c, buf);
  assert_true(nt_no_misuse());
}

/* N4 and N5: a blocking allreduce, comm timeout 300 ms, behind 3 s of the
 * caller's own work: it times out (at twice the timeout from the call,
 * since it never started) and returns at once, not when the stream
 * drains. */
static void test_timeout_prompt_behind_hold(void **state) {
  coll_comm_t *c[2] = {0};
  float *buf[2];
  int64_t t0, took;
  coll_status_t s;
  (void)state;
  warm_pair(c, 300, buf);
  standin_hold(NULL, 3000);
  t0 = test_now_ms();
  s = coll_allreduce(c[0], buf[0], buf[0], 4, COLL_F32, COLL_SUM, NULL);
  took = test_now_ms() - t0;
  print_message("behind a 3 s hold, timeout 300 ms: %s after %lld ms: %s\n",
                coll_status_name(s), (long long)took, coll_last_error());
  assert_int_equal(s, COLL_ERR_TIMEOUT);
  assert_true(took >= 550 && took < 2000);
  assert_non_null(strstr(coll_last_error(), "600 ms"));
  free_pair(c, buf);
  assert_true(nt_no_misuse());
}

/* N5: r2 is queued behind r1, which never ends; waiting r2 first must end
 * at the comm's timeout (r1's), not never. */
static void test_queued_request_times_out(void **state) {
  coll_comm_t *c = NULL;
  coll_request_t *r1 = NULL, *r2 = NULL;
  coll_abort_handle_t *h = NULL;
  float *buf = standin_dev_alloc(0, sizeof(float));
  struct timer t;
  int64_t t0, took;
  coll_status_t s;
  (void)state;
  assert_int_equal(nt_rank_comms(1, 100, &c), 0);
  coll_comm_abort_handle(c, &h);
  standin_set_hang(1);
  assert_int_equal(
      coll_iallreduce(c, buf, buf, 1, COLL_F32, COLL_SUM, NULL, &r1), COLL_OK);
  assert_int_equal(
      coll_iallreduce(c, buf, buf, 1, COLL_F32, COLL_SUM, NULL, &r2), COLL_OK);
  timer_start(&t, h, 5000, 0); /* ends it should the timeout not */
  t0 = test_now_ms();
  s = coll_wait(r2);
  took = test_now_ms() - t0;
  print_message("queued behind a stuck request: %s after %lld ms: %s\n",
                coll_status_name(s), (long long)took, coll_last_error());
  assert_int_equal(s, COLL_ERR_TIMEOUT);
  assert_true(took < 2000);
  assert_int_equal(coll_wait(r1), COLL_ERR_TIMEOUT);
  timer_join(&t);
  coll_abort_handle_release(h);
  coll_comm_destroy(c);
  standin_dev_free(buf);
  assert_true(nt_no_misuse());
}

/* N5: comm b's allreduce sits behind comm a's kernel, which never ends,
 * on the same stream; b's wait ends with TIMEOUT, at twice its timeout
 * from the call. */
static void test_queued_behind_other_comm(void **state) {
  coll_comm_t *a = NULL, *b = NULL;
  coll_request_t *ra = NULL;
  coll_abort_handle_t *h = NULL;
  float *buf = standin_dev_alloc(0, sizeof(float));
  struct timer t;
  int64_t t0, took;
  coll_status_t s;
  (void)state;
  assert_int_equal(nt_rank_comms(1, 10000, &a), 0);
  assert_int_equal(nt_rank_comms(1, 200, &b), 0);
  coll_comm_abort_handle(b, &h);
  standin_set_hang(1);
  assert_int_equal(
      coll_iallreduce(a, buf, buf, 1, COLL_F32, COLL_SUM, NULL, &ra), COLL_OK);
  standin_set_hang(0);
  timer_start(&t, h, 5000, 0);
  t0 = test_now_ms();
  s = coll_allreduce(b, buf, buf, 1, COLL_F32, COLL_SUM, NULL);
  took = test_now_ms() - t0;
  print_message("behind another comm's stuck kernel: %s after %lld ms\n",
                coll_status_name(s), (long long)took);
  assert_int_equal(s, COLL_ERR_TIMEOUT);
  assert_true(took >= 350 && took < 2000);
  timer_join(&t);
  coll_abort_handle_release(h);
  coll_comm_destroy(b);
  coll_comm_destroy(a); /* aborts it: its work never ends */
  assert_int_equal(coll_wait(ra), COLL_ERR_ABORTED);
  standin_dev_free(buf);
  assert_true(nt_no_misuse());
}

/* N6: NCCL recorded an error after libcoll's last look. ncclCommDestroy
 * would refuse it (and leave this thread's NCCL group depth at 1): destroy
 * must see it first and abort instead. */
static void test_destroy_after_unseen_error(void **state) {
  coll_comm_t *c = NULL;
  float *buf = standin_dev_alloc(0, sizeof(float));
  standin_stats_t st;
  coll_status_t s;
  (void)state;
  assert_int_equal(nt_rank_comms(1, 10000, &c), 0);
  assert_int_equal(coll_allreduce(c, buf, buf, 1, COLL_F32, COLL_SUM, NULL),
                   COLL_OK);
  standin_inject_async_error(ncclRemoteError);
  s = coll_comm_destroy(c);
  standin_stats(&st);
  print_message("destroy after an unseen error: %s: %s\n", coll_status_name(s),
                coll_last_error());
  assert_int_equal(st.destroy_refused, 0);
  assert_int_equal(st.comm_destroys, 0);
  assert_int_equal(st.comm_aborts, 1);
  assert_int_equal(st.comms_live, 0);
  assert_int_equal(standin_group_depth(), 0);
  assert_int_equal(s, COLL_ERR_PEER_LOST);
  /* This thread can still make comms: its NCCL group state is sound. */
  assert_int_equal(nt_rank_comms(1, 10000, &c), 0);
  assert_int_equal(coll_allreduce(c, buf, buf, 1, COLL_F32, COLL_SUM, NULL),
                   COLL_OK);
  assert_int_equal(coll_comm_destroy(c), COLL_OK);
  standin_dev_free(buf);
  assert_true(nt_no_misuse());
}

/* N8: an argument error NCCL itself returns poisons a nonblocking NCCL
 * comm; libcoll makes it sticky (and aborts the comm) instead of letting
 * every later call fail strangely, and destroy still frees it. */
static void test_nccl_argument_error_sticks(void **state) {
  coll_comm_t *c = NULL;
  coll_abort_handle_t *h = NULL;
  float *buf = standin_dev_alloc(0, sizeof(float));
  standin_stats_t st;
  (void)state;
  assert_int_equal(nt_rank_comms(1, 10000, &c), 0);
  coll_comm_abort_handle(c, &h);
  standin_fail_next(ncclInvalidArgument);
  assert_int_equal(coll_allreduce(c, buf, buf, 1, COLL_F32, COLL_SUM, NULL),
                   COLL_ERR_BACKEND);
  assert_non_null(strstr(coll_last_error(), "invalid argument"));
  assert_true(coll_is_aborted(h));
  assert_int_equal(coll_allreduce(c, buf, buf, 1, COLL_F32, COLL_SUM, NULL),
                   COLL_ERR_BACKEND);
  assert_non_null(strstr(coll_last_error(), "(the comm was aborted)"));
  assert_int_equal(coll_comm_destroy(c), COLL_OK);
  standin_stats(&st);
  assert_int_equal(st.comms_live, 0);
  assert_int_equal(st.destroy_refused, 0);
  assert_int_equal(standin_group_depth(), 0);
  coll_abort_handle_release(h);
  standin_dev_free(buf);
  assert_true(nt_no_misuse());
}

/* The hook of the N9 test: at ncclRedOpDestroy, a thread aborts the comm;
 * the hook waits up to 300 ms for that abort to return before NCCL goes
 * on. An op destroyed outside the issue guard then meets a freed comm. */
struct race {
  coll_abort_handle_t *h;
  atomic_int done;
  uv_thread_t th;
  int started;
};

static void race_abort(void *p) {
  struct race *r = p;
  coll_abort(r->h);
  atomic_store(&r->done, 1);
}

static void race_hook(void *p) {
  struct race *r = p;
  int64_t t0 = test_now_ms();
  r->started = uv_thread_create(&r->th, race_abort, r) == 0;
  while (!atomic_load(&r->done) && test_now_ms() - t0 < 300) test_sleep_ms(1);
}

static void test_premul_op_never_beside_abort(void **state) {
  coll_comm_t *c[2] = {0};
  float *buf[2];
  coll_buffer_t b[2];
  coll_request_t *r[2] = {0};
  struct race race;
  coll_status_t s0;
  int i;
  (void)state;
  memset(&race, 0, sizeof race);
  warm_pair(c, 1000, buf);
  coll_comm_abort_handle(c[0], &race.h);
  for (i = 0; i < 2; i++) b[i] = (coll_buffer_t){buf[i], 4, COLL_F32};
  nt_set_device(1);
  assert_int_equal(
      coll_iallreduce_premul_sum(c[1], &b[1], 1, 0.5f, NULL, &r[1]), COLL_OK);
  nt_set_device(0);
  standin_set_hook("ncclRedOpDestroy", race_hook, &race);
  /* The abort may end the call itself, or its wait. */
  s0 = coll_iallreduce_premul_sum(c[0], &b[0], 1, 0.5f, NULL, &r[0]);
  if (s0 == COLL_OK) s0 = coll_wait(r[0]);
  assert_true(s0 == COLL_OK || s0 == COLL_ERR_ABORTED);
  coll_wait(r[1]);
  standin_set_hook("", NULL, NULL);
  assert_true(race.started);
  uv_thread_join(&race.th);
  coll_abort_handle_release(race.h);
  free_pair(c, buf);
  assert_true(nt_no_misuse());
}

/* N14: the second device's enqueue fails inside the group's NCCL group:
 * the group is closed first, then both comms are aborted (never an abort
 * inside an open NCCL group, which NCCL would queue to the group's end and
 * make blocking). */
static void test_group_closes_before_abort(void **state) {
  int devs[] = {0, 1};
  float *bufs[2];
  coll_group_t *g = NULL;
  coll_comm_t *comms[2];
  standin_stats_t st;
  int i;
  (void)state;
  assert_int_equal(coll_group_create(devs, 2, &g), COLL_OK);
  for (i = 0; i < 2; i++) bufs[i] = standin_dev_alloc(i, 4 * sizeof(float));
  /* A refusal of libcoll's inside the group reaches no NCCL call: it
   * sticks to no comm. */
  assert_int_equal(coll_group_allreduce(g, (void *const *)bufs, 2, 4, COLL_I8,
                                        COLL_AVG, NULL, 0),
                   COLL_ERR_UNSUPPORTED);
  assert_int_equal(coll_group_allreduce(g, (void *const *)bufs, 2, 4, COLL_F32,
                                        COLL_SUM, NULL, 0),
                   COLL_OK);
  standin_fail_after(1, ncclSystemError);
  assert_int_equal(coll_group_allreduce(g, (void *const *)bufs, 2, 4, COLL_F32,
                                        COLL_SUM, NULL, 0),
                   COLL_ERR_BACKEND);
  standin_stats(&st);
  assert_int_equal(st.aborts_in_group, 0);
  assert_int_equal(standin_group_depth(), 0);
  assert_int_equal(coll_group_split(g, comms), COLL_OK);
  for (i = 0; i < 2; i++) {
    assert_int_equal(
        coll_allreduce(comms[i], bufs[i], bufs[i], 4, COLL_F32, COLL_SUM, NULL),
        COLL_ERR_BACKEND);
    assert_non_null(strstr(coll_last_error(), "(the comm was aborted)"));
    assert_int_equal(coll_comm_destroy(comms[i]), COLL_OK);
  }
  coll_group_destroy(g);
  standin_stats(&st);
  assert_int_equal(st.comms_live, 0);
  for (i = 0; i < 2; i++) standin_dev_free(bufs[i]);
  assert_true(nt_no_misuse());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_abort_prompt_with_stalled_stream,
                                      nt_setup2, nt_teardown),
      cmocka_unit_test_setup_teardown(test_timeout_prompt_behind_hold,
                                      nt_setup2, nt_teardown),
      cmocka_unit_test_setup_teardown(test_queued_request_times_out, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_queued_behind_other_comm, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_destroy_after_unseen_error,
                                      nt_setup2, nt_teardown),
      cmocka_unit_test_setup_teardown(test_nccl_argument_error_sticks,
                                      nt_setup2, nt_teardown),
      cmocka_unit_test_setup_teardown(test_premul_op_never_beside_abort,
                                      nt_setup2, nt_teardown),
      cmocka_unit_test_setup_teardown(test_group_closes_before_abort, nt_setup2,
                                      nt_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
