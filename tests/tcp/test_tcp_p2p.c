/* SPDX-License-Identifier: Apache-2.0 */
/* test_tcp_p2p.c: the TCP transport moving data between real processes over
 * 127.0.0.1 and ::1: every pair at several sizes, FIFO per tag, early and
 * posted receives, too-long messages, multi-frame messages, sends to self,
 * a wait that times out and is waited again, and two threads posting and
 * waiting on one endpoint at once. */
#include <pthread.h>
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
#define BIG ((size_t)8 << 20)

static coll_status_t wait_len(coll_transport_t *t, coll_treq_t r, size_t *len) {
  return coll__t_wait(t, r, coll__deadline(WAIT_MS), len);
}

static uint8_t *xmalloc(size_t n) {
  uint8_t *p = malloc(n ? n : 1);
  if (p == NULL) {
    fprintf(stderr, "out of memory\n");
    exit(3);
  }
  return p;
}

/* ---- every pair ---------------------------------------------------------- */

static const size_t small_sizes[] = {0, 1, 4096};
#define NSMALL 3

/* All small messages to and from every peer at once, then BIG in shifted
 * rounds (to rank+d, from rank-d) so memory stays bounded. */
static int rank_pairs(tt_job_t *job, int rank, int world, void *arg) {
  coll_transport_t *t;
  coll_treq_t rr[NSMALL][TT_MAX_RANKS], sr[NSMALL][TT_MAX_RANKS];
  uint8_t *rb[NSMALL][TT_MAX_RANKS], *sb[NSMALL][TT_MAX_RANKS];
  uint8_t *big_s, *big_r;
  int k, p, d;
  size_t len;
  (void)arg;
  TRY(tt_create(job, rank, world, &t), "create");
  for (k = 0; k < NSMALL; k++)
    for (p = 0; p < world; p++) {
      if (p == rank) continue;
      rb[k][p] = xmalloc(small_sizes[k]);
      TRY(coll__t_irecv(t, p, (uint32_t)k, rb[k][p], small_sizes[k], &rr[k][p]),
          "irecv");
    }
  for (k = 0; k < NSMALL; k++)
    for (p = 0; p < world; p++) {
      if (p == rank) continue;
      sb[k][p] = xmalloc(small_sizes[k]);
      tt_fill(sb[k][p], small_sizes[k], rank, p, k);
      TRY(coll__t_isend(t, p, (uint32_t)k, sb[k][p], small_sizes[k], &sr[k][p]),
          "isend");
    }
  for (k = 0; k < NSMALL; k++)
    for (p = 0; p < world; p++) {
      if (p == rank) continue;
      TRY(wait_len(t, sr[k][p], NULL), "wait send");
      TRY(wait_len(t, rr[k][p], &len), "wait recv");
      if (len != small_sizes[k] || !tt_check(rb[k][p], len, p, rank, k)) {
        fprintf(stderr, "rank %d: bad %zu-byte message from %d (%zu)\n", rank,
                small_sizes[k], p, len);
        return 2;
      }
      free(rb[k][p]);
      free(sb[k][p]);
    }
  big_s = xmalloc(BIG);
  big_r = xmalloc(BIG);
  for (d = 1; d < world; d++) {
    int to = (rank + d) % world, from = (rank - d + world) % world;
    coll_treq_t a, b;
    tt_fill(big_s, BIG, rank, to, 100 + d);
    TRY(coll__t_irecv(t, from, 100, big_r, BIG, &a), "irecv big");
    TRY(coll__t_isend(t, to, 100, big_s, BIG, &b), "isend big");
    TRY(wait_len(t, b, NULL), "wait big send");
    TRY(wait_len(t, a, &len), "wait big recv");
    if (len != BIG || !tt_check(big_r, BIG, from, rank, 100 + d)) {
      fprintf(stderr, "rank %d: bad big message from %d\n", rank, from);
      return 2;
    }
  }
  free(big_s);
  free(big_r);
  coll_transport_destroy(t);
  return 0;
}

static void run_pairs(int world, const char *ip, const char *token,
                      size_t frame_cap) {
  tt_job_t job;
  char msg[256];
  assert_int_equal(tt_job_init(&job, ip, token), 0);
  if (frame_cap) job.x.frame_cap = frame_cap;
  if (tt_run(&job, world, rank_pairs, NULL, JOB_MS, msg, sizeof msg) != 0)
    fail_msg("pairs world %d on %s: %s", world, ip, msg);
  tt_job_fini(&job);
}

