/* SPDX-License-Identifier: Apache-2.0 */
/* test_tcp_rx.c: the receive state machine of one connection, driven by
 * hand over a socketpair: split headers, messages adopted while arriving,
 * messages left in the kernel, multi-frame messages, too-long messages,
 * and every kind of malformed frame. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "tcp_test_util.h"

/* A transport of two ranks whose connection to rank 1 is a socketpair; the
 * test writes rank 1's bytes into `peer`. */
typedef tt_rx_fixture_t fixture_t;

static int setup(void **state) {
  fixture_t *f = tt_rx_fixture_new(1000);
  if (f == NULL) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  tt_rx_fixture_free(*state);
  return 0;
}

static void put(fixture_t *f, const void *p, size_t n) {
  assert_int_equal(tt_send_all(f->peer, p, n), 0);
}

static void frame(fixture_t *f, uint8_t kind, uint8_t flags, uint32_t src,
                  uint32_t tag, uint64_t len) {
  uint8_t h[COLL_TCP_FRAME_BYTES];
  coll__tcp_frame_encode(h, kind, flags, src, tag, len);
  put(f, h, sizeof h);
}

static tcp_ev_t progress(fixture_t *f, char *why) {
  return coll__tcp_rx_progress(f->c, 0, why);
}

static void recv_req(fixture_t *f, tcp_req_t *r, uint32_t tag, void *buf,
                     size_t cap) {
  memset(r, 0, sizeof *r);
  r->conn = f->c;
  r->kind = TCP_REQ_RECV;
  r->tag = tag;
  r->buf = buf;
  r->len = cap;
  atomic_init(&r->done, 0);
}

/* Posts r the way irecv does: early messages first, else the list. */
static void post(fixture_t *f, tcp_req_t *r) {
  if (!coll__tcp_rx_match(f->c, r)) coll__tcp_rx_append(f->c, r);
}

static void test_split_header_posted(void **state) {
  fixture_t *f = *state;
  uint8_t h[COLL_TCP_FRAME_BYTES], pay[300], out[300];
  tcp_req_t r;
  char why[TCP_WHY_MAX];
  tt_fill(pay, sizeof pay, 1, 0, 1);
  recv_req(f, &r, 7, out, sizeof out);
  post(f, &r);
  coll__tcp_frame_encode(h, COLL_TCP_K_DATA, 0, 1, 7, sizeof pay);
  put(f, h, 5); /* a header in three pieces, then the payload in two */
  assert_int_equal(progress(f, why), TCP_EV_NONE);
  put(f, h + 5, 10);
  assert_int_equal(progress(f, why), TCP_EV_NONE);
  put(f, h + 15, sizeof h - 15);
  put(f, pay, 100);
  assert_int_equal(progress(f, why), TCP_EV_NONE);
  assert_int_equal(atomic_load(&r.done), 0);
  put(f, pay + 100, sizeof pay - 100);
  assert_int_equal(progress(f, why), TCP_EV_NONE);
  assert_int_equal(atomic_load(&r.done), 1);
  assert_int_equal(r.status, COLL_OK);
  assert_int_equal(r.got, sizeof pay);
  assert_memory_equal(out, pay, sizeof pay);
}

/* An early message read halfway, then its receive is posted: the half moves
 * over and the rest lands in place. */
static void test_adopted_while_arriving(void **state) {
  fixture_t *f = *state;
  uint8_t pay[900], out[900];
  tcp_req_t r;
  char why[TCP_WHY_MAX];
  tt_fill(pay, sizeof pay, 1, 0, 2);
  frame(f, COLL_TCP_K_DATA, 0, 1, 3, sizeof pay);
  put(f, pay, 400);
  assert_int_equal(progress(f, why), TCP_EV_NONE);
  assert_non_null(f->c->unexp.head); /* kept early, still arriving */
  recv_req(f, &r, 3, out, sizeof out);
  post(f, &r);
  assert_null(f->c->unexp.head);
  put(f, pay + 400, sizeof pay - 400);
  assert_int_equal(progress(f, why), TCP_EV_NONE);
  assert_int_equal(atomic_load(&r.done), 1);
  assert_int_equal(r.got, sizeof pay);
  assert_memory_equal(out, pay, sizeof pay);
  assert_int_equal(f->c->unexp_bytes, 0);
}

