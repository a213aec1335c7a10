/* SPDX-License-Identifier: Apache-2.0 */
/* test_shm_transport.c: the transport rules (coll_transport.h) on the
 * shared-memory transport, between forked rank processes: matching per (source,
 * tag), independent tags, zero-length messages, long messages over many cells,
 * LENGTH_MISMATCH, abort from another thread, timeouts, a killed peer, two
 * threads on one endpoint, bad arguments; and nothing left in /dev/shm. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "shm_test.h"

#define TAG_A 5u
#define TAG_B 9u
/* Longer than many cells (16 KiB each) and than a whole ring (512 KiB),
 * and not a multiple of either. */
#define LONG_BYTES ((size_t)5 * 1024 * 1024 + 4099)

static void expect(tt_result_t *res, coll_status_t got, coll_status_t want,
                   const char *what) {
  if (got != want)
    tt_fail(res, "%s: %s, expected %s (%s)", what, coll_status_name(got),
            coll_status_name(want), coll_last_error());
}

static void check_word(tt_result_t *res, uint64_t got, uint64_t want,
                       const char *what) {
  if (got != want)
    tt_fail(res, "%s: got %llu, expected %llu", what, (unsigned long long)got,
            (unsigned long long)want);
}

static void run_ok(int world, shm_rank_fn fn, void *arg) {
  tt_result_t res[TT_MAX_RANKS];
  char *before = shm_devshm_list(), *after;
  const char *extra;
  int rc = shm_run(world, fn, arg, res, NULL, NULL);
  after = shm_devshm_list();
  extra = shm_devshm_new(before, after); /* static: outlives the lists */
  free(before);
  free(after);
  TT_ASSERT_RANKS_OK(res, world);
  assert_int_equal(rc, 0);
  if (extra != NULL) fail_msg("new in /dev/shm: %s", extra);
}

/* Rank 0 sends A1, B1, A2, A3(0 bytes) on two tags; rank 1 receives B
 * first, then the A's in order: tags are independent, order per tag kept,
 * a zero-length message keeps its place. */
static void matching_rank(coll_transport_t *t, int rank, int world,
                          tt_result_t *res, void *arg) {
  uint64_t v;
  size_t len = 99;
  (void)world;
  (void)arg;
  if (rank == 0) {
    uint64_t a1 = 11, b1 = 21, a2 = 12;
    expect(res, tt_send(t, 1, TAG_A, &a1, 8), COLL_OK, "send A1");
    expect(res, tt_send(t, 1, TAG_B, &b1, 8), COLL_OK, "send B1");
    expect(res, tt_send(t, 1, TAG_A, &a2, 8), COLL_OK, "send A2");
    expect(res, tt_send(t, 1, TAG_A, NULL, 0), COLL_OK, "send A3");
    expect(res, tt_recv(t, 1, TAG_B, &v, 8, NULL), COLL_OK, "final ack");
    return;
  }
  expect(res, tt_recv(t, 0, TAG_B, &v, 8, &len), COLL_OK, "recv B1");
  check_word(res, v, 21, "B1");
  expect(res, tt_recv(t, 0, TAG_A, &v, 8, &len), COLL_OK, "recv A1");
  check_word(res, v, 11, "A1");
  expect(res, tt_recv(t, 0, TAG_A, &v, 8, &len), COLL_OK, "recv A2");
  check_word(res, v, 12, "A2");
  expect(res, tt_recv(t, 0, TAG_A, NULL, 0, &len), COLL_OK, "recv A3");
  check_word(res, len, 0, "A3 length");
  expect(res, tt_send(t, 0, TAG_B, &v, 8), COLL_OK, "final ack");
}

static void test_matching(void **state) {
  (void)state;
  run_ok(2, matching_rank, NULL);
}

/* Both ranks post a long send and a long receive at once, then wait for
 * the receive first: the pending send must move during that wait. */
