/* SPDX-License-Identifier: Apache-2.0 */
/* test_tcp_fail.c: the TCP transport when things go wrong: a rank killed
 * mid-transfer, a stopped rank, foreign clients on the listening port, a
 * peer that breaks the protocol, abort from another thread, a rank that
 * leaves early, refused handshakes and a mesh that never completes. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/clock.h"
#include "tcp_test_util.h"

#define JOB_MS 60000

/* Waits (bounded by ms) and records what came back for the parent. */
static coll_status_t wait_note(tt_job_t *job, int rank, coll_transport_t *t,
                               coll_treq_t r, int64_t ms) {
  size_t len;
  coll_status_t s = coll__t_wait_for(t, r, ms, &len);
  tt_note(job, rank, s, s == COLL_OK ? "" : coll_last_error());
  return s;
}

/* After a failure the request may still be pending: abort and reap it. */
static void reap(coll_transport_t *t, coll_treq_t r) {
  size_t len;
  coll__t_abort(t);
  (void)coll__t_wait_for(t, r, -1, &len);
}

static void expect_note(tt_job_t *job, int rank, coll_status_t s,
                        const char *needle) {
  if (job->sh->status[rank] != (int)s ||
      strstr(job->sh->text[rank], needle) == NULL)
    fail_msg("rank %d: want %s mentioning '%s', got %s: '%s'", rank,
             coll_status_name(s), needle,
             coll_status_name((coll_status_t)job->sh->status[rank]),
             job->sh->text[rank]);
}

/* ---- kill -9 in the middle of a long transfer -----------------------------
 */

#define KILL_WORLD 4
#define KILL_VICTIM 3
#define CHUNK ((size_t)1 << 20)

/* The victim streams to rank 2 forever; rank 2 receives; ranks 0 and 1 wait
 * on each other for a message that never comes, and rank 1 also holds a
 * big message from the victim it never asked for (left in the kernel). All
 * of them must learn of the victim's death from their own connection. */
static int rank_kill(tt_job_t *job, int rank, int world, void *arg) {
  coll_transport_t *t;
  coll_treq_t r;
  uint8_t *buf = malloc(CHUNK);
  coll_status_t s;
  int k;
  (void)arg;
  if (buf == NULL) return 3;
  TRY(tt_create(job, rank, world, &t), "create");
  if (rank == KILL_VICTIM) {
    memset(buf, 7, CHUNK);
    TRY(coll__t_isend(t, 1, 9, buf, CHUNK, &r), "unasked");
    atomic_store(&job->sh->ready[rank], 1);
    for (;;) TRY(coll__t_send(t, 2, 1, buf, CHUNK, -1), "stream");
  }
  atomic_store(&job->sh->ready[rank], 1);
  if (rank == 2) {
    do {
      s = coll__t_irecv(t, KILL_VICTIM, 1, buf, CHUNK, &r);
      if (s != COLL_OK) { /* the loss may come between two receives */
        tt_note(job, rank, s, coll_last_error());
        break;
      }
      s = wait_note(job, rank, t, r, 10000);
    } while (s == COLL_OK);
  } else {
    TRY(coll__t_irecv(t, 1 - rank, 1, buf, CHUNK, &r), "irecv");
    s = wait_note(job, rank, t, r, 10000);
  }
  if (s == COLL_ERR_TIMEOUT) reap(t, r);
  /* Leave only once every survivor has seen the loss: a survivor that
   * leaves early is itself a (clean) departure the others would see. */
  atomic_store(&job->sh->ready[8 + rank], 1);
  for (k = 0; k < KILL_VICTIM; k++)
    while (!atomic_load(&job->sh->ready[8 + k])) tt_sleep_ms(1);
  coll_transport_destroy(t);
  free(buf);
  return 0;
}

static void test_kill9_mid_transfer(void **state) {
  tt_job_t job;
  pid_t pids[KILL_WORLD];
  int codes[KILL_WORLD], r;
  char msg[256];
  (void)state;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  tt_spawn(&job, KILL_WORLD, rank_kill, NULL, pids);
  if (tt_wait_ready(&job, KILL_WORLD, 30000) != 0) {
    tt_wait(pids, KILL_WORLD, 0, codes, msg, sizeof msg);
    fail_msg("kill9: ranks never got ready");
  }
  tt_sleep_ms(100); /* well into the stream */
  kill(pids[KILL_VICTIM], SIGKILL);
  if (tt_wait(pids, KILL_WORLD, 20000, codes, msg, sizeof msg) < 0)
    fail_msg("kill9: %s", msg);
  for (r = 0; r < KILL_WORLD; r++) {
    if (r == KILL_VICTIM) continue;
    assert_int_equal(codes[r], 0);
    expect_note(&job, r, COLL_ERR_PEER_LOST, "rank 3 lost");
  }
  tt_job_fini(&job);
}

