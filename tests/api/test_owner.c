/* SPDX-License-Identifier: Apache-2.0 */
/* test_owner.c: two threads calling into one comm at once (coll.h allows
 * one thread per comm at a time). The second call is refused at once with
 * COLL_ERR_INVALID_ARG naming the call in progress; the running call
 * completes with the right result once the peer joins, and the comm keeps
 * working, also from a third thread. Never a hang, never a peer blamed. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "coll.h"
#include "test_util.h"

#define N 1024
#define WAIT_MS 30000 /* bound on every wait of the test: a hang fails */

/* One call a caller thread makes on rank 0's comm. */
typedef struct {
  coll_comm_t *comm;
  int kind; /* 0: allreduce of buf; 1: recv into buf from rank 1, tag 3 */
  float buf[N];
  coll_status_t status;
  char text[512];
  atomic_int done;
} call_t;

static void *caller(void *arg) {
  call_t *c = arg;
  size_t got = 0;
  if (c->kind == 0)
    c->status =
        coll_allreduce(c->comm, c->buf, c->buf, N, COLL_F32, COLL_SUM, NULL);
  else
    c->status = coll_recv(c->comm, c->buf, N, COLL_F32, 1, 3, &got);
  snprintf(c->text, sizeof c->text, "%s", coll_last_error());
  atomic_store(&c->done, 1);
  return NULL;
}

/* Waits until one of a, b is done; returns it (NULL after WAIT_MS). */
static call_t *first_done(call_t *a, call_t *b) {
  int64_t end = test_now_ms() + WAIT_MS;
  while (test_now_ms() < end) {
    if (atomic_load(&a->done)) return a;
    if (atomic_load(&b->done)) return b;
    test_sleep_ms(1);
  }
  return NULL;
}

/* Rank 0 gets two calls from two threads while rank 1 is not yet in any:
 * `kind_a` and `kind_b` as in call_t. Rank 1 then does its part of the call
 * that was let in (allreduce of ones, or a send of ones) and everything is
 * checked. */
static void two_threads(int kind_a, int kind_b) {
  coll_comm_t *comms[2];
  static call_t a, b;
  call_t *refused, *running;
  pthread_t ta, tb;
  float ones[N];
  int i;
  assert_int_equal(test_inproc_comms(2, WAIT_MS, comms), 0);
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  a.comm = b.comm = comms[0];
  a.kind = kind_a;
  b.kind = kind_b;
  for (i = 0; i < N; i++) a.buf[i] = b.buf[i] = 2.0f, ones[i] = 1.0f;
  assert_int_equal(pthread_create(&ta, NULL, caller, &a), 0);
  assert_int_equal(pthread_create(&tb, NULL, caller, &b), 0);

  /* Neither can complete before rank 1 calls, so the one that returns
   * first is the refused one, and the other is inside. */
  refused = first_done(&a, &b);
  if (refused == NULL) fail_msg("neither call returned: the check is missing");
  running = refused == &a ? &b : &a;
  assert_int_equal(refused->status, COLL_ERR_INVALID_ARG);
  if (strstr(refused->text, running->kind == 0 ? "in allreduce" : "in recv") ==
          NULL ||
      strstr(refused->text, "one thread at a time") == NULL)
    fail_msg("the refusal does not name the call in progress: %s",
             refused->text);

  /* Rank 1 joins the call that runs; it completes with the right result. */
  if (running->kind == 0)
    assert_int_equal(
        coll_allreduce(comms[1], ones, ones, N, COLL_F32, COLL_SUM, NULL),
        COLL_OK);
  else
    assert_int_equal(coll_send(comms[1], ones, N, COLL_F32, 0, 3), COLL_OK);
  assert_int_equal(pthread_join(ta, NULL), 0);
  assert_int_equal(pthread_join(tb, NULL), 0);
  if (running->status != COLL_OK) fail_msg("running call: %s", running->text);
  for (i = 0; i < N; i++) {
    assert_true(running->buf[i] == (running->kind == 0 ? 3.0f : 1.0f));
    assert_true(refused->buf[i] == 2.0f); /* untouched */
  }

  /* The comm keeps working, from another thread too (the rule is one
   * thread at a time, not one thread for ever). */
  memset(&a, 0, sizeof a);
  a.comm = comms[0];
  for (i = 0; i < N; i++) a.buf[i] = 5.0f, ones[i] = 1.0f;
  assert_int_equal(pthread_create(&ta, NULL, caller, &a), 0);
  assert_int_equal(
      coll_allreduce(comms[1], ones, ones, N, COLL_F32, COLL_SUM, NULL),
      COLL_OK);
  assert_int_equal(pthread_join(ta, NULL), 0);
  if (a.status != COLL_OK) fail_msg("after the refusal: %s", a.text);
  for (i = 0; i < N; i++) assert_true(a.buf[i] == 6.0f && ones[i] == 6.0f);
  test_destroy_comms(2, comms);
}

static void test_two_allreduces(void **state) {
  (void)state;
  two_threads(0, 0);
}

static void test_recv_and_allreduce(void **state) {
  (void)state;
  two_threads(1, 0);
}

/* A nonblocking call holds the comm only while it is issued: another
 * thread may issue the next call, and wait for either request. */
static void test_nonblocking_then_other_thread(void **state) {
  coll_comm_t *comms[2];
  coll_request_t *r0 = NULL, *r1 = NULL;
  static call_t b;
  pthread_t tb;
  float x[N], y[N];
  int i;
  (void)state;
  assert_int_equal(test_inproc_comms(2, WAIT_MS, comms), 0);
  for (i = 0; i < N; i++) x[i] = 1.0f, y[i] = 2.0f;
  assert_int_equal(
      coll_iallreduce(comms[0], x, x, N, COLL_F32, COLL_SUM, NULL, &r0),
      COLL_OK);
  assert_int_equal(
      coll_iallreduce(comms[1], y, y, N, COLL_F32, COLL_SUM, NULL, &r1),
      COLL_OK);
  memset(&b, 0, sizeof b);
  b.comm = comms[0];
  for (i = 0; i < N; i++) b.buf[i] = 4.0f;
  assert_int_equal(pthread_create(&tb, NULL, caller, &b), 0);
  assert_int_equal(coll_wait(r1), COLL_OK);
  for (i = 0; i < N; i++) y[i] = 1.0f;
  assert_int_equal(coll_allreduce(comms[1], y, y, N, COLL_F32, COLL_SUM, NULL),
                   COLL_OK);
  assert_int_equal(pthread_join(tb, NULL), 0);
  if (b.status != COLL_OK) fail_msg("second thread: %s", b.text);
  assert_int_equal(coll_wait(r0), COLL_OK);
  for (i = 0; i < N; i++) assert_true(x[i] == 3.0f && b.buf[i] == 5.0f);
  test_destroy_comms(2, comms);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_allreduces),
      cmocka_unit_test(test_recv_and_allreduce),
      cmocka_unit_test(test_nonblocking_then_other_thread),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
