/* SPDX-License-Identifier: Apache-2.0 */
/* test_inproc_fail.c: abort and destroy of an in-process endpoint: its own
 * requests fail ABORTED, its peers' ones ABORTED naming it (after an abort)
 * or PEER_LOST (after a destroy), a rank that fails because of another
 * forwards that origin, blocked waits wake, and no buffer is touched once
 * abort returned. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <cmocka.h>

#include "transport/inproc/inproc.h"
#include "transport_test.h"

/* The abort-during-copy race: a copy long enough to be caught running
 * (a few ms), tried until it was caught COPY_SEEN_RUNS times. */
#define COPY_BIG (16u << 20)
#define COPY_SEEN_RUNS 3
#define COPY_MAX_RUNS 40

static void make(int n, coll_transport_t **t) {
  assert_int_equal(coll_inproc_create(n, t), COLL_OK);
}

static void expect_fail(coll_transport_t *t, void *r, coll_status_t want,
                        const char *words) {
  assert_int_equal(tt_wait(t, r, 0, NULL), want);
  assert_non_null(strstr(coll_last_error(), words));
}

/* Every kind of request that involves rank 0 fails when it is aborted;
 * an unrelated one stays pending. */
static void test_abort_fails_everything(void **state) {
  coll_transport_t *t[3];
  char b5[8], b8[8], b9[8], *m6 = malloc(64);
  void *r5, *s6, *s7, *r8, *r9, *r;
  (void)state;
  make(3, t);
  memset(m6, 1, 64);
  assert_int_equal(coll__t_irecv(t[0], 1, 5, b5, 8, &r5), COLL_OK);
  assert_int_equal(coll__t_isend(t[0], 2, 6, m6, 64, &s6), COLL_OK);
  assert_int_equal(coll__t_isend(t[1], 0, 7, "x", 2, &s7), COLL_OK);
  assert_int_equal(coll__t_irecv(t[2], 0, 8, b8, 8, &r8), COLL_OK);
  assert_int_equal(coll__t_irecv(t[1], 2, 9, b9, 8, &r9), COLL_OK);
  coll__t_abort(t[0]);
  coll__t_abort(t[0]); /* idempotent */
  /* The queued send's buffer is the caller's again: nothing reads it. */
  free(m6);
  expect_fail(t[0], r5, COLL_ERR_ABORTED, "aborted");
  expect_fail(t[0], s6, COLL_ERR_ABORTED, "aborted");
  expect_fail(t[1], s7, COLL_ERR_ABORTED, "rank 0 aborted, seen by rank 1");
  expect_fail(t[2], r8, COLL_ERR_ABORTED, "rank 0 aborted, seen by rank 2");
  assert_int_equal(tt_wait(t[1], r9, 0, NULL), COLL_ERR_TIMEOUT);
  /* Later requests fail at once. */
  assert_int_equal(coll__t_isend(t[0], 1, 1, "y", 2, &r), COLL_ERR_ABORTED);
  assert_int_equal(coll__t_irecv(t[0], 1, 1, b5, 8, &r), COLL_ERR_ABORTED);
  assert_int_equal(coll__t_isend(t[1], 0, 1, "y", 2, &r), COLL_ERR_ABORTED);
  assert_non_null(strstr(coll_last_error(), "rank 0 aborted"));
  assert_int_equal(coll__t_irecv(t[2], 0, 6, b8, 8, &r), COLL_ERR_ABORTED);
  /* The others go on. */
  assert_int_equal(tt_send(t[2], 1, 9, "ok", 3), COLL_OK);
  assert_int_equal(tt_wait(t[1], r9, 0, NULL), COLL_OK);
  assert_string_equal(b9, "ok");
  assert_int_equal(coll__t_barrier(t[1], COLL_TAG_RESERVED, -1),
                   COLL_ERR_ABORTED);
  tt_destroy_all(t, 3);
}

/* A rank whose collective timed out ends its peers' requests with it. A
 * request that is over must not say TIMEOUT, which means "still pending"
 * (its owner would wait for it again and free it twice): it ends ABORTED,
 * with a text naming the rank that timed out. */
static void test_peer_timeout_ends_requests(void **state) {
  coll_transport_t *t[3];
  char b1[8], b2[8];
  void *r1, *r2;
  (void)state;
  make(3, t);
  assert_int_equal(coll__t_irecv(t[1], 0, 5, b1, 8, &r1), COLL_OK);
  assert_int_equal(coll__t_irecv(t[2], 0, 5, b2, 8, &r2), COLL_OK);
  coll__t_fail(t[0], COLL_ERR_TIMEOUT);
  expect_fail(t[1], r1, COLL_ERR_ABORTED, "rank 0 timed out");
  expect_fail(t[2], r2, COLL_ERR_ABORTED, "rank 0 timed out");
  tt_destroy_all(t, 3);
}

