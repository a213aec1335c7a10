/* SPDX-License-Identifier: Apache-2.0 */
/* test_inproc_match.c: the in-process transport's matching by (source, tag)
 * in order, lengths, timeouts and argument checks. isend/irecv never block,
 * so most cases drive every endpoint from the test thread. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "transport/endpoint.h"
#include "transport_test.h"

/* A size above the transport's inline-copy threshold, so the copy runs with
 * no lock held. */
#define BIG (1u << 20)

static void make(int n, coll_transport_t **t) {
  assert_int_equal(coll_inproc_create(n, t), COLL_OK);
}

static void test_create_args(void **state) {
  coll_transport_t *t[3] = {NULL, NULL, NULL};
  (void)state;
  assert_int_equal(coll_inproc_create(0, t), COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "out of range"));
  assert_int_equal(coll_inproc_create(-2, t), COLL_ERR_INVALID_ARG);
  assert_int_equal(coll_inproc_create(4097, t), COLL_ERR_INVALID_ARG);
  assert_int_equal(coll_inproc_create(1 << 20, t), COLL_ERR_INVALID_ARG);
  assert_int_equal(coll_inproc_create(2, NULL), COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "NULL"));
  make(3, t);
  assert_string_equal(t[0]->p.name, "inproc");
  assert_null(t[1]->p.barrier);
  assert_int_equal(coll_transport_rank(t[2]), 2);
  assert_int_equal(coll_transport_size(t[2]), 3);
  tt_destroy_all(t, 3);
}

static void test_bad_args(void **state) {
  coll_transport_t *t[2];
  char buf[4];
  void *r;
  (void)state;
  make(2, t);
  assert_int_equal(coll__t_isend(t[0], -1, 0, buf, 4, &r),
                   COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "out of range"));
  assert_int_equal(coll__t_isend(t[0], 2, 0, buf, 4, &r), COLL_ERR_INVALID_ARG);
  assert_int_equal(coll__t_irecv(t[0], 2, 0, buf, 4, &r), COLL_ERR_INVALID_ARG);
  assert_int_equal(coll__t_isend(t[0], 1, 0, NULL, 4, &r),
                   COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "NULL"));
  assert_int_equal(coll__t_irecv(t[1], 0, 0, NULL, 4, &r),
                   COLL_ERR_INVALID_ARG);
  assert_int_equal(coll__t_isend(t[0], 1, 0, buf, 4, NULL),
                   COLL_ERR_INVALID_ARG);
  assert_int_equal(coll__t_irecv(t[1], 0, 0, buf, 4, NULL),
                   COLL_ERR_INVALID_ARG);
  assert_int_equal(tt_wait(t[0], NULL, 0, NULL), COLL_ERR_INVALID_ARG);
  /* A request waited twice is refused, not waited on. */
  assert_int_equal(coll__t_irecv(t[1], 0, 3, buf, 4, &r), COLL_OK);
  assert_int_equal(tt_send(t[0], 1, 3, "abc", 4), COLL_OK);
  assert_int_equal(tt_wait(t[1], r, 0, NULL), COLL_OK);
  assert_int_equal(tt_wait(t[1], r, 0, NULL), COLL_ERR_INVALID_ARG);
  /* A request of another endpoint is refused. */
  assert_int_equal(coll__t_irecv(t[1], 0, 3, buf, 4, &r), COLL_OK);
  assert_int_equal(tt_wait(t[0], r, 0, NULL), COLL_ERR_INVALID_ARG);
  assert_int_equal(tt_send(t[0], 1, 3, "xyz", 4), COLL_OK);
  assert_int_equal(tt_wait(t[1], r, 0, NULL), COLL_OK);
  tt_destroy_all(t, 2);
}

/* n messages 0 -> 1 on one tag, sizes i*13 (+ BIG for odd i when big). */
static size_t msg_len(int i, int big) {
  return (size_t)i * 13 + (big && (i & 1) ? BIG : 0);
}