/* With nothing posted, a message above the budget is not read at all;
 * once posted it arrives in place. Messages of one tag keep their order. */
static void test_held_back_then_in_order(void **state) {
  fixture_t *f = *state;
  size_t big = 300 * 1024;
  uint8_t *pay = malloc(big), *out = malloc(big), small[3][10];
  tcp_req_t r, q[3];
  char why[TCP_WHY_MAX];
  int i;
  f->t.x.frame_cap = big;
  tt_fill(pay, big, 1, 0, 4);
  for (i = 0; i < 3; i++) {
    uint8_t b[10];
    tt_fill(b, sizeof b, 1, 0, 10 + i);
    frame(f, COLL_TCP_K_DATA, 0, 1, 9, sizeof b);
    put(f, b, sizeof b);
  }
  frame(f, COLL_TCP_K_DATA, 0, 1, 5, big);
  put(f, pay, 64 * 1024);
  assert_int_equal(progress(f, why), TCP_EV_NONE);
  assert_int_equal(f->c->rpaused, 1); /* the three small ones are kept */
  assert_int_equal(f->c->unexp_bytes, 30);
  recv_req(f, &r, 5, out, big);
  post(f, &r);
  for (i = 0; i < 3; i++) {
    recv_req(f, &q[i], 9, small[i], sizeof small[i]);
    post(f, &q[i]);
    assert_int_equal(atomic_load(&q[i].done), 1);
    assert_true(tt_check(small[i], 10, 1, 0, 10 + i));
  }
  for (size_t off = 64 * 1024; off < big; off += 64 * 1024) {
    assert_int_equal(progress(f, why), TCP_EV_NONE);
    put(f, pay + off, big - off < 64 * 1024 ? big - off : 64 * 1024);
  }
  assert_int_equal(progress(f, why), TCP_EV_NONE);
  assert_int_equal(atomic_load(&r.done), 1);
  assert_int_equal(r.got, big);
  assert_memory_equal(out, pay, big);
  free(pay);
  free(out);
}

/* 2500 bytes in frames of at most 1000: posted, early, and too long. */
static void send_frames(fixture_t *f, uint32_t tag, const uint8_t *p,
                        size_t n) {
  size_t off = 0;
  do {
    size_t k = n - off < 1000 ? n - off : 1000;
    frame(f, off == 0 ? COLL_TCP_K_DATA : COLL_TCP_K_CONT,
          off + k < n ? COLL_TCP_F_MORE : 0, 1, tag, k);
    put(f, p + off, k);
    off += k;
  } while (off < n);
}

static void test_multiframe(void **state) {
  fixture_t *f = *state;
  uint8_t pay[2500], a[2500], b[2500], c[1500 + 64];
  tcp_req_t ra, rb, rc;
  char why[TCP_WHY_MAX];
  tt_fill(pay, sizeof pay, 1, 0, 5);
  memset(c, 0xEE, sizeof c);
  recv_req(f, &ra, 1, a, sizeof a);
  post(f, &ra);
  recv_req(f, &rc, 3, c, 1500);
  post(f, &rc);
  send_frames(f, 1, pay, sizeof pay);
  send_frames(f, 2, pay, sizeof pay); /* early: grows frame by frame */
  send_frames(f, 3, pay, sizeof pay); /* overflows in its second frame */
  assert_int_equal(progress(f, why), TCP_EV_NONE);
  assert_int_equal(atomic_load(&ra.done), 1);
  assert_int_equal(ra.got, sizeof pay);
  assert_memory_equal(a, pay, sizeof pay);
  assert_int_equal(atomic_load(&rc.done), 1);
  assert_int_equal(rc.status, COLL_ERR_LENGTH_MISMATCH);
  assert_int_equal(rc.got, sizeof pay);
  assert_memory_equal(c, pay, 1000); /* the first frame fitted */
  for (size_t i = 1500; i < sizeof c; i++) assert_int_equal(c[i], 0xEE);
  recv_req(f, &rb, 2, b, sizeof b);
  post(f, &rb);
  assert_int_equal(atomic_load(&rb.done), 1);
  assert_memory_equal(b, pay, sizeof pay);
}