/* A destroyed endpoint is lost to its peers, with a text that says so. */
static void test_peer_destroyed(void **state) {
  coll_transport_t *t[3];
  char b[8];
  void *r1, *s1, *r;
  (void)state;
  make(3, t);
  assert_int_equal(coll__t_irecv(t[1], 0, 1, b, 8, &r1), COLL_OK);
  assert_int_equal(coll__t_isend(t[1], 0, 2, "q", 2, &s1), COLL_OK);
  coll_transport_destroy(t[0]);
  t[0] = NULL;
  expect_fail(t[1], r1, COLL_ERR_PEER_LOST,
              "rank 0 left (its comm was destroyed), seen by rank 1");
  expect_fail(t[1], s1, COLL_ERR_PEER_LOST, "rank 0 left");
  assert_int_equal(coll__t_isend(t[2], 0, 1, "y", 2, &r), COLL_ERR_PEER_LOST);
  assert_int_equal(coll__t_irecv(t[2], 0, 1, b, 8, &r), COLL_ERR_PEER_LOST);
  assert_non_null(strstr(coll_last_error(), "destroyed"));
  /* The others go on. */
  assert_int_equal(coll__t_irecv(t[2], 1, 3, b, 8, &r), COLL_OK);
  assert_int_equal(tt_send(t[1], 2, 3, "12", 3), COLL_OK);
  assert_int_equal(tt_wait(t[2], r, 0, NULL), COLL_OK);
  assert_string_equal(b, "12");
  tt_destroy_all(t, 3);
}

/* ------------------------------------------------------------------------ */
/* Threads: a wait blocked forever is woken by another thread's abort or a  */
/* peer's destroy. Only the statuses are checked; test_run_ranks bounds it. */

typedef struct wake_run {
  coll_transport_t *t[2];
  tt_result_t res[2];
  int kill_by_destroy; /* rank 1 destroys its own endpoint, else aborts 0 */
  int blocked_send;    /* rank 0 waits on a queued send, else a receive */
  atomic_int posted;   /* rank 0 posted its request */
  coll_status_t got0, got1;
} wake_run_t;

static void wake_rank(int rank, int world, void *arg) {
  wake_run_t *x = arg;
  char b[8];
  void *r;
  coll_status_t s;
  (void)world;
  if (rank == 0) {
    s = x->blocked_send ? coll__t_isend(x->t[0], 1, 4, "never", 6, &r)
                        : coll__t_irecv(x->t[0], 1, 4, b, 8, &r);
    atomic_store(&x->posted, 1);
    if (s != COLL_OK) {
      tt_fail(&x->res[0], "post: %s", coll_last_error());
      return;
    }
    x->got0 = tt_wait(x->t[0], r, -1, NULL);
    return;
  }
  while (!atomic_load(&x->posted)) test_sleep_ms(1);
  test_sleep_ms(30); /* let rank 0 fall asleep in its wait */
  if (x->kill_by_destroy) {
    coll_transport_destroy(x->t[1]);
    x->t[1] = NULL;
  } else {
    coll__t_abort(x->t[0]);
    x->got1 = tt_recv(x->t[1], 0, 4, b, 8, NULL);
  }
}

static void run_wake(int kill_by_destroy, int blocked_send) {
  wake_run_t x;
  memset(&x, 0, sizeof x);
  atomic_init(&x.posted, 0);
  x.kill_by_destroy = kill_by_destroy;
  x.blocked_send = blocked_send;
  make(2, x.t);
  test_run_ranks(2, wake_rank, &x, TT_RUN_MS, "wake a blocked wait");
  TT_ASSERT_RANKS_OK(x.res, 2);
  if (kill_by_destroy) {
    assert_int_equal(x.got0, COLL_ERR_PEER_LOST);
  } else {
    assert_int_equal(x.got0, COLL_ERR_ABORTED);
    assert_int_equal(x.got1, COLL_ERR_ABORTED); /* rank 0 aborted */
  }
  tt_destroy_all(x.t, 2);
}

static void test_abort_wakes_blocked_wait(void **state) {
  (void)state;
  run_wake(0, 0);
  run_wake(0, 1);
}