static void fifo_case(int sends_first, int big) {
  enum { N = 6 };
  coll_transport_t *t[2];
  void *sr[N], *rr[N];
  char *buf[N], *src[N];
  size_t cap = (size_t)N * 13 + (big ? BIG : 0);
  int i;
  make(2, t);
  for (i = 0; i < N; i++) {
    buf[i] = malloc(cap);
    src[i] = malloc(msg_len(i, big) + 1);
    assert_non_null(buf[i]);
    assert_non_null(src[i]);
    tt_fill(src[i], msg_len(i, big), (uint64_t)i);
  }
  for (i = 0; i < N && sends_first; i++)
    assert_int_equal(coll__t_isend(t[0], 1, 7, src[i], msg_len(i, big), &sr[i]),
                     COLL_OK);
  if (sends_first) /* No receive yet: the zero-copy send stays pending. */
    assert_int_equal(tt_wait(t[0], sr[0], 0, NULL), COLL_ERR_TIMEOUT);
  for (i = 0; i < N; i++)
    assert_int_equal(coll__t_irecv(t[1], 0, 7, buf[i], cap, &rr[i]), COLL_OK);
  for (i = 0; i < N && !sends_first; i++)
    assert_int_equal(coll__t_isend(t[0], 1, 7, src[i], msg_len(i, big), &sr[i]),
                     COLL_OK);
  for (i = 0; i < N; i++) {
    size_t len = 12345;
    assert_int_equal(tt_wait(t[0], sr[i], 0, NULL), COLL_OK);
    assert_int_equal(tt_wait(t[1], rr[i], 0, &len), COLL_OK);
    assert_int_equal(len, msg_len(i, big));
    assert_true(tt_check(buf[i], len, (uint64_t)i));
  }
  for (i = 0; i < N; i++) {
    free(buf[i]);
    free(src[i]);
  }
  tt_destroy_all(t, 2);
}

static void test_fifo_sends_first(void **state) {
  (void)state;
  fifo_case(1, 0);
  fifo_case(1, 1);
}

static void test_fifo_recvs_first(void **state) {
  (void)state;
  fifo_case(0, 0);
  fifo_case(0, 1);
}

