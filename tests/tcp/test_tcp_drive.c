/* SPDX-License-Identifier: Apache-2.0 */
/* test_tcp_drive.c: the caller's wait drives every connection with pending
 * work, in both directions, and sleeps over all of them: a wait on one
 * receive while the caller's own large sends to the same and to other
 * peers still have bytes to move, an abort from another thread while the
 * caller sleeps over several sockets, and a send nobody waits on, which
 * the loop thread finishes, and a send posted by another thread while a
 * caller sleeps. Ranks are processes over 127.0.0.1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/clock.h"
#include "tcp_test_util.h"

#define WAIT_MS 30000
#define JOB_MS 120000
/* Several times the socket buffers (4 MiB each way): a send of it is far
 * from done when its first bytes are taken. */
#define BIG ((size_t)24 << 20)

static uint8_t *xmalloc(size_t n) {
  uint8_t *p = malloc(n ? n : 1);
  if (p == NULL) {
    fprintf(stderr, "out of memory\n");
    exit(3);
  }
  return p;
}

static coll_status_t wait_len(coll_transport_t *t, coll_treq_t r, size_t *len) {
  return coll__t_wait(t, r, coll__deadline(WAIT_MS), len);
}

/* ---- a receive waited while the caller's own sends still move ------------
 */

/* Every rank sends BIG to every peer and receives BIG from each, and waits
 * first on the receive from its right neighbour alone: no peer's receive
 * completes unless the waiting ranks also move their sends (to that same
 * peer and to the others) from inside that wait, or something does. */
static int rank_all_to_all(tt_job_t *job, int rank, int world, void *arg) {
  coll_transport_t *t;
  coll_treq_t rr[TT_MAX_RANKS], sr[TT_MAX_RANKS];
  uint8_t *sb[TT_MAX_RANKS], *rb[TT_MAX_RANKS];
  int p, d;
  size_t len;
  (void)arg;
  TRY(tt_create(job, rank, world, &t), "create");
  for (p = 0; p < world; p++) {
    if (p == rank) continue;
    rb[p] = xmalloc(BIG);
    memset(rb[p], 0, BIG);
    TRY(coll__t_irecv(t, p, 7, rb[p], BIG, &rr[p]), "irecv");
  }
  for (p = 0; p < world; p++) {
    if (p == rank) continue;
    sb[p] = xmalloc(BIG);
    tt_fill(sb[p], BIG, rank, p, 7);
    TRY(coll__t_isend(t, p, 7, sb[p], BIG, &sr[p]), "isend");
  }
  for (d = 1; d < world; d++) {
    p = (rank + d) % world;
    TRY(wait_len(t, rr[p], &len), "wait recv");
    if (len != BIG || !tt_check(rb[p], len, p, rank, 7)) {
      fprintf(stderr, "rank %d: bad message from %d (%zu bytes)\n", rank, p,
              len);
      return 2;
    }
  }
  for (p = 0; p < world; p++) {
    if (p == rank) continue;
    TRY(wait_len(t, sr[p], &len), "wait send");
    if (len != BIG) return 2;
    free(sb[p]);
    free(rb[p]);
  }
  coll_transport_destroy(t);
  return 0;
}

static void run_all_to_all(int world) {
  tt_job_t job;
  char msg[256];
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  if (tt_run(&job, world, rank_all_to_all, NULL, JOB_MS, msg, sizeof msg) != 0)
    fail_msg("all to all, world %d: %s", world, msg);
  tt_job_fini(&job);
}

/* Both directions on one socket. */
static void test_recv_with_own_send_same_peer(void **state) {
  (void)state;
  run_all_to_all(2);
}

/* The send to the peer waited on, and one to a peer not waited on. */
static void test_recv_with_own_sends_other_peers(void **state) {
  (void)state;
  run_all_to_all(3);
}

/* ---- abort while asleep over several sockets ------------------------------
 */

static void abort_later(void *arg) {
  tt_sleep_ms(200);
  coll__t_abort(arg);
}

/* Rank 0 waits on a receive nobody sends, with receives posted on both
 * connections and a big send to each that nobody receives (its sleep
 * covers every socket, for reading and writing); another thread aborts.
 * The wait returns ABORTED, not TIMEOUT (after its 30 s), every other
 * request of rank 0 ends ABORTED, and both peers hear of it. */
