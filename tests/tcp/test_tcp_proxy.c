/* SPDX-License-Identifier: Apache-2.0 */
/* test_tcp_proxy.c: the test proxy itself (tests/common/tcp_proxy.c)
 * between two plain sockets that play the connector and the acceptor:
 * handshake-sized bytes, then frames encoded with wire.h. Every fault is
 * checked byte for byte against what was sent. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tcp_proxy.h"
#include "test_util.h"
#include "transport/tcp/tcp_sock.h"
#include "transport/tcp/wire.h"

#define WAIT_MS 5000 /* bound on every wait for bytes */
#define QUIET_MS 50  /* how long "nothing more arrives" is watched */
#define HS_UP COLL_TCP_HELLO_BYTES
#define HS_DOWN (COLL_TCP_CHALLENGE_BYTES + COLL_TCP_WELCOME_BYTES)

typedef struct pair {
  tcp_proxy_t *p;
  int cli; /* the connector's socket, to the proxy */
  int srv; /* the acceptor's socket, from the proxy */
} pair_t;

/* Reads exactly n bytes within WAIT_MS; returns how many came. */
static size_t read_n(int fd, uint8_t *buf, size_t n) {
  int64_t end = test_now_ms() + WAIT_MS;
  size_t got = 0;
  while (got < n && test_now_ms() < end) {
    struct pollfd pf = {fd, POLLIN, 0};
    ssize_t k;
    if (poll(&pf, 1, 50) != 1) continue;
    k = recv(fd, buf + got, n - got, 0);
    if (k <= 0) break;
    got += (size_t)k;
  }
  return got;
}

/* 1 when nothing is readable on fd for QUIET_MS (no bytes, no end). */
static int quiet(int fd) {
  struct pollfd pf = {fd, POLLIN, 0};
  return poll(&pf, 1, QUIET_MS) == 0;
}

static void send_all(int fd, const uint8_t *buf, size_t n) {
  while (n > 0) {
    ssize_t k = send(fd, buf, n, MSG_NOSIGNAL);
    assert_true(k > 0);
    buf += k;
    n -= (size_t)k;
  }
}

static void expect_bytes(int fd, const uint8_t *want, size_t n) {
  uint8_t *got = malloc(n);
  assert_non_null(got);
  assert_int_equal(read_n(fd, got, n), n);
  assert_memory_equal(got, want, n);
  free(got);
}

/* A frame of len payload bytes (i * 7 + tag) from rank src. */
static size_t frame(uint8_t *out, uint32_t src, uint32_t tag, size_t len) {
  size_t i;
  coll__tcp_frame_encode(out, COLL_TCP_K_DATA, 0, src, tag, len);
  for (i = 0; i < len; i++)
    out[COLL_TCP_FRAME_BYTES + i] = (uint8_t)(i * 7 + tag);
  return COLL_TCP_FRAME_BYTES + len;
}

/* A socket whose blocking reads give up after WAIT_MS. */
static int bounded_socket(void) {
  struct timeval tv = {WAIT_MS / 1000, 0};
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
  return fd;
}

