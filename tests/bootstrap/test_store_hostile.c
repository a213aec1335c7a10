/* SPDX-License-Identifier: Apache-2.0 */
/* test_store_hostile.c: the store facing clients that do not play by the
 * rules: wrong or missing tokens, garbage, huge or over-cap lengths,
 * malformed keys, half requests held open, replies never read, and a
 * client that meets a foreign service on the port. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <uv.h>

#include <cmocka.h>

#include "boot_test.h"
#include "core/error.h"
#include "test_util.h"

#define T_MS 10000 /* generous bound for waits that should succeed */

typedef bt_store_t fixture_t;

static coll_store_t *client(const fixture_t *f) {
  coll_store_t *st = bt_client(f);
  if (st == NULL) fail_msg("connect: %s", coll_last_error());
  return st;
}

/* ---- tokens ---- */

static void test_token(void **state) {
  coll_store_server_t *srv;
  coll_store_t *st = NULL;
  char buf[8];
  size_t len;
  int port;
  (void)state;
  assert_int_equal(coll__store_server_start("127.0.0.1", 0, "s3cret", &srv),
                   COLL_OK);
  port = coll__store_server_port(srv);
  assert_int_equal(coll__store_connect("127.0.0.1", port, "s3cret", T_MS, &st),
                   COLL_OK);
  assert_int_equal(coll__store_set(st, "k", "v", 1), COLL_OK);
  assert_int_equal(coll__store_get(st, "k", buf, sizeof buf, &len, 0), COLL_OK);
  coll__store_close(st);
  st = NULL;
  assert_int_equal(coll__store_connect("127.0.0.1", port, "wrong", T_MS, &st),
                   COLL_ERR_PROTOCOL);
  assert_non_null(strstr(coll_last_error(), "token mismatch"));
  assert_null(st);
  assert_int_equal(coll__store_connect("127.0.0.1", port, NULL, T_MS, &st),
                   COLL_ERR_PROTOCOL);
  assert_non_null(strstr(coll_last_error(), "requires an auth token"));
  coll__store_server_stop(srv);
  /* A store without a token refuses a client that has one. */
  assert_int_equal(coll__store_server_start("127.0.0.1", 0, "", &srv), COLL_OK);
  port = coll__store_server_port(srv);
  assert_int_equal(coll__store_connect("127.0.0.1", port, "tok", T_MS, &st),
                   COLL_ERR_PROTOCOL);
  assert_non_null(strstr(coll_last_error(), "no auth token"));
  coll__store_server_stop(srv);
}

/* ---- hostile clients ---- */

static void test_garbage_and_huge_length(void **state) {
  fixture_t *f = *state;
  coll_store_stats_t before, after;
  coll_store_t *st = client(f);
  coll_store_hdr_t h;
  uint8_t b[COLL_STORE_HDR_BYTES];
  char text[256], junk[4096];
  int g, big, i;
  coll__store_server_stats(f->srv, &before);
  /* Garbage instead of a HELLO. */
  g = bt_raw_connect("127.0.0.1", f->port);
  assert_true(g >= 0);
  for (i = 0; i < (int)sizeof junk; i++) junk[i] = (char)(i * 7 + 3);
  (void)bt_send(g, junk, sizeof junk);
  assert_true(bt_closed_within(g, T_MS));
  close(g);
  /* A valid HELLO, then a request claiming a huge body. */
  big = bt_raw_connect("127.0.0.1", f->port);
  assert_true(big >= 0);
  assert_int_equal(bt_raw_hello(big), 0);
  h = coll__store_hdr(COLL_STORE_OP_SET, 1, 0xfffffff0u, 0);
  coll__store_hdr_encode(b, &h);
  assert_int_equal(bt_send(big, b, sizeof b), 0);
  assert_int_equal(bt_read_reply(big, &h, text, sizeof text),
                   COLL_STORE_ST_BAD);
  assert_non_null(strstr(text, "body"));
  assert_true(bt_closed_within(big, T_MS));
  close(big);
  /* A body just over the cap is refused before it is allocated. */
  big = bt_raw_connect("127.0.0.1", f->port);
  assert_int_equal(bt_raw_hello(big), 0);
  h = coll__store_hdr(COLL_STORE_OP_SET, 1, COLL_STORE_BODY_MAX + 1, 0);
  coll__store_hdr_encode(b, &h);
  assert_int_equal(bt_send(big, b, sizeof b), 0);
  assert_int_equal(bt_read_reply(big, &h, text, sizeof text),
                   COLL_STORE_ST_BAD);
  close(big);
  coll__store_server_stats(f->srv, &after);
  assert_true(after.max_body <= COLL_STORE_BODY_MAX);
  assert_true(after.refused >= before.refused + 3);
  /* Other clients never noticed. */
  assert_int_equal(coll__store_set(st, "still", "ok", 2), COLL_OK);
  coll__store_close(st);
}