static void long_rank(coll_transport_t *t, int rank, int world,
                      tt_result_t *res, void *arg) {
  int peer = 1 - rank;
  uint8_t *out = malloc(LONG_BYTES), *in = malloc(LONG_BYTES);
  void *sr, *rr;
  size_t len = 0;
  (void)world;
  (void)arg;
  if (out == NULL || in == NULL) {
    tt_fail(res, "out of memory");
    goto out;
  }
  tt_fill(out, LONG_BYTES, (uint64_t)rank + 100);
  expect(res, coll__t_isend(t, peer, TAG_A, out, LONG_BYTES, &sr), COLL_OK,
         "isend");
  expect(res, coll__t_irecv(t, peer, TAG_A, in, LONG_BYTES, &rr), COLL_OK,
         "irecv");
  expect(res, tt_wait(t, rr, TT_WAIT_MS, &len), COLL_OK, "wait recv");
  expect(res, tt_wait(t, sr, TT_WAIT_MS, NULL), COLL_OK, "wait send");
  check_word(res, len, LONG_BYTES, "length");
  if (!tt_check(in, LONG_BYTES, (uint64_t)peer + 100))
    tt_fail(res, "long message corrupted");
out:
  free(out);
  free(in);
}

static void test_long_messages(void **state) {
  (void)state;
  run_ok(2, long_rank, NULL);
}

/* A message longer than the receive: LENGTH_MISMATCH with the length sent,
 * the send completes, the next message on the tag is intact. Once with
 * the receive posted first (rank 1 says so on TAG_B), once with the
 * message arrived first (buffered). */
static void mismatch_rank(coll_transport_t *t, int rank, int world,
                          tt_result_t *res, void *arg) {
  uint8_t big[40000], small[10];
  uint64_t v = 77, ready;
  size_t len = 0;
  void *rr;
  (void)world;
  (void)arg;
  memset(big, 0xab, sizeof big);
  if (rank == 0) {
    expect(res, tt_recv(t, 1, TAG_B, &ready, 8, NULL), COLL_OK, "ready");
    expect(res, tt_send(t, 1, TAG_A, big, 100), COLL_OK, "send 100");
    expect(res, tt_send(t, 1, TAG_A, &v, 8), COLL_OK, "send next");
    expect(res, tt_send(t, 1, TAG_A, big, sizeof big), COLL_OK, "send big");
    expect(res, tt_send(t, 1, TAG_A, &v, 8), COLL_OK, "send next 2");
    return;
  }
  expect(res, coll__t_irecv(t, 0, TAG_A, small, sizeof small, &rr), COLL_OK,
         "irecv");
  expect(res, tt_send(t, 0, TAG_B, &v, 8), COLL_OK, "ready");
  expect(res, tt_wait(t, rr, TT_WAIT_MS, &len), COLL_ERR_LENGTH_MISMATCH,
         "posted mismatch");
  check_word(res, len, 100, "posted mismatch length");
  expect(res, tt_recv(t, 0, TAG_A, &ready, 8, &len), COLL_OK, "next");
  check_word(res, ready, 77, "next");
  test_sleep_ms(100); /* the big one arrives before its receive */
  expect(res, tt_recv(t, 0, TAG_A, small, sizeof small, &len),
         COLL_ERR_LENGTH_MISMATCH, "buffered mismatch");
  check_word(res, len, sizeof big, "buffered mismatch length");
  if (strstr(coll_last_error(), "rank 0") == NULL)
    tt_fail(res, "mismatch text names no rank: %s", coll_last_error());
  expect(res, tt_recv(t, 0, TAG_A, &ready, 8, &len), COLL_OK, "next 2");
  check_word(res, ready, 77, "next 2");
}

static void test_length_mismatch(void **state) {
  (void)state;
  run_ok(2, mismatch_rank, NULL);
}

/* wait(0) polls and leaves the request pending; a bounded wait times out
 * and leaves it pending; the message then completes it. */
static void timeout_rank(coll_transport_t *t, int rank, int world,
                         tt_result_t *res, void *arg) {
  uint64_t v = 5, got = 0, go = 1;
  size_t len = 0;
  void *rr;
  (void)world;
  (void)arg;
  if (rank == 0) {
    expect(res, tt_recv(t, 1, TAG_B, &go, 8, NULL), COLL_OK, "go");
    expect(res, tt_send(t, 1, TAG_A, &v, 8), COLL_OK, "send");
    return;
  }
  expect(res, coll__t_irecv(t, 0, TAG_A, &got, 8, &rr), COLL_OK, "irecv");
  expect(res, tt_wait(t, rr, 0, &len), COLL_ERR_TIMEOUT, "poll");
  expect(res, tt_wait(t, rr, 50, &len), COLL_ERR_TIMEOUT, "bounded");
  if (strstr(coll_last_error(), "rank 0") == NULL)
    tt_fail(res, "timeout text names no rank: %s", coll_last_error());
  expect(res, tt_send(t, 0, TAG_B, &go, 8), COLL_OK, "go");
  expect(res, tt_wait(t, rr, TT_WAIT_MS, &len), COLL_OK, "complete");
  check_word(res, got, 5, "value");
}