static void test_pairs_world2(void **state) {
  (void)state;
  run_pairs(2, "127.0.0.1", NULL, 0);
}
static void test_pairs_world3(void **state) {
  (void)state;
  run_pairs(3, "127.0.0.1", "s3cret", 0);
}
static void test_pairs_world4(void **state) {
  (void)state;
  run_pairs(4, "127.0.0.1", NULL, 0);
}
static void test_pairs_world8(void **state) {
  (void)state;
  run_pairs(8, "127.0.0.1", "s3cret", 0);
}
static void test_pairs_ipv6(void **state) {
  (void)state;
  if (!tt_have_ipv6()) skip();
  run_pairs(3, "::1", "s3cret", 0);
}
/* BIG crosses 128 frames of 64 KiB; 4096-byte messages are one frame. */
static void test_pairs_multiframe(void **state) {
  (void)state;
  run_pairs(3, "127.0.0.1", NULL, 64 * 1024);
}

/* ---- FIFO per tag, early and posted ------------------------------------- */

#define NFIFO 60
#define FIFO_CAP 100000

static size_t fifo_len(int i) {
  return i % 10 == 0 ? FIFO_CAP : 8 + (size_t)(i * 37) % 5000;
}

/* Rank 0 sends NFIFO messages cycling over tags 0, 1, 2; rank 1 posts the
 * tag-2 receives first (before anything is sent), the others only after
 * the messages have arrived, and checks each tag's order. */
static int rank_fifo(tt_job_t *job, int rank, int world, void *arg) {
  coll_transport_t *t;
  coll_treq_t req[NFIFO], go;
  uint8_t *buf[NFIFO], token = 1;
  int i, g;
  size_t len;
  (void)arg;
  TRY(tt_create(job, rank, world, &t), "create");
  if (rank == 0) {
    TRY(coll__t_recv(t, 1, 99, &token, 1, coll__deadline(WAIT_MS)), "go");
    for (i = 0; i < NFIFO; i++) {
      buf[i] = xmalloc(fifo_len(i));
      tt_fill(buf[i], fifo_len(i), 0, 1, i);
      TRY(coll__t_isend(t, 1, (uint32_t)(i % 3), buf[i], fifo_len(i), &req[i]),
          "isend");
    }
    for (i = 0; i < NFIFO; i++) {
      TRY(wait_len(t, req[i], NULL), "wait send");
      free(buf[i]);
    }
  } else {
    int order[NFIFO], n = 0;
    for (g = 2; g >= 0; g--) /* tag 2 posted early, then 1, then 0 */
      for (i = g; i < NFIFO; i += 3) order[n++] = i;
    for (i = 0; i < NFIFO; i++) buf[i] = xmalloc(FIFO_CAP);
    for (i = 0; i < NFIFO / 3; i++)
      TRY(coll__t_irecv(t, 0, 2, buf[order[i]], FIFO_CAP, &req[order[i]]),
          "irecv");
    TRY(coll__t_isend(t, 0, 99, &token, 1, &go), "go");
    TRY(wait_len(t, go, NULL), "go");
    tt_sleep_ms(100);
    for (i = NFIFO / 3; i < NFIFO; i++)
      TRY(coll__t_irecv(t, 0, (uint32_t)(order[i] % 3), buf[order[i]], FIFO_CAP,
                        &req[order[i]]),
          "irecv");
    for (i = 0; i < NFIFO; i++) {
      TRY(wait_len(t, req[i], &len), "wait recv");
      /* The k-th receive of tag g must hold message g + 3k. */
      if (len != fifo_len(i) || !tt_check(buf[i], len, 0, 1, i)) {
        fprintf(stderr, "rank 1: receive %d got the wrong message\n", i);
        return 2;
      }
      free(buf[i]);
    }
  }
  coll_transport_destroy(t);
  return 0;
}

static void test_fifo_interleaved_tags(void **state) {
  tt_job_t job;
  char msg[256];
  (void)state;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  if (tt_run(&job, 2, rank_fifo, NULL, JOB_MS, msg, sizeof msg) != 0)
    fail_msg("fifo: %s", msg);
  tt_job_fini(&job);
}

/* ---- early messages of every size, and one adopted while arriving -------- */

static const size_t early_sizes[] = {4096, BIG, 0, 64 << 20};
#define NEARLY 4