/* Proxy, acceptor, connector, and the handshake's bytes both ways. */
static void pair_open(pair_t *pr) {
  struct sockaddr_storage ss;
  socklen_t len = 0;
  char where[COLL_TCP_ADDR_MAX];
  uint8_t hs[HS_UP > HS_DOWN ? HS_UP : HS_DOWN];
  struct pollfd pf;
  int lfd;
  assert_int_equal(tcp_proxy_start(&pr->p), 0);
  assert_int_equal(
      coll__tcp_listen("127.0.0.1", 4, 0, &lfd, where, sizeof where), COLL_OK);
  assert_int_equal(tcp_proxy_set_target(pr->p, where), 0);
  assert_int_equal(coll__tcp_addr_parse(tcp_proxy_addr(pr->p), &ss, &len),
                   COLL_OK);
  pr->cli = bounded_socket();
  assert_int_equal(connect(pr->cli, (struct sockaddr *)&ss, len), 0);
  pf = (struct pollfd){lfd, POLLIN, 0};
  assert_int_equal(poll(&pf, 1, WAIT_MS), 1);
  pr->srv = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
  assert_true(pr->srv >= 0);
  {
    struct timeval tv = {WAIT_MS / 1000, 0};
    assert_int_equal(
        setsockopt(pr->srv, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
  }
  close(lfd);
  memset(hs, 0xaa, sizeof hs);
  send_all(pr->cli, hs, HS_UP);
  expect_bytes(pr->srv, hs, HS_UP);
  memset(hs, 0xbb, sizeof hs);
  send_all(pr->srv, hs, HS_DOWN);
  expect_bytes(pr->cli, hs, HS_DOWN);
}

static void pair_close(pair_t *pr) {
  close(pr->cli);
  close(pr->srv);
  tcp_proxy_stop(pr->p);
}

static tcp_proxy_stats_t stats(pair_t *pr) {
  tcp_proxy_stats_t st;
  assert_int_equal(tcp_proxy_stats(pr->p, &st), 0);
  return st;
}

/* Frames of 0, 5 and 70000 bytes (more than one write of the proxy) pass
 * unchanged both ways, and the proxy counts every frame and byte. */
static void test_pass(void **state) {
  pair_t pr;
  size_t lens[] = {0, 5, 70000}, i, n;
  uint8_t *f = malloc(COLL_TCP_FRAME_BYTES + 70000);
  uint64_t up = HS_UP, down = HS_DOWN;
  tcp_proxy_stats_t st;
  (void)state;
  assert_non_null(f);
  pair_open(&pr);
  for (i = 0; i < 3; i++) {
    n = frame(f, 1, (uint32_t)i, lens[i]);
    send_all(pr.cli, f, n);
    expect_bytes(pr.srv, f, n);
    up += n;
    n = frame(f, 0, (uint32_t)i + 10, lens[i]);
    send_all(pr.srv, f, n);
    expect_bytes(pr.cli, f, n);
    down += n;
  }
  st = stats(&pr);
  assert_int_equal(st.links, 1);
  assert_int_equal(st.frames[TCP_PROXY_UP], 3);
  assert_int_equal(st.frames[TCP_PROXY_DOWN], 3);
  assert_int_equal(st.fwd[TCP_PROXY_UP], up);
  assert_int_equal(st.fwd[TCP_PROXY_DOWN], down);
  pair_close(&pr);
  free(f);
}

/* Delayed bytes arrive whole and in order. */
static void test_delay(void **state) {
  pair_t pr;
  uint8_t f[COLL_TCP_FRAME_BYTES + 100];
  size_t n, i;
  (void)state;
  pair_open(&pr);
  assert_int_equal(tcp_proxy_delay(pr.p, TCP_PROXY_UP, 20), 0);
  for (i = 0; i < 3; i++) {
    n = frame(f, 1, (uint32_t)i, 100);
    send_all(pr.cli, f, n);
    expect_bytes(pr.srv, f, n);
  }
  pair_close(&pr);
}

/* Half of the next header arrives, then nothing until pass; then the rest
 * of the frame, unchanged. */
static void test_hold_half_header(void **state) {
  pair_t pr;
  uint8_t f[COLL_TCP_FRAME_BYTES + 10];
  size_t n;
  int64_t end = test_now_ms() + WAIT_MS;
  (void)state;
  pair_open(&pr);
  assert_int_equal(tcp_proxy_hold_half_header(pr.p, TCP_PROXY_UP), 0);
  n = frame(f, 1, 3, 10);
  send_all(pr.cli, f, n);
  while (!stats(&pr).held[TCP_PROXY_UP] && test_now_ms() < end)
    test_sleep_ms(2);
  assert_true(stats(&pr).held[TCP_PROXY_UP]);
  expect_bytes(pr.srv, f, COLL_TCP_FRAME_BYTES / 2);
  assert_true(quiet(pr.srv));
  assert_int_equal(tcp_proxy_pass(pr.p, TCP_PROXY_UP), 0);
  expect_bytes(pr.srv, f + COLL_TCP_FRAME_BYTES / 2,
               n - COLL_TCP_FRAME_BYTES / 2);
  assert_false(stats(&pr).held[TCP_PROXY_UP]);
  pair_close(&pr);
}

/* Corruption lands exactly where asked: in the next header (its length
 * field, which must not confuse the proxy's own framing), in the next
 * payload long enough, and at the next bytes. */
static void test_corrupt(void **state) {
  pair_t pr;
  uint8_t a[COLL_TCP_FRAME_BYTES + 4], b[COLL_TCP_FRAME_BYTES + 2];
  uint8_t c[COLL_TCP_FRAME_BYTES + 10], d[COLL_TCP_FRAME_BYTES + 4];
  size_t na, nb, nc, nd;
  tcp_proxy_stats_t st;
  (void)state;
  pair_open(&pr);
  na = frame(a, 1, 1, 4);
  nb = frame(b, 1, 2, 2);
  nc = frame(c, 1, 3, 10);
  nd = frame(d, 0, 4, 4);
  assert_int_equal(
      tcp_proxy_corrupt(pr.p, TCP_PROXY_UP, TCP_PROXY_AT_HEADER, 16, 2), 0);
  send_all(pr.cli, a, na);
  a[16] ^= 0xff;
  a[17] ^= 0xff;
  expect_bytes(pr.srv, a, na);
  assert_int_equal(
      tcp_proxy_corrupt(pr.p, TCP_PROXY_UP, TCP_PROXY_AT_PAYLOAD, 3, 2), 0);
  send_all(pr.cli, b, nb); /* a payload of 2: too short, left alone */
  send_all(pr.cli, c, nc);
  expect_bytes(pr.srv, b, nb);
  c[COLL_TCP_FRAME_BYTES + 3] ^= 0xff;
  c[COLL_TCP_FRAME_BYTES + 4] ^= 0xff;
  expect_bytes(pr.srv, c, nc);
  assert_int_equal(
      tcp_proxy_corrupt(pr.p, TCP_PROXY_DOWN, TCP_PROXY_AT_BYTES, 1, 1), 0);
  send_all(pr.srv, d, nd);
  d[1] ^= 0xff;
  expect_bytes(pr.cli, d, nd);
  st = stats(&pr);
  assert_int_equal(st.flipped[TCP_PROXY_UP], 4);
  assert_int_equal(st.flipped[TCP_PROXY_DOWN], 1);
  assert_int_equal(st.frames[TCP_PROXY_UP], 3);
  pair_close(&pr);
}

/* A stall keeps the bytes (the proxy's queue, then the kernel's) and the
 * connection; pass delivers all of them in order. */
static void test_stall(void **state) {
  pair_t pr;
  size_t n = 0, i;
  uint8_t *f = malloc(8 * (COLL_TCP_FRAME_BYTES + 30000));
  (void)state;
  assert_non_null(f);
  pair_open(&pr);
  assert_int_equal(tcp_proxy_stall(pr.p, TCP_PROXY_UP), 0);
  for (i = 0; i < 8; i++) n += frame(f + n, 1, (uint32_t)i, 30000);
  send_all(pr.cli, f, n);
  assert_int_equal(tcp_proxy_wait_queued(pr.p, TCP_PROXY_UP, 1, WAIT_MS), 0);
  assert_true(quiet(pr.srv));
  assert_int_equal(tcp_proxy_pass(pr.p, TCP_PROXY_UP), 0);
  expect_bytes(pr.srv, f, n);
  pair_close(&pr);
  free(f);
}

/* Reset DOWN: the connector's side gets an RST, the acceptor's stays open
 * and silent; reset UP then resets the acceptor's side too. */
static void test_reset(void **state) {
  pair_t pr;
  uint8_t byte;
  (void)state;
  pair_open(&pr);
  assert_int_equal(tcp_proxy_reset(pr.p, TCP_PROXY_DOWN), 0);
  assert_int_equal(recv(pr.cli, &byte, 1, 0), -1);
  assert_int_equal(errno, ECONNRESET);
  assert_true(quiet(pr.srv));
  assert_int_equal(tcp_proxy_reset(pr.p, TCP_PROXY_UP), 0);
  assert_int_equal(recv(pr.srv, &byte, 1, 0), -1);
  assert_int_equal(errno, ECONNRESET);
  assert_int_equal(stats(&pr).open, 0);
  pair_close(&pr);
}

/* An orderly close passes on, each way, after the bytes before it; then
 * the proxy lets the connection go. */
static void test_close_passes(void **state) {
  pair_t pr;
  uint8_t f[COLL_TCP_FRAME_BYTES + 8], byte;
  size_t n;
  int64_t end = test_now_ms() + WAIT_MS;
  (void)state;
  pair_open(&pr);
  n = frame(f, 1, 1, 8);
  send_all(pr.cli, f, n);
  shutdown(pr.cli, SHUT_WR);
  expect_bytes(pr.srv, f, n);
  assert_int_equal(recv(pr.srv, &byte, 1, 0), 0);
  shutdown(pr.srv, SHUT_WR);
  assert_int_equal(recv(pr.cli, &byte, 1, 0), 0);
  while (stats(&pr).open != 0 && test_now_ms() < end) test_sleep_ms(2);
  assert_int_equal(stats(&pr).open, 0);
  pair_close(&pr);
}

/* A target that is not an address is refused; without a target a
 * connection is reset at once, as a peer not up yet would be. */
static void test_no_target(void **state) {
  tcp_proxy_t *p;
  tcp_proxy_stats_t st;
  struct sockaddr_storage ss;
  socklen_t len = 0;
  uint8_t byte;
  ssize_t k;
  int fd;
  (void)state;
  assert_int_equal(tcp_proxy_start(&p), 0);
  assert_int_equal(tcp_proxy_set_target(p, "nonsense"), -1);
  assert_int_equal(tcp_proxy_set_target(p, "127.0.0.1"), -1);
  assert_int_equal(coll__tcp_addr_parse(tcp_proxy_addr(p), &ss, &len), COLL_OK);
  fd = bounded_socket();
  assert_int_equal(connect(fd, (struct sockaddr *)&ss, len), 0);
  k = recv(fd, &byte, 1, 0);
  assert_true(k == 0 || (k < 0 && errno == ECONNRESET));
  assert_int_equal(tcp_proxy_stats(p, &st), 0);
  assert_int_equal(st.links, 0);
  close(fd);
  tcp_proxy_stop(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pass),
      cmocka_unit_test(test_delay),
      cmocka_unit_test(test_hold_half_header),
      cmocka_unit_test(test_corrupt),
      cmocka_unit_test(test_stall),
      cmocka_unit_test(test_reset),
      cmocka_unit_test(test_close_passes),
      cmocka_unit_test(test_no_target),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