/* ---- SIGSTOP: the others time out, never hang -----------------------------
 */

#define STOP_BYTES ((size_t)64 << 20)

static int rank_stop(tt_job_t *job, int rank, int world, void *arg) {
  coll_transport_t *t;
  coll_treq_t r;
  uint8_t *buf = calloc(1, STOP_BYTES);
  coll_status_t s;
  (void)arg;
  if (buf == NULL) return 3;
  TRY(tt_create(job, rank, world, &t), "create");
  atomic_store(&job->sh->ready[rank], 1);
  if (rank == 2) { /* the one to be stopped; killed by the parent */
    for (;;) tt_sleep_ms(1000);
  }
  while (!atomic_load(&job->sh->go)) tt_sleep_ms(1);
  if (rank == 0)
    TRY(coll__t_isend(t, 2, 1, buf, STOP_BYTES, &r), "isend");
  else
    TRY(coll__t_irecv(t, 2, 1, buf, 16, &r), "irecv");
  s = wait_note(job, rank, t, r, 300);
  /* Still pending: a second wait times out again. */
  if (s == COLL_ERR_TIMEOUT) s = coll__t_wait_for(t, r, 50, &(size_t){0});
  if (s != COLL_ERR_TIMEOUT) return 4;
  /* Abort only once both timed out: an abort closes this rank's sockets,
   * and the other would rightly see it lost. */
  atomic_store(&job->sh->ready[4 + rank], 1);
  while (!atomic_load(&job->sh->ready[4]) || !atomic_load(&job->sh->ready[5]))
    tt_sleep_ms(1);
  coll__t_abort(t);
  /* The other rank's abort may be seen before ours: an abort either way. */
  s = coll__t_wait_for(t, r, 5000, &(size_t){0});
  if (s != COLL_ERR_ABORTED) return 5;
  coll_transport_destroy(t);
  free(buf);
  return 0;
}

static void test_sigstop_times_out(void **state) {
  tt_job_t job;
  pid_t pids[3];
  int codes[3];
  char msg[256];
  (void)state;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  tt_spawn(&job, 3, rank_stop, NULL, pids);
  if (tt_wait_ready(&job, 3, 30000) != 0) {
    tt_wait(pids, 3, 0, codes, msg, sizeof msg);
    fail_msg("sigstop: ranks never got ready");
  }
  kill(pids[2], SIGSTOP);
  atomic_store(&job.sh->go, 1);
  if (tt_wait(pids, 2, 20000, codes, msg, sizeof msg) < 0) {
    kill(pids[2], SIGKILL);
    fail_msg("sigstop: %s", msg);
  }
  kill(pids[2], SIGCONT);
  kill(pids[2], SIGKILL);
  tt_wait(pids + 2, 1, 10000, codes + 2, msg, sizeof msg);
  assert_int_equal(codes[0], 0);
  assert_int_equal(codes[1], 0);
  expect_note(&job, 0, COLL_ERR_TIMEOUT, "rank 2");
  expect_note(&job, 1, COLL_ERR_TIMEOUT, "rank 2");
  tt_job_fini(&job);
}

/* ---- a stopped rank found by heartbeat, after early messages -------------
 */

/* Rank 1 sends three small messages and stops itself. Rank 0 receives the
 * third, which reads the first two in as early messages; then two receives
 * posted at once (the second on a request never used before) match them
 * and complete on the spot; then a receive that nothing will complete must
 * end with rank 1 unresponsive, found by heartbeat. A request that was
 * never counted as pending must not be uncounted when it completes: the
 * count would drop to zero under the last receive, and rank 0 would wait
 * for the 5 s timeout instead. (Under ASan and with MALLOC_PERTURB_, a
 * fresh request starts with garbage, as it may in any build.) */