/* Each malformed header is PROTOCOL and allocates nothing. */
static void expect_proto(uint8_t kind, uint8_t flags, uint32_t src,
                         uint64_t len, int first_data, const char *needle) {
  fixture_t *f;
  char why[TCP_WHY_MAX] = "";
  f = tt_rx_fixture_new(1000);
  assert_non_null(f);
  if (first_data) frame(f, COLL_TCP_K_DATA, COLL_TCP_F_MORE, 1, 4, 0);
  frame(f, kind, flags, src, 4, len);
  assert_int_equal(progress(f, why), TCP_EV_PROTO);
  assert_non_null(strstr(why, needle));
  assert_non_null(strstr(why, "rank 1"));
  assert_true(f->c->unexp.head == NULL ||
              COLL_MATCH_OWNER(f->c->unexp.head, tcp_umsg_t, m)->len == 0);
  teardown((void **)&f);
}

static void test_malformed_frames(void **state) {
  fixture_t *f = *state;
  uint8_t junk[COLL_TCP_FRAME_BYTES];
  char why[TCP_WHY_MAX];
  expect_proto(COLL_TCP_K_DATA, 0, 1, (uint64_t)1 << 62, 0, "cap");
  expect_proto(COLL_TCP_K_DATA, 0, 1, 1001, 0, "cap");
  expect_proto(COLL_TCP_K_DATA, 0, 0, 10, 0, "claims");
  expect_proto(COLL_TCP_K_CONT, 0, 1, 10, 0, "order");
  expect_proto(COLL_TCP_K_DATA, 0, 1, 10, 1, "order");
  expect_proto(COLL_TCP_K_GOODBYE, 0, 1, 0, 1, "order");
  expect_proto(COLL_TCP_K_GOODBYE, 0, 1, 5, 0, "order");
  expect_proto(0x77, 0, 1, 0, 0, "order");
  memset(junk, 0x41, sizeof junk);
  put(f, junk, sizeof junk);
  assert_int_equal(progress(f, why), TCP_EV_PROTO);
  assert_non_null(strstr(why, "magic"));
}

/* A goodbye frame with its payload: origin, cause, detail. */
static void bye(fixture_t *f, uint32_t origin, uint16_t cause,
                uint32_t detail) {
  uint8_t p[COLL_TCP_BYE_BYTES];
  frame(f, COLL_TCP_K_GOODBYE, 0, 1, 0, COLL_TCP_BYE_BYTES);
  coll__tcp_bye_encode(p, origin, cause, detail);
  put(f, p, sizeof p);
}

/* Payloads at least 16 KiB long are read straight into their receive, and
 * staging catches only the header behind them. Sizes around that threshold
 * and around the frame cap, each sent while the one before is still
 * unread, with small messages between the large ones and a goodbye right
 * behind the last payload: every byte lands in its own receive. */
static void send_msg(fixture_t *f, uint32_t tag, const uint8_t *p, size_t n,
                     size_t cap) {
  size_t off = 0;
  do {
    size_t k = n - off < cap ? n - off : cap;
    frame(f, off == 0 ? COLL_TCP_K_DATA : COLL_TCP_K_CONT,
          off + k < n ? COLL_TCP_F_MORE : 0, 1, tag, k);
    put(f, p + off, k);
    off += k;
  } while (off < n);
}