static void test_interleaved_tags(void **state) {
  coll_transport_t *t[3];
  char got[4][8];
  void *r[4], *s[4];
  int i;
  (void)state;
  make(3, t);
  /* Sends first: tags A and B interleaved, received B first. */
  assert_int_equal(coll__t_isend(t[0], 1, 0xA, "a1", 3, &s[0]), COLL_OK);
  assert_int_equal(coll__t_isend(t[0], 1, 0xB, "b1", 3, &s[1]), COLL_OK);
  assert_int_equal(coll__t_isend(t[0], 1, 0xA, "a2", 3, &s[2]), COLL_OK);
  assert_int_equal(coll__t_isend(t[0], 1, 0xB, "b2", 3, &s[3]), COLL_OK);
  assert_int_equal(coll__t_irecv(t[1], 0, 0xB, got[0], 8, &r[0]), COLL_OK);
  assert_int_equal(coll__t_irecv(t[1], 0, 0xB, got[1], 8, &r[1]), COLL_OK);
  assert_int_equal(coll__t_irecv(t[1], 0, 0xA, got[2], 8, &r[2]), COLL_OK);
  assert_int_equal(coll__t_irecv(t[1], 0, 0xA, got[3], 8, &r[3]), COLL_OK);
  for (i = 0; i < 4; i++) {
    assert_int_equal(tt_wait(t[1], r[i], 0, NULL), COLL_OK);
    assert_int_equal(tt_wait(t[0], s[i], 0, NULL), COLL_OK);
  }
  assert_string_equal(got[0], "b1");
  assert_string_equal(got[1], "b2");
  assert_string_equal(got[2], "a1");
  assert_string_equal(got[3], "a2");

  /* Two sources on one tag: the source picks the message. */
  assert_int_equal(coll__t_isend(t[0], 1, 5, "from0", 6, &s[0]), COLL_OK);
  assert_int_equal(coll__t_isend(t[2], 1, 5, "from2", 6, &s[1]), COLL_OK);
  assert_int_equal(tt_recv(t[1], 2, 5, got[0], 8, NULL), COLL_OK);
  assert_int_equal(tt_recv(t[1], 0, 5, got[1], 8, NULL), COLL_OK);
  assert_string_equal(got[0], "from2");
  assert_string_equal(got[1], "from0");
  assert_int_equal(tt_wait(t[0], s[0], 0, NULL), COLL_OK);
  assert_int_equal(tt_wait(t[2], s[1], 0, NULL), COLL_OK);

  /* Mixed paths keep order: one receive posted, then three sends (the
   * first copied straight in, the others queued), then two receives. */
  assert_int_equal(coll__t_irecv(t[1], 0, 9, got[0], 8, &r[0]), COLL_OK);
  assert_int_equal(coll__t_isend(t[0], 1, 9, "m1", 3, &s[0]), COLL_OK);
  assert_int_equal(coll__t_isend(t[0], 1, 9, "m2", 3, &s[1]), COLL_OK);
  assert_int_equal(coll__t_isend(t[0], 1, 9, "m3", 3, &s[2]), COLL_OK);
  assert_int_equal(tt_wait(t[0], s[0], 0, NULL), COLL_OK);
  assert_int_equal(tt_wait(t[0], s[1], 0, NULL), COLL_ERR_TIMEOUT);
  assert_int_equal(coll__t_irecv(t[1], 0, 9, got[1], 8, &r[1]), COLL_OK);
  assert_int_equal(coll__t_irecv(t[1], 0, 9, got[2], 8, &r[2]), COLL_OK);
  for (i = 0; i < 3; i++)
    assert_int_equal(tt_wait(t[1], r[i], 0, NULL), COLL_OK);
  assert_int_equal(tt_wait(t[0], s[1], 0, NULL), COLL_OK);
  assert_int_equal(tt_wait(t[0], s[2], 0, NULL), COLL_OK);
  assert_string_equal(got[0], "m1");
  assert_string_equal(got[1], "m2");
  assert_string_equal(got[2], "m3");
  tt_destroy_all(t, 3);
}

/* A message longer than the buffer: LENGTH_MISMATCH, *len = sent length,
 * nothing written (the guard bytes after cap stay too). */
static void mismatch_case(size_t sent, size_t cap, int recv_first) {
  coll_transport_t *t[2];
  unsigned char *src = malloc(sent), *dst = malloc(cap + 64);
  void *sr, *rr;
  size_t len = 0;
  make(2, t);
  tt_fill(src, sent, 42);
  memset(dst, 0xAB, cap + 64);
  if (recv_first)
    assert_int_equal(coll__t_irecv(t[1], 0, 1, dst, cap, &rr), COLL_OK);
  assert_int_equal(coll__t_isend(t[0], 1, 1, src, sent, &sr), COLL_OK);
  if (!recv_first)
    assert_int_equal(coll__t_irecv(t[1], 0, 1, dst, cap, &rr), COLL_OK);
  assert_int_equal(tt_wait(t[1], rr, 0, &len), COLL_ERR_LENGTH_MISMATCH);
  assert_int_equal(len, sent);
  assert_non_null(strstr(coll_last_error(), "longer"));
  assert_true(tt_all(dst, cap + 64, 0xAB));
  assert_int_equal(tt_wait(t[0], sr, 0, NULL), COLL_OK);
  /* The message was consumed: the pair goes on with the next one. */
  assert_int_equal(coll__t_isend(t[0], 1, 1, src, cap, &sr), COLL_OK);
  assert_int_equal(tt_recv(t[1], 0, 1, dst, cap, &len), COLL_OK);
  assert_int_equal(len, cap);
  assert_true(tt_check(dst, cap, 42));
  assert_int_equal(tt_wait(t[0], sr, 0, NULL), COLL_OK);
  free(src);
  free(dst);
  tt_destroy_all(t, 2);
}