static int rank_early_then_stop(tt_job_t *job, int rank, int world, void *arg) {
  coll_transport_t *t;
  coll_treq_t a, b;
  char buf[8] = "early";
  uint32_t tag;
  (void)arg;
  TRY(tt_create(job, rank, world, &t), "create");
  if (rank == 1) {
    for (tag = 1; tag <= 3; tag++)
      TRY(coll__t_send(t, 0, tag, buf, sizeof buf, coll__deadline(10000)),
          "send");
    raise(SIGSTOP); /* the parent kills it once rank 0 is done */
  } else {
    TRY(coll__t_irecv(t, 1, 3, buf, sizeof buf, &a), "irecv 3");
    TRY(coll__t_wait(t, a, coll__deadline(10000), NULL), "wait 3");
    TRY(coll__t_irecv(t, 1, 1, buf, sizeof buf, &a), "irecv 1");
    TRY(coll__t_irecv(t, 1, 2, buf, sizeof buf, &b), "irecv 2");
    TRY(coll__t_wait(t, a, coll__deadline(10000), NULL), "wait 1");
    TRY(coll__t_wait(t, b, coll__deadline(10000), NULL), "wait 2");
    TRY(coll__t_irecv(t, 1, 4, buf, sizeof buf, &a), "irecv 4");
    if (wait_note(job, rank, t, a, 5000) == COLL_ERR_TIMEOUT) reap(t, a);
  }
  coll_transport_destroy(t);
  return 0;
}

static void test_heartbeat_after_early_messages(void **state) {
  tt_job_t job;
  pid_t pids[2];
  int codes[2];
  char msg[256];
  (void)state;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  setenv("COLL_HEARTBEAT_TIMEOUT_MS", "300", 1);
  tt_spawn(&job, 2, rank_early_then_stop, NULL, pids);
  unsetenv("COLL_HEARTBEAT_TIMEOUT_MS");
  if (tt_wait(pids, 1, 20000, codes, msg, sizeof msg) < 0) {
    kill(pids[1], SIGKILL);
    fail_msg("early then stop: %s", msg);
  }
  kill(pids[1], SIGCONT);
  kill(pids[1], SIGKILL);
  tt_wait(pids + 1, 1, 10000, codes + 1, msg, sizeof msg);
  assert_int_equal(codes[0], 0);
  expect_note(&job, 0, COLL_ERR_PEER_LOST, "rank 1 unresponsive");
  tt_job_fini(&job);
}

/* ---- abort from another thread --------------------------------------------
 */

static void abort_later(void *arg) {
  tt_sleep_ms(200);
  coll__t_abort(arg);
}

/* Rank 0 blocks in a wait that nothing will complete; another thread
 * aborts. Rank 1 then hears rank 0's goodbye: rank 0 aborted, not lost. */
static int rank_abort(tt_job_t *job, int rank, int world, void *arg) {
  coll_transport_t *t;
  coll_treq_t r;
  uv_thread_t th;
  char buf[8];
  coll_status_t s;
  (void)arg;
  TRY(tt_create(job, rank, world, &t), "create");
  TRY(coll__t_irecv(t, 1 - rank, 1, buf, sizeof buf, &r), "irecv");
  if (rank == 0 && uv_thread_create(&th, abort_later, t) != 0) return 3;
  s = wait_note(job, rank, t, r, 10000);
  if (rank == 0) {
    uv_thread_join(&th);
    /* Later work fails at once. */
    if (coll__t_isend(t, 1, 2, buf, 1, &r) != COLL_ERR_ABORTED) return 4;
  } else if (s == COLL_ERR_TIMEOUT) {
    reap(t, r);
  }
  coll_transport_destroy(t);
  return 0;
}

static void test_abort_wakes_wait(void **state) {
  tt_job_t job;
  char msg[256];
  (void)state;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  if (tt_run(&job, 2, rank_abort, NULL, JOB_MS, msg, sizeof msg) != 0)
    fail_msg("abort: %s", msg);
  expect_note(&job, 0, COLL_ERR_ABORTED, "abort");
  expect_note(&job, 1, COLL_ERR_ABORTED, "rank 0 aborted, seen by rank 1");
  tt_job_fini(&job);
}

/* ---- a rank that finishes first and leaves --------------------------------
 */

#define LEAVE_BYTES ((size_t)4 << 20)

/* Rank 0 sends rank 1 one message and destroys its transport at once. Rank
 * 1 still receives that message afterwards, a new receive from rank 0
 * fails naming it, and ranks 1 and 2 keep exchanging unharmed. */