static void test_direct_reads_around_boundaries(void **state) {
  static const size_t sizes[] = {16383, 16384, 16385, 1,     20000,
                                 20001, 7,     40000, 39999, 40001,
                                 3,     16408, 50000, 16360, 24};
  enum { N = sizeof sizes / sizeof sizes[0] };
  const size_t cap = 20000;
  fixture_t *f = *state;
  uint8_t *pay[N], *out[N];
  tcp_req_t r[N];
  char why[TCP_WHY_MAX];
  size_t i;
  f->t.x.frame_cap = cap;
  for (i = 0; i < N; i++) {
    pay[i] = malloc(sizes[i]);
    out[i] = malloc(sizes[i] + 1);
    assert_non_null(pay[i]);
    assert_non_null(out[i]);
    tt_fill(pay[i], sizes[i], 1, 0, (int)i + 20);
    memset(out[i], 0xEE, sizes[i] + 1);
    recv_req(f, &r[i], (uint32_t)i + 100, out[i], sizes[i] + 1);
    post(f, &r[i]);
  }
  send_msg(f, 100, pay[0], sizes[0], cap);
  for (i = 0; i < N; i++) {
    tcp_ev_t ev = TCP_EV_NONE;
    int spins = 0;
    if (i + 1 < N)
      send_msg(f, (uint32_t)i + 101, pay[i + 1], sizes[i + 1], cap);
    else
      bye(f, 1, COLL_CAUSE_DESTROYED, 0);
    /* Everything sent is in the socket: a few calls read it all. */
    while (!atomic_load(&r[i].done) && ev == TCP_EV_NONE && spins++ < 100)
      ev = progress(f, why);
    assert_int_equal(ev, i + 1 < N ? TCP_EV_NONE : TCP_EV_GOODBYE);
    assert_int_equal(atomic_load(&r[i].done), 1);
    assert_int_equal(r[i].status, COLL_OK);
    assert_int_equal(r[i].got, sizes[i]);
    assert_memory_equal(out[i], pay[i], sizes[i]);
    assert_int_equal(out[i][sizes[i]], 0xEE);
  }
  assert_int_equal(f->c->rstate, RS_CLOSED);
  for (i = 0; i < N; i++) {
    free(pay[i]);
    free(out[i]);
  }
}

/* A direct read stages only the header behind its payload: here the next
 * message is too big to keep early and its receive is not posted, so its
 * payload waits in the kernel (not in staging) and then lands in place. */
static void test_direct_read_stages_only_next_header(void **state) {
  fixture_t *f = *state;
  size_t a = 100000, b = 300 * 1024, off;
  uint8_t *pa = malloc(a), *pb = malloc(b), *oa = malloc(a), *ob = malloc(b);
  tcp_req_t ra, rb;
  char why[TCP_WHY_MAX];
  assert_true(pa != NULL && pb != NULL && oa != NULL && ob != NULL);
  f->t.x.frame_cap = b;
  tt_fill(pa, a, 1, 0, 40);
  tt_fill(pb, b, 1, 0, 41);
  recv_req(f, &ra, 1, oa, a);
  post(f, &ra);
  frame(f, COLL_TCP_K_DATA, 0, 1, 1, a);
  put(f, pa, 70000); /* staged, then read directly up to what is there */
  assert_int_equal(progress(f, why), TCP_EV_NONE);
  assert_int_equal(atomic_load(&ra.done), 0);
  put(f, pa + 70000, a - 70000);
  frame(f, COLL_TCP_K_DATA, 0, 1, 2, b);
  put(f, pb, 64 * 1024);
  assert_int_equal(progress(f, why), TCP_EV_NONE);
  assert_int_equal(atomic_load(&ra.done), 1);
  assert_memory_equal(oa, pa, a);
  assert_int_equal(f->c->rpaused, 1);
  assert_int_equal(f->c->rend - f->c->rpos, COLL_TCP_FRAME_BYTES);
  recv_req(f, &rb, 2, ob, b);
  post(f, &rb);
  for (off = 64 * 1024; off < b; off += 64 * 1024) {
    assert_int_equal(progress(f, why), TCP_EV_NONE);
    put(f, pb + off, b - off < 64 * 1024 ? b - off : 64 * 1024);
  }
  assert_int_equal(progress(f, why), TCP_EV_NONE);
  assert_int_equal(atomic_load(&rb.done), 1);
  assert_int_equal(rb.got, b);
  assert_memory_equal(ob, pb, b);
  free(pa);
  free(pb);
  free(oa);
  free(ob);
}

