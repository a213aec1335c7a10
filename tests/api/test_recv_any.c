/* SPDX-License-Identifier: Apache-2.0 */
/* test_recv_any.c: receives from any source, at 2 to 4 ranks over every
 * transport (threads over the in-process transport, processes over TCP
 * and shared memory): every message arrives once, with its sender named
 * and each sender's messages in order; when every sender's messages wait,
 * the senders take turns (threads, where a message waits as soon as it is
 * sent); receives on one tag match in the order they were issued, also
 * one from a named rank between two from any; a message longer than the
 * buffer is a mismatch naming its sender, and the comm keeps working.
 * Then, on threads: bad arguments, a comm of one rank, the timeout, an
 * abort, and a third party's transport (UNSUPPORTED). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "api_test.h"
#include "bad_input.h"
#include "mailbox.h"
#include "rank_procs.h"

#define COMM_TIMEOUT_MS 60000
#define RUN_BOUND_MS 120000
#define PER_SENDER 3
#define TAG_FAN 5
#define TAG_ORDER 6
#define TAG_LONG 7

typedef struct ra_out {
  int failed, checked;
  char msg[480];
} ra_out_t;

static void ra_fail(ra_out_t *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void ra_fail(ra_out_t *o, const char *fmt, ...) {
  va_list ap;
  if (o->failed) return;
  o->failed = 1;
  va_start(ap, fmt);
  vsnprintf(o->msg, sizeof o->msg, fmt, ap);
  va_end(ap);
}

static int ok(ra_out_t *o, coll_status_t s, const char *what, int rank) {
  o->checked++;
  if (s == COLL_OK) return 1;
  ra_fail(o, "%s on rank %d: %s: %s", what, rank, coll_status_name(s),
          coll_last_error());
  return 0;
}

/* Message i of `from` on `tag`: four words that say who sent which. */
static void message(int32_t *m, int from, int i, int tag) {
  m[0] = from;
  m[1] = i;
  m[2] = tag;
  m[3] = from * 1000 + i * 10 + tag;
}

/* Every other rank sends PER_SENDER messages to rank 0 before a barrier;
 * rank 0 then receives them all from any source. */
static void fan_in(coll_comm_t *c, int rank, int world, ra_out_t *o,
                   int strict_turns) {
  int32_t m[PER_SENDER][4], got[4];
  int next[8] = {0}, i, k, src, total = (world - 1) * PER_SENDER;
  coll_request_t *req[PER_SENDER];
  size_t n;
  if (rank != 0) {
    for (i = 0; i < PER_SENDER; i++) {
      message(m[i], rank, i, TAG_FAN);
      if (!ok(o, coll_isend(c, m[i], 4, COLL_I32, 0, TAG_FAN, &req[i]), "isend",
              rank))
        return;
    }
    if (!ok(o, coll_barrier(c), "barrier", rank)) return;
    for (i = 0; i < PER_SENDER; i++)
      (void)ok(o, coll_wait(req[i]), "wait", rank);
    return;
  }
  if (!ok(o, coll_barrier(c), "barrier", rank)) return;
  for (k = 0; k < total; k++) {
    int32_t want[4];
    src = -7;
    n = 0;
    memset(got, 0, sizeof got);
    if (!ok(o, coll_recv_any(c, got, 4, COLL_I32, TAG_FAN, &src, &n),
            "recv_any", rank))
      return;
    if (src < 1 || src >= world || n != 4) {
      ra_fail(o, "recv_any #%d: source %d, %zu elements", k, src, n);
      return;
    }
    message(want, src, next[src], TAG_FAN);
    if (memcmp(got, want, sizeof want) != 0) {
      ra_fail(o,
              "recv_any #%d from rank %d: message (%d, %d), not (%d, %d): "
              "a sender's messages out of order, or the wrong sender named",
              k, src, got[0], got[1], src, next[src]);
      return;
    }
    next[src]++;
    /* Every message waits already: the senders take turns. */
    if (strict_turns && src != 1 + k % (world - 1)) {
      ra_fail(o, "recv_any #%d took rank %d, not rank %d, whose turn it was", k,
              src, 1 + k % (world - 1));
      return;
    }
  }
  for (src = 1; src < world; src++)
    if (next[src] != PER_SENDER)
      ra_fail(o, "rank %d's messages: %d arrived, not %d", src, next[src],
              PER_SENDER);
}

/* Rank 0 issues recv_any (A), recv from rank 2 (B), recv_any (C) on one
 * tag before anything is sent; then rank 2 sends two messages, and once A
 * and B ended, rank 1 one. The receives take rank 2's messages in the
 * order they were issued: A the first, though B names rank 2 and could
 * take it the moment it arrives; C rank 1's. */