static void test_length_mismatch(void **state) {
  (void)state;
  mismatch_case(32, 16, 0);
  mismatch_case(32, 16, 1);
  mismatch_case(BIG + 1, BIG, 0);
  mismatch_case(BIG + 1, BIG, 1);
  mismatch_case(1, 0, 1);
}

static void test_shorter_message(void **state) {
  coll_transport_t *t[2];
  unsigned char src[10], dst[64];
  size_t len = 0;
  void *sr;
  (void)state;
  make(2, t);
  tt_fill(src, sizeof src, 7);
  memset(dst, 0xCD, sizeof dst);
  assert_int_equal(coll__t_isend(t[0], 1, 2, src, sizeof src, &sr), COLL_OK);
  assert_int_equal(tt_recv(t[1], 0, 2, dst, sizeof dst, &len), COLL_OK);
  assert_int_equal(len, sizeof src);
  assert_true(tt_check(dst, sizeof src, 7));
  assert_true(tt_all(dst + sizeof src, sizeof dst - sizeof src, 0xCD));
  assert_int_equal(tt_wait(t[0], sr, 0, NULL), COLL_OK);
  tt_destroy_all(t, 2);
}

static void test_zero_length(void **state) {
  coll_transport_t *t[2];
  char dst[8] = "unset";
  size_t len = 99;
  void *sr, *rr;
  (void)state;
  make(2, t);
  assert_int_equal(coll__t_isend(t[0], 1, 4, NULL, 0, &sr), COLL_OK);
  assert_int_equal(tt_recv(t[1], 0, 4, NULL, 0, &len), COLL_OK);
  assert_int_equal(len, 0);
  assert_int_equal(tt_wait(t[0], sr, 0, NULL), COLL_OK);
  assert_int_equal(coll__t_irecv(t[1], 0, 4, dst, sizeof dst, &rr), COLL_OK);
  assert_int_equal(tt_send(t[0], 1, 4, NULL, 0), COLL_OK);
  len = 99;
  assert_int_equal(tt_wait(t[1], rr, 0, &len), COLL_OK);
  assert_int_equal(len, 0);
  assert_string_equal(dst, "unset");
  tt_destroy_all(t, 2);
}

static void test_self_send(void **state) {
  coll_transport_t *t[1];
  char dst[8];
  void *sr;
  (void)state;
  make(1, t);
  assert_int_equal(coll__t_isend(t[0], 0, 1, "self", 5, &sr), COLL_OK);
  assert_int_equal(tt_recv(t[0], 0, 1, dst, sizeof dst, NULL), COLL_OK);
  assert_int_equal(tt_wait(t[0], sr, 0, NULL), COLL_OK);
  assert_string_equal(dst, "self");
  assert_int_equal(coll__t_barrier(t[0], COLL_TAG_RESERVED, -1), COLL_OK);
  tt_destroy_all(t, 1);
}

/* The test thread alone: a timed-out receive stays pending and completes
 * once the message comes. */
static void test_timeout_single_thread(void **state) {
  coll_transport_t *t[2];
  char dst[8];
  size_t len = 0;
  void *rr;
  (void)state;
  make(2, t);
  assert_int_equal(coll__t_irecv(t[1], 0, 6, dst, sizeof dst, &rr), COLL_OK);
  assert_int_equal(tt_wait(t[1], rr, 0, &len), COLL_ERR_TIMEOUT);
  assert_int_equal(tt_wait(t[1], rr, 5, &len), COLL_ERR_TIMEOUT);
  assert_true(strlen(coll_last_error()) > 0);
  assert_int_equal(tt_send(t[0], 1, 6, "late", 5), COLL_OK);
  assert_int_equal(tt_wait(t[1], rr, -1, &len), COLL_OK);
  assert_int_equal(len, 5);
  assert_string_equal(dst, "late");
  tt_destroy_all(t, 2);
}

/* Two threads: rank 0 times out waiting, then lets rank 1 send, and the
 * same request completes (a sleeping waiter is woken by the copy). */
typedef struct timeout_run {
  coll_transport_t *t[2];
  tt_result_t res[2];
  atomic_int go;
  coll_status_t first, second;
} timeout_run_t;