static void test_timeouts(void **state) {
  (void)state;
  run_ok(2, timeout_rank, NULL);
}

typedef struct abort_arg {
  coll_transport_t *t;
} abort_arg_t;

static void *abort_later(void *p) {
  abort_arg_t *a = p;
  test_sleep_ms(100);
  coll__t_abort(a->t);
  return NULL;
}

/* Rank 1 waits for a message that never comes; another thread aborts:
 * the wait returns ABORTED, a later isend fails at once, and rank 0,
 * waiting on rank 1, learns that rank 1 aborted (ABORTED, not PEER_LOST:
 * the process is alive). */
static void abort_rank(coll_transport_t *t, int rank, int world,
                       tt_result_t *res, void *arg) {
  uint64_t v = 0;
  pthread_t th;
  abort_arg_t a = {t};
  void *r;
  (void)world;
  (void)arg;
  if (rank == 0) {
    expect(res, tt_recv(t, 1, TAG_A, &v, 8, NULL), COLL_ERR_ABORTED,
           "recv from the aborted rank");
    if (strstr(coll_last_error(), "rank 1 aborted") == NULL)
      tt_fail(res, "abort text does not name rank 1: %s", coll_last_error());
    return;
  }
  if (pthread_create(&th, NULL, abort_later, &a) != 0) {
    tt_fail(res, "pthread_create");
    return;
  }
  expect(res, tt_recv(t, 0, TAG_A, &v, 8, NULL), COLL_ERR_ABORTED, "recv");
  pthread_join(th, NULL);
  expect(res, coll__t_isend(t, 0, TAG_A, &v, 8, &r), COLL_ERR_ABORTED,
         "isend after abort");
}

static void test_abort_other_thread(void **state) {
  (void)state;
  run_ok(2, abort_rank, NULL);
}

typedef struct thr_arg {
  coll_transport_t *t;
  tt_result_t res;
  uint64_t got;
} thr_arg_t;

static void *recv_tag_a(void *p) {
  thr_arg_t *a = p;
  expect(&a->res, tt_recv(a->t, 0, TAG_A, &a->got, 8, NULL), COLL_OK,
         "thread recv");
  return NULL;
}

/* Two threads of rank 1 wait at once on different tags; rank 0 answers
 * the second one first. */
static void threads_rank(coll_transport_t *t, int rank, int world,
                         tt_result_t *res, void *arg) {
  uint64_t a = 1, b = 2, got = 0;
  thr_arg_t ta;
  pthread_t th;
  (void)world;
  (void)arg;
  if (rank == 0) {
    test_sleep_ms(50);
    expect(res, tt_send(t, 1, TAG_B, &b, 8), COLL_OK, "send B");
    test_sleep_ms(50);
    expect(res, tt_send(t, 1, TAG_A, &a, 8), COLL_OK, "send A");
    return;
  }
  memset(&ta, 0, sizeof ta);
  ta.t = t;
  if (pthread_create(&th, NULL, recv_tag_a, &ta) != 0) {
    tt_fail(res, "pthread_create");
    return;
  }
  expect(res, tt_recv(t, 0, TAG_B, &got, 8, NULL), COLL_OK, "recv B");
  pthread_join(th, NULL);
  check_word(res, got, 2, "B");
  check_word(res, ta.got, 1, "A");
  if (ta.res.failed) tt_fail(res, "%s", ta.res.msg);
}

static void test_two_threads(void **state) {
  (void)state;
  run_ok(2, threads_rank, NULL);
}

/* Rank 2 dies by SIGKILL while ranks 0 and 1 wait on it: both get
 * PEER_LOST naming rank 2 (well before TT_WAIT_MS). */