static void order(coll_comm_t *c, int rank, ra_out_t *o) {
  int32_t buf[3][4], m[2][4];
  int src[3] = {-1, 2, -1}, i, last2 = -1;
  coll_request_t *req[3];
  if (rank == 0) {
    if (!ok(o,
            coll_irecv_any(c, buf[0], 4, COLL_I32, TAG_ORDER, &src[0], NULL,
                           &req[0]),
            "irecv_any A", rank) ||
        !ok(o, coll_irecv(c, buf[1], 4, COLL_I32, 2, TAG_ORDER, NULL, &req[1]),
            "irecv B", rank) ||
        !ok(o,
            coll_irecv_any(c, buf[2], 4, COLL_I32, TAG_ORDER, &src[2], NULL,
                           &req[2]),
            "irecv_any C", rank))
      return;
    (void)ok(o, coll_barrier(c), "barrier", rank);
    (void)ok(o, coll_wait(req[0]), "wait A", rank);
    (void)ok(o, coll_wait(req[1]), "wait B", rank);
    (void)ok(o, coll_barrier(c), "second barrier", rank);
    (void)ok(o, coll_wait(req[2]), "wait C", rank);
    if (o->failed) return;
    for (i = 0; i < 3; i++) {
      int32_t want[4];
      if (buf[i][0] != src[i]) {
        ra_fail(o, "receive %c: named rank %d, holds rank %d's message",
                'A' + i, src[i], buf[i][0]);
        return;
      }
      message(want, src[i], buf[i][1], TAG_ORDER);
      if (memcmp(buf[i], want, sizeof want) != 0) {
        ra_fail(o, "receive %c: not a message that was sent", 'A' + i);
        return;
      }
      if (src[i] == 2) {
        if (buf[i][1] != last2 + 1) {
          ra_fail(o,
                  "receive %c took rank 2's message %d after message %d: "
                  "receives on a tag must match in issue order",
                  'A' + i, buf[i][1], last2);
          return;
        }
        last2 = buf[i][1];
      }
    }
    if (last2 != 1 || src[0] != 2 || buf[0][1] != 0 || src[2] != 1)
      ra_fail(o,
              "receives A, B, C took messages (%d, %d), (%d, %d), (%d, %d):"
              " A must take rank 2's first, C rank 1's",
              src[0], buf[0][1], src[1], buf[1][1], src[2], buf[2][1]);
    return;
  }
  if (!ok(o, coll_barrier(c), "barrier", rank)) return;
  if (rank == 1) (void)ok(o, coll_barrier(c), "second barrier", rank);
  for (i = 0; rank <= 2 && i < rank; i++) {
    message(m[i], rank, i, TAG_ORDER);
    if (!ok(o, coll_send(c, m[i], 4, COLL_I32, 0, TAG_ORDER), "send", rank))
      return;
  }
  if (rank != 1) (void)ok(o, coll_barrier(c), "second barrier", rank);
}

/* A message longer than the buffer: a mismatch that names its sender. */
static void too_long(coll_comm_t *c, int rank, ra_out_t *o) {
  int32_t big[8] = {1, 2, 3, 4, 5, 6, 7, 8}, small[4];
  int src = -1;
  coll_status_t s;
  if (rank == 1)
    (void)ok(o, coll_send(c, big, 8, COLL_I32, 0, TAG_LONG), "send", rank);
  if (rank == 0) {
    s = coll_recv_any(c, small, 4, COLL_I32, TAG_LONG, &src, NULL);
    o->checked++;
    if (s != COLL_ERR_LENGTH_MISMATCH || src != 1)
      ra_fail(o,
              "a message too long: %s from rank %d (%s), not a mismatch from "
              "rank 1",
              coll_status_name(s), src, coll_last_error());
  }
  (void)ok(o, coll_barrier(c), "barrier after the mismatch", rank);
}

static void body(coll_comm_t *c, int rank, int world, void *out) {
  ra_out_t *o = out;
  fan_in(c, rank, world, o, 0);
  if (!o->failed && world >= 3) order(c, rank, o);
  if (!o->failed) too_long(c, rank, o);
}

/* On threads a message waits at its receiver from its send on. */
static void body_strict(coll_comm_t *c, int rank, int world, void *out) {
  ra_out_t *o = out;
  fan_in(c, rank, world, o, 1);
  if (!o->failed) body(c, rank, world, out);
}

static void run(int world, const char *transport) {
  ra_out_t out[4];
  int r, bad;
  int strict = strcmp(transport, "inproc") == 0;
  bad = rp_run(world, transport, COMM_TIMEOUT_MS, RUN_BOUND_MS,
               strict ? body_strict : body, out, sizeof out[0]) != 0;
  for (r = 0; r < world; r++) {
    if (out[r].failed)
      fprintf(stderr, "%s, world %d: %s\n", transport, world, out[r].msg);
    bad |= out[r].failed || out[r].checked == 0;
  }
  assert_int_equal(bad, 0);
}

#define WORLDS(t)                                      \
  static void t##_2(void **s) { (void)s, run(2, #t); } \
  static void t##_3(void **s) { (void)s, run(3, #t); } \
  static void t##_4(void **s) { (void)s, run(4, #t); }
WORLDS(inproc)
WORLDS(tcp)
WORLDS(shm)