static void timeout_rank(int rank, int world, void *arg) {
  timeout_run_t *x = arg;
  unsigned char *big = malloc(BIG);
  void *r;
  size_t len = 0;
  int64_t until;
  (void)world;
  if (big == NULL) {
    tt_fail(&x->res[rank], "out of memory");
    return;
  }
  if (rank == 0) {
    if (coll__t_irecv(x->t[0], 1, 3, big, BIG, &r) != COLL_OK) {
      tt_fail(&x->res[0], "irecv: %s", coll_last_error());
    } else {
      x->first = tt_wait(x->t[0], r, 20, &len);
      atomic_store(&x->go, 1);
      x->second = tt_wait(x->t[0], r, TT_WAIT_MS, &len);
      if (x->second == COLL_OK && (len != BIG || !tt_check(big, BIG, 3)))
        tt_fail(&x->res[0], "wrong data: %zu bytes", len);
    }
  } else {
    until = test_now_ms() + TT_WAIT_MS;
    while (!atomic_load(&x->go) && test_now_ms() < until) test_sleep_ms(1);
    test_sleep_ms(10); /* let rank 0 fall asleep in its wait */
    tt_fill(big, BIG, 3);
    if (tt_send(x->t[1], 0, 3, big, BIG) != COLL_OK)
      tt_fail(&x->res[1], "send: %s", coll_last_error());
  }
  free(big);
}

static void test_timeout_then_complete(void **state) {
  timeout_run_t x;
  (void)state;
  memset(&x, 0, sizeof x);
  atomic_init(&x.go, 0);
  make(2, x.t);
  test_run_ranks(2, timeout_rank, &x, TT_RUN_MS, "timeout then complete");
  TT_ASSERT_RANKS_OK(x.res, 2);
  assert_int_equal(x.first, COLL_ERR_TIMEOUT);
  assert_int_equal(x.second, COLL_OK);
  tt_destroy_all(x.t, 2);
}

/* A queued send completes only once the receiver copies it: the sender
 * sleeps in wait until then. */
typedef struct late_run {
  coll_transport_t *t[2];
  tt_result_t res[2];
} late_run_t;

static void late_rank(int rank, int world, void *arg) {
  late_run_t *x = arg;
  unsigned char *big = malloc(BIG);
  size_t len = 0;
  coll_status_t s;
  (void)world;
  if (big == NULL) {
    tt_fail(&x->res[rank], "out of memory");
    return;
  }
  if (rank == 0) {
    tt_fill(big, BIG, 11);
    s = tt_send(x->t[0], 1, 8, big, BIG);
  } else {
    test_sleep_ms(20);
    s = tt_recv(x->t[1], 0, 8, big, BIG, &len);
    if (s == COLL_OK && (len != BIG || !tt_check(big, BIG, 11)))
      tt_fail(&x->res[1], "wrong data");
  }
  if (s != COLL_OK)
    tt_fail(&x->res[rank], "%s: %s", coll_status_name(s), coll_last_error());
  free(big);
}

static void test_send_waits_for_receive(void **state) {
  late_run_t x;
  (void)state;
  memset(&x, 0, sizeof x);
  make(2, x.t);
  test_run_ranks(2, late_rank, &x, TT_RUN_MS, "late receive");
  TT_ASSERT_RANKS_OK(x.res, 2);
  tt_destroy_all(x.t, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_create_args),
      cmocka_unit_test(test_bad_args),
      cmocka_unit_test(test_fifo_sends_first),
      cmocka_unit_test(test_fifo_recvs_first),
      cmocka_unit_test(test_interleaved_tags),
      cmocka_unit_test(test_length_mismatch),
      cmocka_unit_test(test_shorter_message),
      cmocka_unit_test(test_zero_length),
      cmocka_unit_test(test_self_send),
      cmocka_unit_test(test_timeout_single_thread),
      cmocka_unit_test(test_timeout_then_complete),
      cmocka_unit_test(test_send_waits_for_receive),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