static int rank_early(tt_job_t *job, int rank, int world, void *arg) {
  coll_transport_t *t;
  coll_treq_t req[NEARLY], mark;
  uint8_t *buf[NEARLY], one = 1;
  size_t len;
  int i;
  (void)arg;
  TRY(tt_create(job, rank, world, &t), "create");
  for (i = 0; i < NEARLY; i++) buf[i] = xmalloc(early_sizes[i]);
  if (rank == 0) {
    for (i = 0; i < NEARLY; i++) {
      tt_fill(buf[i], early_sizes[i], 0, 1, i);
      if (i == 3) /* announce the last one right before sending it */
        TRY(coll__t_send(t, 1, 98, &one, 1, coll__deadline(WAIT_MS)), "mark");
      TRY(coll__t_isend(t, 1, (uint32_t)i, buf[i], early_sizes[i], &req[i]),
          "isend");
    }
    for (i = 0; i < NEARLY; i++) TRY(wait_len(t, req[i], NULL), "wait send");
  } else {
    /* Posted before anything arrives. */
    TRY(coll__t_irecv(t, 0, 0, buf[0], early_sizes[0], &req[0]), "irecv 0");
    TRY(coll__t_irecv(t, 0, 98, &one, 1, &mark), "irecv mark");
    TRY(wait_len(t, mark, NULL), "mark");
    /* The big one is likely still arriving: its receive adopts it. */
    TRY(coll__t_irecv(t, 0, 3, buf[3], early_sizes[3], &req[3]), "irecv 3");
    tt_sleep_ms(200);
    /* These arrived long ago and wait in early buffers. */
    TRY(coll__t_irecv(t, 0, 2, buf[2], early_sizes[2], &req[2]), "irecv 2");
    TRY(coll__t_irecv(t, 0, 1, buf[1], early_sizes[1], &req[1]), "irecv 1");
    for (i = 0; i < NEARLY; i++) {
      TRY(wait_len(t, req[i], &len), "wait recv");
      if (len != early_sizes[i] || !tt_check(buf[i], len, 0, 1, i)) {
        fprintf(stderr, "rank 1: message %d corrupt (%zu bytes)\n", i, len);
        return 2;
      }
    }
  }
  for (i = 0; i < NEARLY; i++) free(buf[i]);
  coll_transport_destroy(t);
  return 0;
}

static void test_early_and_posted(void **state) {
  tt_job_t job;
  char msg[256];
  (void)state;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  if (tt_run(&job, 2, rank_early, NULL, JOB_MS, msg, sizeof msg) != 0)
    fail_msg("early: %s", msg);
  tt_job_fini(&job);
}

/* ---- too-long messages ----------------------------------------------------
 */

#define GUARD 0xEE

/* Receives a too-long message into cap bytes of a guarded buffer and checks
 * the status, the reported length, and that nothing past cap was written. */
static int expect_mismatch(tt_job_t *job, coll_transport_t *t, coll_treq_t r,
                           uint8_t *buf, size_t cap, size_t sent) {
  size_t len = 0, i;
  coll_status_t s = wait_len(t, r, &len);
  if (s != COLL_ERR_LENGTH_MISMATCH || len != sent) {
    fprintf(stderr, "rank 1: want LENGTH_MISMATCH/%zu, got %s/%zu: %s\n", sent,
            coll_status_name(s), len, coll_last_error());
    return 2;
  }
  if (strstr(coll_last_error(), "rank 0") == NULL) {
    fprintf(stderr, "rank 1: text does not name rank 0: %s\n",
            coll_last_error());
    return 2;
  }
  for (i = cap; i < cap + 4096; i++)
    if (buf[i] != GUARD) {
      fprintf(stderr, "rank 1: byte %zu past the %zu-byte receive written\n", i,
              cap);
      return 2;
    }
  (void)job;
  return 0;
}

static const size_t mm_sent[] = {1000, 1000, 300000, 5000};
static const size_t mm_cap[] = {100, 10, 100000, 5000};

/* Message 0 has its receive posted, message 1 arrives early, message 2
 * spans several frames and overflows in its second; message 3 fits and
 * proves the stream is still in step. */