static void kill_rank(coll_transport_t *t, int rank, int world,
                      tt_result_t *res, void *arg) {
  uint64_t v = 0;
  (void)world;
  (void)arg;
  if (rank == 2) {
    test_sleep_ms(100);
    raise(SIGKILL);
  }
  coll_origin_t o = {-1, 0, 0};
  expect(res, tt_recv(t, 2, TAG_A, &v, 8, NULL), COLL_ERR_PEER_LOST,
         "recv from the killed rank");
  if (strstr(coll_last_error(), "rank 2 lost") == NULL)
    tt_fail(res, "loss text does not name rank 2: %s", coll_last_error());
  /* The origin libcoll forwards when it fails the comm. */
  if (!coll__t_origin(t, &o) || o.rank != 2 || o.cause != COLL_CAUSE_LOST)
    tt_fail(res, "origin: rank %d cause %d, expected rank 2 lost", o.rank,
            o.cause);
  expect(res, coll__t_isend(t, 2, TAG_A, &v, 8, &(void *){NULL}),
         COLL_ERR_PEER_LOST, "isend to the killed rank");
}

static void test_killed_peer(void **state) {
  tt_result_t res[3];
  int status[3];
  char *before = shm_devshm_list(), *after;
  const char *extra;
  (void)state;
  shm_run(3, kill_rank, NULL, res, status, NULL);
  after = shm_devshm_list();
  extra = shm_devshm_new(before, after);
  free(before);
  free(after);
  TT_ASSERT_RANKS_OK(res, 2);
  assert_int_equal(status[0], 0);
  assert_int_equal(status[1], 0);
  assert_int_equal(status[2], 128 + SIGKILL);
  if (extra != NULL) fail_msg("new in /dev/shm: %s", extra);
}

/* Bad arguments are refused with a text, posting nothing. */
static void args_rank(coll_transport_t *t, int rank, int world,
                      tt_result_t *res, void *arg) {
  void *r;
  uint64_t v = 0;
  (void)arg;
  expect(res, coll__t_isend(t, world, TAG_A, &v, 8, &r), COLL_ERR_INVALID_ARG,
         "peer out of range");
  if (strstr(coll_last_error(), "peer") == NULL)
    tt_fail(res, "no text: %s", coll_last_error());
  expect(res, coll__t_irecv(t, rank, TAG_A, &v, 8, &r), COLL_ERR_INVALID_ARG,
         "own rank");
  expect(res, coll__t_isend(t, 1 - rank, TAG_A, NULL, 8, &r),
         COLL_ERR_INVALID_ARG, "NULL buffer");
}

static void test_bad_args(void **state) {
  (void)state;
  run_ok(2, args_rank, NULL);
}

static void never_runs(coll_transport_t *t, int rank, int world,
                       tt_result_t *res, void *arg) {
  (void)t;
  (void)rank;
  (void)world;
  (void)arg;
  tt_fail(res, "the setup should have failed");
}

/* A rank of another job dials rank 0: rank 0 refuses its hello (and
 * times out waiting for its own rank 1), the dialer learns it was
 * refused. Neither ends up with an endpoint. */
static void test_other_job_refused(void **state) {
  tt_result_t res[2];
  int status[2];
  (void)state;
  shm_test_job_id[1] = "another-job";
  shm_test_setup_ms = 1000;
  shm_run(2, never_runs, NULL, res, status, NULL);
  shm_test_job_id[1] = NULL;
  shm_test_setup_ms = 0;
  assert_int_equal(status[0], 2);
  assert_int_equal(status[1], 2);
  if (strstr(res[0].msg, "ERR_TIMEOUT") == NULL ||
      strstr(res[0].msg, "did not connect") == NULL)
    fail_msg("rank 0: %s", res[0].msg);
  if (strstr(res[1].msg, "ERR_PEER_LOST") == NULL ||
      strstr(res[1].msg, "another job id or auth token") == NULL)
    fail_msg("rank 1: %s", res[1].msg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matching),
      cmocka_unit_test(test_long_messages),
      cmocka_unit_test(test_length_mismatch),
      cmocka_unit_test(test_timeouts),
      cmocka_unit_test(test_abort_other_thread),
      cmocka_unit_test(test_two_threads),
      cmocka_unit_test(test_killed_peer),
      cmocka_unit_test(test_bad_args),
      cmocka_unit_test(test_other_job_refused),
  };
  signal(SIGPIPE, SIG_IGN);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