static int rank_leave(tt_job_t *job, int rank, int world, void *arg) {
  coll_transport_t *t;
  coll_treq_t a, b;
  uint8_t *s = malloc(LEAVE_BYTES), *r = malloc(LEAVE_BYTES);
  size_t len;
  coll_status_t st;
  int other = 3 - rank;
  (void)arg;
  if (s == NULL || r == NULL) return 3;
  TRY(tt_create(job, rank, world, &t), "create");
  if (rank == 0) {
    /* A small message (kept early by rank 1) and a big one (left in the
     * kernel until rank 1's goodbye handling reads it). */
    tt_fill(s, 1000, 0, 1, 7);
    TRY(coll__t_send(t, 1, 7, s, 1000, coll__deadline(10000)), "send");
    tt_fill(s, LEAVE_BYTES, 0, 1, 9);
    TRY(coll__t_send(t, 1, 9, s, LEAVE_BYTES, coll__deadline(10000)), "send");
  } else {
    tt_sleep_ms(300); /* rank 0's goodbye has surely arrived */
    tt_fill(s, LEAVE_BYTES, rank, other, 1);
    TRY(coll__t_irecv(t, other, 1, r, LEAVE_BYTES, &a), "irecv");
    TRY(coll__t_isend(t, other, 1, s, LEAVE_BYTES, &b), "isend");
    TRY(coll__t_wait(t, b, coll__deadline(10000), NULL), "wait send");
    TRY(coll__t_wait(t, a, coll__deadline(10000), &len), "wait recv");
    if (len != LEAVE_BYTES || !tt_check(r, len, other, rank, 1)) return 2;
    if (rank == 1) {
      TRY(coll__t_irecv(t, 0, 7, r, 1000, &a), "irecv early");
      TRY(coll__t_wait(t, a, coll__deadline(10000), &len), "wait early");
      if (len != 1000 || !tt_check(r, len, 0, 1, 7)) return 2;
      TRY(coll__t_irecv(t, 0, 9, r, LEAVE_BYTES, &a), "irecv big early");
      TRY(coll__t_wait(t, a, coll__deadline(10000), &len), "wait big early");
      if (len != LEAVE_BYTES || !tt_check(r, len, 0, 1, 9)) return 2;
      st = coll__t_irecv(t, 0, 8, r, 1000, &a);
      if (st == COLL_OK) st = wait_note(job, rank, t, a, 5000);
      tt_note(job, rank, st, coll_last_error());
      if (st == COLL_ERR_TIMEOUT) reap(t, a);
    }
  }
  coll_transport_destroy(t);
  free(s);
  free(r);
  return 0;
}

static void test_goodbye_fails_only_that_peer(void **state) {
  tt_job_t job;
  char msg[256];
  (void)state;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  if (tt_run(&job, 3, rank_leave, NULL, JOB_MS, msg, sizeof msg) != 0)
    fail_msg("leave: %s", msg);
  expect_note(&job, 1, COLL_ERR_PEER_LOST, "rank 0 left");
  tt_job_fini(&job);
}

/* ---- refused handshakes, a mesh that never completes ----------------------
 */

static int rank_wrong_token(tt_job_t *job, int rank, int world, void *arg) {
  coll_transport_t *t = NULL;
  coll_status_t s;
  (void)arg;
  job->timeout_ms = 2000;
  if (rank == 1) job->token = "wrong";
  s = tt_create(job, rank, world, &t);
  tt_note(job, rank, s, coll_last_error());
  if (s == COLL_OK) coll_transport_destroy(t);
  return 0;
}

static void test_wrong_token_refused(void **state) {
  tt_job_t job;
  char msg[256];
  (void)state;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", "right"), 0);
  if (tt_run(&job, 2, rank_wrong_token, NULL, JOB_MS, msg, sizeof msg) != 0)
    fail_msg("token: %s", msg);
  expect_note(&job, 1, COLL_ERR_PROTOCOL, "token");
  expect_note(&job, 0, COLL_ERR_TIMEOUT, "1");
  tt_job_fini(&job);
}

static void test_mesh_timeout_names_missing(void **state) {
  tt_job_t job;
  coll_transport_t *t = NULL;
  (void)state;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  job.timeout_ms = 300;
  assert_int_equal(tt_create(&job, 0, 3, &t), COLL_ERR_TIMEOUT);
  assert_null(t);
  assert_non_null(strstr(coll_last_error(), "1, 2"));
  tt_job_fini(&job);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kill9_mid_transfer),
      cmocka_unit_test(test_sigstop_times_out),
      cmocka_unit_test(test_heartbeat_after_early_messages),
      cmocka_unit_test(test_abort_wakes_wait),
      cmocka_unit_test(test_goodbye_fails_only_that_peer),
      cmocka_unit_test(test_wrong_token_refused),
      cmocka_unit_test(test_mesh_timeout_names_missing),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]); /* e.g. "*kill*" */
  return cmocka_run_group_tests(tests, NULL, NULL);
}