static void test_goodbye_and_eof(void **state) {
  fixture_t *f = *state, *g;
  char why[TCP_WHY_MAX];
  /* The header alone is not judged: the payload comes with it. */
  frame(f, COLL_TCP_K_GOODBYE, 0, 1, 0, COLL_TCP_BYE_BYTES);
  assert_int_equal(progress(f, why), TCP_EV_NONE);
  {
    uint8_t p[COLL_TCP_BYE_BYTES];
    coll__tcp_bye_encode(p, 1, COLL_CAUSE_DESTROYED, 0);
    put(f, p, sizeof p);
  }
  assert_int_equal(progress(f, why), TCP_EV_GOODBYE);
  assert_int_equal(f->c->rstate, RS_CLOSED);
  assert_int_equal(f->c->bye.rank, 1);
  assert_int_equal(f->c->bye.cause, COLL_CAUSE_DESTROYED);
  assert_int_equal(progress(f, why), TCP_EV_NONE); /* read no more */
  g = tt_rx_fixture_new(1000);
  assert_non_null(g);
  frame(g, COLL_TCP_K_DATA, 0, 1, 4, 100);
  put(g, "abc", 3);
  close(g->peer);
  g->peer = -1;
  /* The first call reads what came, less than it asked for, and leaves the
   * rest to the next readable poll(); the next call finds the end. */
  assert_int_equal(progress(g, why), TCP_EV_NONE);
  assert_int_equal(progress(g, why), TCP_EV_LOST);
  assert_non_null(strstr(why, "rank 1 lost"));
  assert_non_null(strstr(why, "mid-frame"));
  assert_int_equal(atomic_load(&g->c->lost_err), 0);
  teardown((void **)&g);
}

/* A rank that fails between two frames of a message says goodbye there,
 * naming where the failure started: the receiver records that origin. */
static void test_goodbye_mid_message_names_origin(void **state) {
  fixture_t *f = *state;
  char why[TCP_WHY_MAX];
  frame(f, COLL_TCP_K_DATA, COLL_TCP_F_MORE, 1, 4, 3);
  put(f, "abc", 3);
  bye(f, 0, COLL_CAUSE_LOST, 104);
  assert_int_equal(progress(f, why), TCP_EV_FAILED);
  assert_int_equal(f->c->rstate, RS_CLOSED);
  assert_int_equal(f->c->bye.rank, 0);
  assert_int_equal(f->c->bye.cause, COLL_CAUSE_LOST);
  assert_int_equal(f->c->bye.detail, 104);
}

/* A goodbye whose payload makes no sense is a protocol error. */
static void test_goodbye_malformed(void **state) {
  static const struct {
    uint32_t origin;
    uint16_t cause;
    uint32_t detail;
    const char *needle;
  } bad[] = {
      {2, COLL_CAUSE_ABORTED, 0, "malformed"}, /* world is 2 */
      {1, 0, 0, "cause 0"},
      {1, 99, 0, "cause 99"},
      {1, COLL_CAUSE_FAILED, 0, "cause"}, /* a failure of status OK */
      {1, COLL_CAUSE_FAILED, 999, "cause"},
  };
  size_t i;
  (void)state;
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    fixture_t *f;
    char why[TCP_WHY_MAX] = "";
    f = tt_rx_fixture_new(1000);
    assert_non_null(f);
    bye(f, bad[i].origin, bad[i].cause, bad[i].detail);
    assert_int_equal(progress(f, why), TCP_EV_PROTO);
    assert_non_null(strstr(why, bad[i].needle));
    assert_non_null(strstr(why, "rank 1"));
    teardown((void **)&f);
  }
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_split_header_posted, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_adopted_while_arriving, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_held_back_then_in_order, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_multiframe, setup, teardown),
      cmocka_unit_test_setup_teardown(test_direct_reads_around_boundaries,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_direct_read_stages_only_next_header,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_malformed_frames, setup, teardown),
      cmocka_unit_test_setup_teardown(test_goodbye_and_eof, setup, teardown),
      cmocka_unit_test_setup_teardown(test_goodbye_mid_message_names_origin,
                                      setup, teardown),
      cmocka_unit_test(test_goodbye_malformed),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