static void test_destroy_wakes_blocked_peer(void **state) {
  (void)state;
  run_wake(1, 0);
  run_wake(1, 1);
}

/* Several threads abort one endpoint at once, with requests pending on it
 * and on its peer: every abort returns and each request fails once. */
typedef struct race_run {
  coll_transport_t *t[2];
} race_run_t;

static void race_rank(int rank, int world, void *arg) {
  race_run_t *x = arg;
  (void)rank, (void)world;
  coll__t_abort(x->t[0]);
}

static void test_concurrent_aborts(void **state) {
  race_run_t x;
  char b[8];
  void *r0, *r1, *r;
  (void)state;
  make(2, x.t);
  assert_int_equal(coll__t_irecv(x.t[0], 1, 1, b, 8, &r0), COLL_OK);
  assert_int_equal(coll__t_isend(x.t[1], 0, 2, "z", 2, &r1), COLL_OK);
  test_run_ranks(TT_MAX_RANKS, race_rank, &x, TT_RUN_MS, "concurrent aborts");
  expect_fail(x.t[0], r0, COLL_ERR_ABORTED, "aborted");
  expect_fail(x.t[1], r1, COLL_ERR_ABORTED, "rank 0 aborted");
  assert_int_equal(coll__t_isend(x.t[0], 1, 0, NULL, 0, &r), COLL_ERR_ABORTED);
  tt_destroy_all(x.t, 2);
}

/* Abort while a large copy runs. Rank 1 posts its receive first, so rank
 * 0's send copies straight into it, inside isend, with the receive BUSY;
 * rank 2 waits until it sees that state and aborts one side then. What
 * the transport promises (inproc_match.c, inproc_close.c): an abort that
 * starts before a matched copy completed fails the aborted side's request
 * ABORTED, the other side's one completes, and abort returns only once the
 * copy finished. So the aborting thread owns the buffers again and writes
 * (receiver) or frees (sender) them: a copy still running then is a race
 * ThreadSanitizer reports, or a use-after-free AddressSanitizer reports.
 * Rank 1 waits on its receive only after the abort: its wait takes its
 * endpoint's lock, which the receiver's abort needs too, and a waiter
 * preempted while holding it would delay the abort past the copy. An abort
 * can still come too late when its own thread is preempted for the whole
 * copy, so each side need see ABORTED in only one of its runs; an abort
 * that never changes the outcome fails the test. */
typedef struct copy_run {
  coll_transport_t *t[2];
  tt_result_t res[3];
  unsigned char *sbuf, *rbuf;
  int sbuf_freed; /* written by the aborting thread, read after the join */
  int abort_rank;
  _Atomic(void *) rreq; /* rank 1's receive, once posted */
  int saw_busy;         /* rank 2 saw the copy running when it aborted */
  atomic_int aborted;   /* rank 2's abort returned */
  coll_status_t got[2];
} copy_run_t;

/* Rank 1's posted receive, or NULL after TT_WAIT_MS. */
static void *copy_wait_posted(copy_run_t *x) {
  int64_t until = test_now_ms() + TT_WAIT_MS;
  void *r;
  while ((r = atomic_load(&x->rreq)) == NULL && test_now_ms() < until)
    coll__cpu_relax();
  return r;
}

static void copy_rank(int rank, int world, void *arg) {
  copy_run_t *x = arg;
  void *r;
  int64_t until;
  (void)world;
  if (rank == 1) {
    x->got[1] = coll__t_irecv(x->t[1], 0, 1, x->rbuf, COPY_BIG, &r);
    if (x->got[1] != COLL_OK) {
      tt_fail(&x->res[1], "irecv: %s", coll_last_error());
      return;
    }
    atomic_store(&x->rreq, r);
    until = test_now_ms() + TT_WAIT_MS;
    while (!atomic_load(&x->aborted) && test_now_ms() < until) test_sleep_ms(1);
    x->got[1] = tt_wait(x->t[1], r, TT_WAIT_MS, NULL);
  } else if (rank == 0) {
    if (copy_wait_posted(x) == NULL) {
      tt_fail(&x->res[0], "rank 1 posted no receive in %d ms", TT_WAIT_MS);
      return;
    }
    x->got[0] = coll__t_isend(x->t[0], 1, 1, x->sbuf, COPY_BIG, &r);
    if (x->got[0] == COLL_OK) x->got[0] = tt_wait(x->t[0], r, TT_WAIT_MS, NULL);
  } else {
    inproc_req_t *rr = copy_wait_posted(x);
    if (rr == NULL) {
      tt_fail(&x->res[2], "rank 1 posted no receive in %d ms", TT_WAIT_MS);
    } else {
      /* Until the send matched it: BUSY while the data moves, DONE (or
       * FREE, once rank 1 waited) if the copy won the race. */
      until = test_now_ms() + TT_WAIT_MS;
      while (inproc_state(rr) == INPROC_QUEUED && test_now_ms() < until)
        coll__cpu_relax();
      x->saw_busy = inproc_state(rr) == INPROC_BUSY;
      if (inproc_state(rr) == INPROC_QUEUED)
        tt_fail(&x->res[2], "the send did not match in %d ms", TT_WAIT_MS);
    }
    coll__t_abort(x->t[x->abort_rank]);
    atomic_store(&x->aborted, 1);
    if (x->abort_rank == 0) {
      free(x->sbuf);
      x->sbuf_freed = 1;
    } else {
      memset(x->rbuf, 0, COPY_BIG);
    }
  }
}