/* A SET whose key is short, so the value alone exceeds the value cap while
 * the body fits the body cap: refused with a reason. Also a malformed key. */
static void test_value_over_cap_raw(void **state) {
  fixture_t *f = *state;
  size_t body = COLL_STORE_BODY_MAX;
  uint8_t *msg = calloc(1, COLL_STORE_HDR_BYTES + body);
  coll_store_hdr_t h;
  char text[256];
  int fd;
  assert_non_null(msg);
  h = coll__store_hdr(COLL_STORE_OP_SET, 1, (uint32_t)body, 0);
  coll__store_hdr_encode(msg, &h);
  msg[COLL_STORE_HDR_BYTES] = 1; /* key length 1 */
  msg[COLL_STORE_HDR_BYTES + 2] = 'k';
  fd = bt_raw_connect("127.0.0.1", f->port);
  assert_int_equal(bt_raw_hello(fd), 0);
  assert_int_equal(bt_send(fd, msg, COLL_STORE_HDR_BYTES + body), 0);
  assert_int_equal(bt_read_reply(fd, &h, text, sizeof text), COLL_STORE_ST_BAD);
  assert_non_null(strstr(text, "exceeds the cap"));
  close(fd);
  /* A key with a NUL inside. */
  h = coll__store_hdr(COLL_STORE_OP_GET, 1, 4, 0);
  coll__store_hdr_encode(msg, &h);
  memcpy(msg + COLL_STORE_HDR_BYTES, "\x02\x00k\0", 4);
  fd = bt_raw_connect("127.0.0.1", f->port);
  assert_int_equal(bt_raw_hello(fd), 0);
  assert_int_equal(bt_send(fd, msg, COLL_STORE_HDR_BYTES + 4), 0);
  assert_int_equal(bt_read_reply(fd, &h, text, sizeof text), COLL_STORE_ST_BAD);
  assert_non_null(strstr(text, "malformed key"));
  close(fd);
  free(msg);
}

/* Clients that stop halfway hold only their own connection: others keep
 * being served, and one that never says HELLO is dropped. */
static void test_half_requests_do_not_stall(void **state) {
  fixture_t *f = *state;
  coll_store_t *a, *b;
  coll_store_hdr_t h;
  uint8_t hdr[COLL_STORE_HDR_BYTES + 3];
  char buf[16];
  size_t len;
  int silent, half_hdr, half_body, half_hello, i;
  /* The good clients finish their HELLO under the default bound; the
   * short one applies to connections accepted from here on. */
  a = client(f);
  b = client(f);
  coll__store_server_set_handshake_ms(f->srv, 300);
  silent = bt_raw_connect("127.0.0.1", f->port);     /* never speaks */
  half_hello = bt_raw_connect("127.0.0.1", f->port); /* half a HELLO */
  half_hdr = bt_raw_connect("127.0.0.1", f->port);   /* half a header */
  half_body = bt_raw_connect("127.0.0.1", f->port);  /* half a body */
  assert_true(silent >= 0 && half_hello >= 0 && half_hdr >= 0 &&
              half_body >= 0);
  assert_int_equal(bt_read_reply(half_hello, &h, NULL, 0), COLL_STORE_OP_HELLO);
  assert_int_equal(bt_send(half_hello, "CLST\x01", 5), 0);
  assert_int_equal(bt_raw_hello(half_hdr), 0);
  assert_int_equal(bt_raw_hello(half_body), 0);
  h = coll__store_hdr(COLL_STORE_OP_SET, 1, 100, 0);
  coll__store_hdr_encode(hdr, &h);
  assert_int_equal(bt_send(half_hdr, hdr, 10), 0);
  memcpy(hdr + COLL_STORE_HDR_BYTES, "\x01\x00z", 3);
  assert_int_equal(bt_send(half_body, hdr, sizeof hdr), 0);
  /* Two good clients, one waiting on the other, all while those hang. */
  for (i = 0; i < 20; i++) {
    char key[16];
    snprintf(key, sizeof key, "ok/%d", i);
    assert_int_equal(coll__store_set(a, key, "v", 1), COLL_OK);
    assert_int_equal(coll__store_get(b, key, buf, sizeof buf, &len, T_MS),
                     COLL_OK);
  }
  /* The silent and half-HELLO clients are dropped at the handshake bound;
   * the authenticated half requests stay open but harmless. */
  assert_true(bt_closed_within(silent, T_MS));
  assert_true(bt_closed_within(half_hello, T_MS));
  assert_int_equal(coll__store_set(a, "after", "v", 1), COLL_OK);
  close(silent);
  close(half_hello);
  close(half_hdr);
  close(half_body);
  coll__store_close(a);
  coll__store_close(b);
  coll__store_server_set_handshake_ms(f->srv, COLL_STORE_HANDSHAKE_MS_DEFAULT);
}