static int rank_abort(tt_job_t *job, int rank, int world, void *arg) {
  coll_transport_t *t;
  coll_treq_t r[2], s[2], w;
  uint8_t *big = xmalloc(BIG), small[8];
  uv_thread_t th;
  coll_status_t st;
  size_t len;
  int p;
  (void)arg;
  TRY(tt_create(job, rank, world, &t), "create");
  if (rank != 0) {
    /* From the other peer, which never sends it: rank 0's abort ends the
     * wait. Nothing is posted on the connection to rank 0, so its big send
     * stays in the kernels, pending. */
    TRY(coll__t_irecv(t, 3 - rank, 9, small, sizeof small, &w), "irecv");
    st = coll__t_wait(t, w, coll__deadline(WAIT_MS), &len);
    tt_note(job, rank, st, coll_last_error());
    if (st == COLL_ERR_TIMEOUT)
      (void)coll__t_abort_reap(t, w, COLL_ERR_TIMEOUT);
    coll_transport_destroy(t);
    free(big);
    return 0;
  }
  memset(big, 1, BIG);
  for (p = 1; p <= 2; p++) {
    TRY(coll__t_irecv(t, p, 5, small, sizeof small, &r[p - 1]), "irecv");
    TRY(coll__t_isend(t, p, 6, big, BIG, &s[p - 1]), "isend");
  }
  if (uv_thread_create(&th, abort_later, t) != 0) return 3;
  st = coll__t_wait(t, r[1], coll__deadline(WAIT_MS), &len);
  tt_note(job, rank, st, coll_last_error());
  uv_thread_join(&th);
  if (st == COLL_ERR_TIMEOUT)
    (void)coll__t_abort_reap(t, r[1], COLL_ERR_TIMEOUT);
  /* Everything else ended with the abort too. */
  for (p = 0; p < 2; p++) {
    if (coll__t_wait(t, s[p], coll__deadline(WAIT_MS), &len) !=
        COLL_ERR_ABORTED)
      return 4;
    if (p == 0 && coll__t_wait(t, r[0], coll__deadline(WAIT_MS), &len) !=
                      COLL_ERR_ABORTED)
      return 4;
  }
  coll_transport_destroy(t);
  free(big);
  return 0;
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

static void test_abort_wakes_wait_over_several_sockets(void **state) {
  tt_job_t job;
  char msg[256];
  int i;
  (void)state;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  if (tt_run(&job, 3, rank_abort, NULL, JOB_MS, msg, sizeof msg) != 0)
    fail_msg("abort: %s", msg);
  expect_note(&job, 0, COLL_ERR_ABORTED, "abort");
  /* The rest of rank 0's big sends stands between the peers and its
   * goodbye, and nobody reads it: they may see the connection reset
   * instead. Either way the failure is rank 0's. */
  for (i = 1; i < 3; i++)
    if (job.sh->status[i] == (int)COLL_ERR_PEER_LOST)
      expect_note(&job, i, COLL_ERR_PEER_LOST, "rank 0 lost");
    else
      expect_note(&job, i, COLL_ERR_ABORTED, "rank 0 aborted");
  tt_job_fini(&job);
}

/* ---- a send nobody waits on -----------------------------------------------
 */

/* Rank 0 posts BIG to rank 1 and waits only for a small message, which
 * comes at once; rank 1 receives BIG only later, so when rank 0's wait
 * ends most of BIG is still to go. Rank 0 then makes no call into the
 * transport until the send is done: the loop thread must move it. */
static int rank_unwaited(tt_job_t *job, int rank, int world, void *arg) {
  coll_transport_t *t;
  coll_treq_t s, r;
  uint8_t *big = xmalloc(BIG), small[8] = {0};
  size_t len;
  int64_t until;
  (void)arg;
  TRY(tt_create(job, rank, world, &t), "create");
  if (rank == 0) {
    tt_fill(big, BIG, 0, 1, 3);
    TRY(coll__t_isend(t, 1, 3, big, BIG, &s), "isend big");
    TRY(coll__t_irecv(t, 1, 1, small, sizeof small, &r), "irecv small");
    TRY(wait_len(t, r, &len), "wait small");
    until = tt_now_ms() + WAIT_MS;
    while (!atomic_load(&((tcp_req_t *)s)->done) && tt_now_ms() < until)
      tt_sleep_ms(5);
    if (!atomic_load(&((tcp_req_t *)s)->done)) {
      fprintf(stderr, "rank 0: the send nobody waits on never completed\n");
      (void)coll__t_abort_reap(t, s, COLL_ERR_TIMEOUT);
      return 2;
    }
    TRY(wait_len(t, s, &len), "wait big");
    /* Rank 1 says it got every byte. */
    TRY(coll__t_irecv(t, 1, 2, small, sizeof small, &r), "irecv ack");
    TRY(wait_len(t, r, &len), "wait ack");
    if (len != 1 || small[0] != 1) return 2;
  } else {
    small[0] = 1;
    TRY(coll__t_send(t, 0, 1, small, 1, coll__deadline(WAIT_MS)), "send");
    /* Rank 0's wait ended long before this; its send stalls meanwhile. */
    tt_sleep_ms(300);
    TRY(coll__t_irecv(t, 0, 3, big, BIG, &r), "irecv big");
    TRY(wait_len(t, r, &len), "wait big");
    if (len != BIG || !tt_check(big, BIG, 0, 1, 3)) {
      fprintf(stderr, "rank 1: bad big message (%zu bytes)\n", len);
      return 2;
    }
    TRY(coll__t_send(t, 0, 2, small, 1, coll__deadline(WAIT_MS)), "send ack");
  }
  coll_transport_destroy(t);
  free(big);
  return 0;
}

static void test_unwaited_send_completes(void **state) {
  tt_job_t job;
  char msg[256];
  (void)state;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  if (tt_run(&job, 2, rank_unwaited, NULL, JOB_MS, msg, sizeof msg) != 0)
    fail_msg("unwaited send: %s", msg);
  tt_job_fini(&job);
}

/* ---- a post from another thread while a caller sleeps --------------------
 */

typedef struct sleeper_arg {
  coll_transport_t *t;
  coll_status_t st;
  size_t len;
  uint8_t buf[8];
} sleeper_arg_t;

static void sleeper(void *p) {
  sleeper_arg_t *a = p;
  coll_treq_t r;
  a->st = coll__t_irecv(a->t, 1, 1, a->buf, sizeof a->buf, &r);
  if (a->st == COLL_OK) a->st = wait_len(a->t, r, &a->len);
  if (a->st == COLL_ERR_TIMEOUT) (void)coll__t_abort_reap(a->t, r, a->st);
}

/* On rank 0 one thread sleeps in a wait for a message rank 1 sends only
 * once it has all of BIG; then another thread posts BIG and does not wait
 * on it. The sleeper's set did not hold that send and the loop thread
 * keeps off while a caller drives (heartbeats are off, so nothing else
 * wakes it): unless the post wakes the sleeper, which then writes the
 * send too, both ranks wait until the sleeper's wait times out. */
static int rank_post_wakes(tt_job_t *job, int rank, int world, void *arg) {
  coll_transport_t *t;
  coll_treq_t r;
  uint8_t *big = xmalloc(BIG);
  size_t len;
  (void)arg;
  TRY(tt_create(job, rank, world, &t), "create");
  if (rank == 0) {
    sleeper_arg_t a;
    uv_thread_t th;
    memset(&a, 0, sizeof a);
    a.t = t;
    if (uv_thread_create(&th, sleeper, &a) != 0) return 3;
    tt_sleep_ms(200); /* the sleeper is in poll() by now */
    tt_fill(big, BIG, 0, 1, 2);
    TRY(coll__t_isend(t, 1, 2, big, BIG, &r), "isend big");
    uv_thread_join(&th);
    TRY(a.st, "sleeper's wait");
    if (a.len != 1 || a.buf[0] != 5) return 2;
    TRY(wait_len(t, r, &len), "wait big");
  } else {
    uint8_t ack = 5;
    TRY(coll__t_irecv(t, 0, 2, big, BIG, &r), "irecv big");
    TRY(wait_len(t, r, &len), "wait big");
    if (len != BIG || !tt_check(big, BIG, 0, 1, 2)) {
      fprintf(stderr, "rank 1: bad big message (%zu bytes)\n", len);
      return 2;
    }
    TRY(coll__t_send(t, 0, 1, &ack, 1, coll__deadline(WAIT_MS)), "send ack");
  }
  coll_transport_destroy(t);
  free(big);
  return 0;
}

static void test_post_wakes_sleeping_caller(void **state) {
  tt_job_t job;
  char msg[256];
  (void)state;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  job.x.hb_timeout_ms = 0;
  if (tt_run(&job, 2, rank_post_wakes, NULL, JOB_MS, msg, sizeof msg) != 0)
    fail_msg("post from another thread: %s", msg);
  tt_job_fini(&job);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_recv_with_own_send_same_peer),
      cmocka_unit_test(test_recv_with_own_sends_other_peers),
      cmocka_unit_test(test_abort_wakes_wait_over_several_sockets),
      cmocka_unit_test(test_unwaited_send_completes),
      cmocka_unit_test(test_post_wakes_sleeping_caller),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]); /* e.g. "*abort*" */
  return cmocka_run_group_tests(tests, NULL, NULL);
}