/* ---- refusals, timeout, abort (threads) --------------------------------- */

static void test_refusals(void **state) {
  coll_comm_t *c[2], *one[1];
  int32_t a[8];
  int src;
  coll_request_t *req = (coll_request_t *)a;
  (void)state;
  bi_begin();
  assert_int_equal(test_inproc_comms(2, SHORT_TIMEOUT_MS, c), 0);
  BAD(coll_recv_any(NULL, a, 4, COLL_I32, 0, &src, NULL), "recv_any");
  BAD(coll_recv_any(c[0], NULL, 4, COLL_I32, 0, &src, NULL), "recv_any");
  BAD(coll_recv_any(c[0], a, 4, COLL_DTYPE_COUNT, 0, &src, NULL), "recv_any");
  BAD(coll_recv_any(c[0], a, SIZE_MAX / 2, COLL_I32, 0, &src, NULL),
      "recv_any");
  BAD(coll_recv_any(c[0], a, 4, COLL_I32, COLL_TAG_RESERVED, &src, NULL),
      "reserved");
  BAD(coll_irecv_any(c[0], a, 4, COLL_I32, 0, &src, NULL, NULL), "irecv_any");
  BAD(coll_irecv_any(c[0], NULL, 4, COLL_I32, 0, &src, NULL, &req), "recv_any");
  CHECK(req == NULL);
  assert_int_equal(test_inproc_comms(1, SHORT_TIMEOUT_MS, one), 0);
  BAD(coll_recv_any(one[0], a, 4, COLL_I32, 0, &src, NULL), "no other rank");
  test_destroy_comms(1, one);
  /* Nothing was issued: a message sent now is received as usual. */
  a[0] = 42;
  assert_int_equal(coll_isend(c[1], a, 1, COLL_I32, 0, 3, &req), COLL_OK);
  src = -1;
  a[1] = 0;
  EXPECT(coll_recv_any(c[0], a + 1, 1, COLL_I32, 3, &src, NULL), COLL_OK, "");
  EXPECT(coll_wait(req), COLL_OK, "");
  CHECK(src == 1 && a[1] == 42);
  test_destroy_comms(2, c);
  bi_end("recv_any refusals");
}

/* No sender: the comm's timeout ends it, with a text that says so. */
static void test_timeout(void **state) {
  coll_comm_t *c[2];
  int32_t a[4];
  int64_t t0;
  (void)state;
  bi_begin();
  assert_int_equal(test_inproc_comms(2, 300, c), 0);
  t0 = test_now_ms();
  EXPECT(coll_recv_any(c[0], a, 4, COLL_I32, 0, NULL, NULL), COLL_ERR_TIMEOUT,
         "recv from any rank");
  CHECK(test_now_ms() - t0 >= 250);
  test_destroy_comms(2, c);
  bi_end("recv_any timeout");
}

/* An abort from another thread ends a pending receive from any source. */
typedef struct ab {
  coll_comm_t *c;
  coll_status_t s;
} ab_t;

static void abort_rank(int rank, int world, void *p) {
  ab_t *x = p;
  int32_t a[4];
  (void)world;
  if (rank == 0) {
    x->s = coll_recv_any(x->c, a, 4, COLL_I32, 0, NULL, NULL);
  } else {
    coll_abort_handle_t *h = NULL;
    test_sleep_ms(100);
    if (coll_comm_abort_handle(x->c, &h) == COLL_OK) {
      coll_abort(h);
      coll_abort_handle_release(h);
    }
  }
}

static void test_abort(void **state) {
  coll_comm_t *c[2];
  ab_t x;
  int64_t t0;
  (void)state;
  assert_int_equal(test_inproc_comms(2, 60000, c), 0);
  x.c = c[0];
  t0 = test_now_ms();
  test_run_ranks(2, abort_rank, &x, 30000, "recv_any abort");
  assert_int_equal(x.s, COLL_ERR_ABORTED);
  assert_true(test_now_ms() - t0 < 10000);
  test_destroy_comms(2, c);
}

/* A third party's transport has no probe: refused, not hung. */
static void test_third_party(void **state) {
  coll_comm_t *c[2];
  int32_t a[4];
  (void)state;
  assert_int_equal(mb_comms(2, MB_FULL_NO_BARRIER, 5000, c), 0);
  assert_int_equal(coll_recv_any(c[0], a, 4, COLL_I32, 0, NULL, NULL),
                   COLL_ERR_UNSUPPORTED);
  assert_non_null(strstr(coll_last_error(), "any source"));
  test_destroy_comms(2, c);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(inproc_2),
      cmocka_unit_test(inproc_3),
      cmocka_unit_test(inproc_4),
      cmocka_unit_test(tcp_2),
      cmocka_unit_test(tcp_3),
      cmocka_unit_test(tcp_4),
      cmocka_unit_test(shm_2),
      cmocka_unit_test(shm_3),
      cmocka_unit_test(shm_4),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_timeout),
      cmocka_unit_test(test_abort),
      cmocka_unit_test(test_third_party),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