/* A client that sends GETs and never reads replies must not make the server
 * buffer without bound: it stops reading from that client. */
static void test_unread_replies(void **state) {
  fixture_t *f = *state;
  coll_store_t *st = client(f);
  char *val = calloc(1, COLL_STORE_VALUE_MAX);
  uint8_t req[COLL_STORE_HDR_BYTES + 5];
  coll_store_hdr_t h;
  int fd, i, sent = 0;
  assert_non_null(val);
  assert_int_equal(coll__store_set(st, "fat", val, COLL_STORE_VALUE_MAX),
                   COLL_OK);
  fd = bt_raw_connect("127.0.0.1", f->port);
  assert_int_equal(bt_raw_hello(fd), 0);
  h = coll__store_hdr(COLL_STORE_OP_GET, 1, 5, 0);
  coll__store_hdr_encode(req, &h);
  memcpy(req + COLL_STORE_HDR_BYTES,
         "\x03\x00"
         "fat",
         5);
  /* Until the socket buffers fill (send then times out after 5 s at most,
   * but with nonblocking sends we stop at the first EAGAIN). */
  for (i = 0; i < 20000; i++) {
    if (send(fd, req, sizeof req, MSG_DONTWAIT | MSG_NOSIGNAL) !=
        (ssize_t)sizeof req)
      break;
    sent++;
  }
  assert_true(sent > 0);
  assert_int_equal(coll__store_set(st, "served", "v", 1), COLL_OK);
  close(fd);
  free(val);
  coll__store_close(st);
}

/* Something else listens on the port: the client says so. */
static void foreign_accept(void *arg) {
  int *lfd = arg, c;
  c = accept(*lfd, NULL, NULL);
  if (c < 0) return;
  (void)bt_send(c, "HTTP/1.1 400 Bad Request\r\n\r\n", 28);
  (void)bt_closed_within(c, 5000);
  close(c);
}

static void test_foreign_service(void **state) {
  struct sockaddr_in a;
  socklen_t al = sizeof a;
  coll_store_t *st = NULL;
  coll_status_t s;
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  (void)state;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(lfd, 4), 0);
  assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
  /* The accepting side runs on a thread; the client runs here. */
  {
    uv_thread_t th;
    assert_int_equal(uv_thread_create(&th, foreign_accept, &lfd), 0);
    s = coll__store_connect("127.0.0.1", ntohs(a.sin_port), NULL, T_MS, &st);
    uv_thread_join(&th);
  }
  assert_int_equal(s, COLL_ERR_PROTOCOL);
  assert_non_null(strstr(coll_last_error(), "not a libcoll rendezvous store"));
  close(lfd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_token),
      cmocka_unit_test_setup_teardown(test_garbage_and_huge_length,
                                      bt_store_setup, bt_store_teardown),
      cmocka_unit_test_setup_teardown(test_value_over_cap_raw, bt_store_setup,
                                      bt_store_teardown),
      cmocka_unit_test_setup_teardown(test_half_requests_do_not_stall,
                                      bt_store_setup, bt_store_teardown),
      cmocka_unit_test_setup_teardown(test_unread_replies, bt_store_setup,
                                      bt_store_teardown),
      cmocka_unit_test(test_foreign_service),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