static int rank_mismatch(tt_job_t *job, int rank, int world, void *arg) {
  coll_transport_t *t;
  coll_treq_t req[4];
  uint8_t *buf[4];
  size_t len;
  int i, rc;
  (void)arg;
  TRY(tt_create(job, rank, world, &t), "create");
  for (i = 0; i < 4; i++) {
    buf[i] = xmalloc(mm_sent[i] + 4096);
    memset(buf[i], GUARD, mm_sent[i] + 4096);
  }
  if (rank == 0) {
    for (i = 0; i < 4; i++) {
      tt_fill(buf[i], mm_sent[i], 0, 1, i);
      TRY(coll__t_isend(t, 1, (uint32_t)i, buf[i], mm_sent[i], &req[i]),
          "isend");
    }
    for (i = 0; i < 4; i++) TRY(wait_len(t, req[i], NULL), "wait send");
  } else {
    TRY(coll__t_irecv(t, 0, 0, buf[0], mm_cap[0], &req[0]), "irecv");
    tt_sleep_ms(100);
    for (i = 1; i < 4; i++)
      TRY(coll__t_irecv(t, 0, (uint32_t)i, buf[i], mm_cap[i], &req[i]),
          "irecv");
    for (i = 0; i < 3; i++)
      if ((rc = expect_mismatch(job, t, req[i], buf[i], mm_cap[i],
                                mm_sent[i])) != 0)
        return rc;
    TRY(wait_len(t, req[3], &len), "wait last");
    if (len != mm_sent[3] || !tt_check(buf[3], len, 0, 1, 3)) return 2;
  }
  for (i = 0; i < 4; i++) free(buf[i]);
  coll_transport_destroy(t);
  return 0;
}

static void test_length_mismatch(void **state) {
  tt_job_t job;
  char msg[256];
  (void)state;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  job.x.frame_cap = 64 * 1024;
  if (tt_run(&job, 2, rank_mismatch, NULL, JOB_MS, msg, sizeof msg) != 0)
    fail_msg("mismatch: %s", msg);
  tt_job_fini(&job);
}

/* ---- sends to self, and a timed-out wait waited again ---------------------
 */

static int rank_self_and_retry(tt_job_t *job, int rank, int world, void *arg) {
  coll_transport_t *t;
  coll_treq_t a, b;
  uint8_t s1[300], r1[300], small[10];
  size_t len;
  coll_status_t s;
  (void)arg;
  TRY(tt_create(job, rank, world, &t), "create");
  tt_fill(s1, sizeof s1, rank, rank, 1);
  /* Early to self, then posted to self, then too long for the receive. */
  TRY(coll__t_isend(t, rank, 5, s1, sizeof s1, &a), "isend self");
  TRY(wait_len(t, a, NULL), "wait self send");
  TRY(coll__t_irecv(t, rank, 5, r1, sizeof r1, &b), "irecv self");
  TRY(wait_len(t, b, &len), "wait self recv");
  if (len != sizeof s1 || !tt_check(r1, len, rank, rank, 1)) return 2;
  memset(r1, 0, sizeof r1);
  TRY(coll__t_irecv(t, rank, 6, r1, sizeof r1, &b), "irecv self");
  TRY(coll__t_isend(t, rank, 6, s1, sizeof s1, &a), "isend self");
  TRY(wait_len(t, a, NULL), "wait self send");
  TRY(wait_len(t, b, &len), "wait self recv");
  if (len != sizeof s1 || !tt_check(r1, len, rank, rank, 1)) return 2;
  TRY(coll__t_isend(t, rank, 7, s1, sizeof s1, &a), "isend self");
  TRY(wait_len(t, a, NULL), "wait self send");
  TRY(coll__t_irecv(t, rank, 7, small, sizeof small, &b), "irecv self");
  s = wait_len(t, b, &len);
  if (s != COLL_ERR_LENGTH_MISMATCH || len != sizeof s1) return 3;
  /* Rank 1's receive times out twice, stays pending, then completes once
   * rank 0 is told to send. */
  if (rank == 1) {
    TRY(coll__t_irecv(t, 0, 9, r1, sizeof r1, &b), "irecv");
    s = coll__t_wait_for(t, b, 50, &len);
    if (s != COLL_ERR_TIMEOUT) return 4;
    s = coll__t_wait_for(t, b, 0, &len);
    if (s != COLL_ERR_TIMEOUT) return 5;
    TRY(coll__t_send(t, 0, 8, s1, 1, coll__deadline(WAIT_MS)), "go");
    TRY(wait_len(t, b, &len), "wait after timeout");
    if (len != sizeof s1 || !tt_check(r1, len, 0, 1, 9)) return 6;
  } else {
    TRY(coll__t_recv(t, 1, 8, r1, 1, coll__deadline(WAIT_MS)), "go");
    tt_fill(s1, sizeof s1, 0, 1, 9);
    TRY(coll__t_send(t, 1, 9, s1, sizeof s1, coll__deadline(WAIT_MS)), "send");
  }
  coll_transport_destroy(t);
  return 0;
}

static void test_self_and_timeout_retry(void **state) {
  tt_job_t job;
  char msg[256];
  (void)state;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  if (tt_run(&job, 2, rank_self_and_retry, NULL, JOB_MS, msg, sizeof msg) != 0)
    fail_msg("self/retry: %s", msg);
  tt_job_fini(&job);
}