/* One run of the race, rank `a` aborted; fails the test on a broken
 * promise. Returns 1 if the abort failed rank a's request, and sets *busy
 * when rank 2 saw the copy running. */
static int copy_race(int run, int a, int *busy) {
  copy_run_t x;
  int other = 1 - a, hit;
  memset(&x, 0, sizeof x);
  atomic_init(&x.rreq, NULL);
  atomic_init(&x.aborted, 0);
  x.sbuf = malloc(COPY_BIG);
  x.rbuf = malloc(COPY_BIG);
  assert_non_null(x.sbuf);
  assert_non_null(x.rbuf);
  memset(x.sbuf, 7, COPY_BIG);
  memset(x.rbuf, 0, COPY_BIG);
  x.abort_rank = a;
  make(2, x.t);
  /* Rank 2 only aborts; world says 3 threads, transports have 2. */
  test_run_ranks(3, copy_rank, &x, TT_RUN_MS, "abort during a copy");
  TT_ASSERT_RANKS_OK(x.res, 3);
  /* The aborted side fails, unless its copy finished first; the other
   * side's request had matched before the abort, and completes. */
  if (x.got[a] != COLL_ERR_ABORTED && x.got[a] != COLL_OK)
    fail_msg("run %d: rank %d (aborted) got %s", run, a,
             coll_status_name(x.got[a]));
  if (x.got[other] != COLL_OK)
    fail_msg("run %d: rank %d (not aborted) got %s", run, other,
             coll_status_name(x.got[other]));
  /* Abort waits for a copy; it never leaves half of one behind. */
  if (a == 0) {
    unsigned char want[256];
    size_t off;
    memset(want, 7, sizeof want);
    for (off = 0; off < COPY_BIG; off += sizeof want)
      if (memcmp(x.rbuf + off, want, sizeof want) != 0)
        fail_msg("run %d: the receiver's data differs near byte %zu", run, off);
  }
  hit = x.got[a] == COLL_ERR_ABORTED;
  *busy = x.saw_busy;
  tt_destroy_all(x.t, 2);
  if (!x.sbuf_freed) free(x.sbuf);
  free(x.rbuf);
  return hit;
}

static void test_abort_during_copy(void **state) {
  int a, busy, runs, seen, aborted;
  (void)state;
  for (a = 0; a < 2; a++) {
    /* Until rank 2 caught the copy running a few times: on a busy machine
     * it may be off the CPU while the data moves. */
    runs = seen = aborted = 0;
    while (runs < COPY_MAX_RUNS && seen < COPY_SEEN_RUNS) {
      aborted += copy_race(runs++, a, &busy);
      seen += busy;
    }
    printf(
        "abort during a copy: %s aborted: ABORTED in %d of %d runs, "
        "copy seen running in %d\n",
        a == 0 ? "sender" : "receiver", aborted, runs, seen);
    /* An abort that never lands while the data moves tests nothing. */
    if (aborted == 0)
      fail_msg(
          "the %s's abort never failed its request in %d runs: every "
          "abort came after the copy",
          a == 0 ? "sender" : "receiver", runs);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_abort_fails_everything),
      cmocka_unit_test(test_peer_timeout_ends_requests),
      cmocka_unit_test(test_peer_destroyed),
      cmocka_unit_test(test_abort_wakes_blocked_wait),
      cmocka_unit_test(test_destroy_wakes_blocked_peer),
      cmocka_unit_test(test_concurrent_aborts),
      cmocka_unit_test(test_abort_during_copy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