/* ---- two threads on one endpoint ------------------------------------------
 * A CPU comm posts and waits from two threads at once: its worker runs a
 * collective while the user's thread runs point-to-point. Each thread here
 * runs its own ping-pong on its own tag, with the two waits overlapping, so
 * completions by the loop thread must wake the right waiter. */

#define PP_ROUNDS 400

typedef struct pp_arg {
  tt_job_t *job;
  coll_transport_t *t;
  int rank;
  uint32_t tag;
  size_t bytes;
  int rc;
} pp_arg_t;

static void *pingpong(void *p) {
  pp_arg_t *a = p;
  uint8_t *sb = xmalloc(a->bytes), *rb = xmalloc(a->bytes);
  int peer = 1 - a->rank, i;
  size_t len;
  for (i = 0; i < PP_ROUNDS && a->rc == 0; i++) {
    coll_treq_t r, s;
    coll_status_t st;
    tt_fill(sb, a->bytes, a->rank, peer, i);
    st = coll__t_irecv(a->t, peer, a->tag, rb, a->bytes, &r);
    if (st == COLL_OK && a->rank == 1) st = wait_len(a->t, r, &len);
    if (st == COLL_OK) st = coll__t_isend(a->t, peer, a->tag, sb, a->bytes, &s);
    if (st == COLL_OK) st = wait_len(a->t, s, NULL);
    if (st == COLL_OK && a->rank == 0) st = wait_len(a->t, r, &len);
    if (st != COLL_OK) {
      a->rc = tt_failed(a->job, a->rank, "ping-pong", st);
    } else if (len != a->bytes || !tt_check(rb, len, peer, a->rank, i)) {
      fprintf(stderr, "rank %d tag %u round %d: bad message\n", a->rank, a->tag,
              i);
      a->rc = 2;
    }
  }
  free(sb);
  free(rb);
  return NULL;
}

static int rank_two_threads(tt_job_t *job, int rank, int world, void *arg) {
  coll_transport_t *t;
  pp_arg_t a = {job, NULL, rank, 1, 64 * 1024, 0};
  pp_arg_t b = {job, NULL, rank, 2, 100, 0};
  pthread_t th;
  (void)arg;
  TRY(tt_create(job, rank, world, &t), "create");
  a.t = b.t = t;
  if (pthread_create(&th, NULL, pingpong, &b) != 0) return 3;
  pingpong(&a);
  pthread_join(th, NULL);
  coll_transport_destroy(t);
  return a.rc != 0 ? a.rc : b.rc;
}

static void test_two_threads(void **state) {
  tt_job_t job;
  char msg[256];
  (void)state;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  /* A wait that sleeps forever would hang: the job's bound is short. */
  if (tt_run(&job, 2, rank_two_threads, NULL, 60000, msg, sizeof msg) != 0)
    fail_msg("two threads: %s", msg);
  tt_job_fini(&job);
}

/* A job of one rank needs no sockets. */
static void test_world1(void **state) {
  tt_job_t job;
  coll_transport_t *t = NULL;
  coll_treq_t a, b;
  int x = 42, y = 0;
  (void)state;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  assert_int_equal(tt_create(&job, 0, 1, &t), COLL_OK);
  assert_int_equal(coll__t_isend(t, 0, 1, &x, sizeof x, &a), COLL_OK);
  assert_int_equal(coll__t_irecv(t, 0, 1, &y, sizeof y, &b), COLL_OK);
  assert_int_equal(coll__t_wait(t, a, -1, NULL), COLL_OK);
  assert_int_equal(coll__t_wait(t, b, -1, NULL), COLL_OK);
  assert_int_equal(y, 42);
  assert_int_equal(coll__t_isend(t, 1, 1, &x, sizeof x, &a),
                   COLL_ERR_INVALID_ARG);
  coll_transport_destroy(t);
  tt_job_fini(&job);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_world1),
      cmocka_unit_test(test_pairs_world2),
      cmocka_unit_test(test_pairs_world3),
      cmocka_unit_test(test_pairs_world4),
      cmocka_unit_test(test_pairs_world8),
      cmocka_unit_test(test_pairs_ipv6),
      cmocka_unit_test(test_pairs_multiframe),
      cmocka_unit_test(test_fifo_interleaved_tags),
      cmocka_unit_test(test_early_and_posted),
      cmocka_unit_test(test_length_mismatch),
      cmocka_unit_test(test_self_and_timeout_retry),
      cmocka_unit_test(test_two_threads),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]); /* e.g. "*kill*" */
  return cmocka_run_group_tests(tests, NULL, NULL);
}
