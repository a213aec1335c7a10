/* SPDX-License-Identifier: Apache-2.0 */
/* test_tcp_wire.c: the TCP transport's pure parts: SHA-256/HMAC against
 * published vectors, the frame layout byte by byte, handshake verdicts,
 * and address text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/origin.h"
#include "core/sha256.h"
#include "transport/tcp/tcp_hs.h"
#include "transport/tcp/tcp_sock.h"
#include "transport/tcp/wire.h"

static void hex(const uint8_t *p, size_t n, char *out) {
  size_t i;
  for (i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", p[i]);
}

static void expect_sha(const void *data, size_t len, const char *want) {
  uint8_t d[32];
  char h[65];
  coll__sha256(data, len, d);
  hex(d, 32, h);
  assert_string_equal(h, want);
}

/* FIPS 180-4 examples and block-boundary lengths (reference: Python's
 * hashlib). */
static void test_sha256_vectors(void **state) {
  char *mil = malloc(1000000);
  (void)state;
  expect_sha(
      "", 0,
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  expect_sha(
      "abc", 3,
      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  expect_sha(
      "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  assert_non_null(mil);
  memset(mil, 'a', 1000000);
  expect_sha(
      mil, 1000000,
      "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  memset(mil, 'x', 64);
  expect_sha(
      mil, 55,
      "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072");
  expect_sha(
      mil, 56,
      "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e");
  expect_sha(
      mil, 64,
      "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c");
  free(mil);
}

static void expect_hmac(const void *key, size_t kl, const char *msg,
                        const char *want) {
  uint8_t d[32];
  char h[65];
  /* Split the message in two parts: parts must concatenate. */
  size_t half = strlen(msg) / 2;
  coll_bytes_t parts[2] = {{msg, half}, {msg + half, strlen(msg) - half}};
  coll__hmac_sha256(key, kl, parts, 2, d);
  hex(d, 32, h);
  assert_string_equal(h, want);
}

/* RFC 4231 test cases 1, 2 and 6. */
static void test_hmac_vectors(void **state) {
  uint8_t k1[20], k6[131];
  (void)state;
  memset(k1, 0x0b, sizeof k1);
  memset(k6, 0xaa, sizeof k6);
  expect_hmac(
      k1, sizeof k1, "Hi There",
      "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  expect_hmac(
      "Jefe", 4, "what do ya want for nothing?",
      "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  expect_hmac(
      k6, sizeof k6, "Test Using Larger Than Block-Size Key - Hash Key First",
      "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

static void test_frame_layout(void **state) {
  uint8_t b[COLL_TCP_FRAME_BYTES];
  coll_tcp_frame_t f;
  static const uint8_t want[COLL_TCP_FRAME_BYTES] = {'C',
                                                     'O',
                                                     'L',
                                                     'L',
                                                     3,
                                                     0,
                                                     COLL_TCP_K_DATA,
                                                     COLL_TCP_F_MORE,
                                                     0x03,
                                                     0x02,
                                                     0x01,
                                                     0x00,
                                                     0xef,
                                                     0xbe,
                                                     0xad,
                                                     0xde,
                                                     0x08,
                                                     0x07,
                                                     0x06,
                                                     0x05,
                                                     0x04,
                                                     0x03,
                                                     0x02,
                                                     0x01};
  (void)state;
  coll__tcp_frame_encode(b, COLL_TCP_K_DATA, COLL_TCP_F_MORE, 0x010203,
                         0xdeadbeef, 0x0102030405060708ull);
  assert_memory_equal(b, want, sizeof want);
  coll__tcp_frame_decode(b, &f);
  assert_int_equal(f.magic, COLL_TCP_MAGIC);
  assert_int_equal(f.version, COLL_TCP_WIRE_VERSION);
  assert_int_equal(f.kind, COLL_TCP_K_DATA);
  assert_int_equal(f.flags, COLL_TCP_F_MORE);
  assert_int_equal(f.src, 0x010203);
  assert_int_equal(f.tag, 0xdeadbeef);
  assert_true(f.len == 0x0102030405060708ull);
}

/* The goodbye's payload: origin, cause, detail, little-endian, with its
 * zero fields checked on the way in. */
static void test_bye_layout(void **state) {
  uint8_t b[COLL_TCP_BYE_BYTES];
  static const uint8_t want[COLL_TCP_BYE_BYTES] = {
      0x03, 0x02, 0x01, 0x00, 0x05, 0x00, 0x00, 0x00,
      0x68, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  uint32_t origin, detail;
  uint16_t cause;
  (void)state;
  coll__tcp_bye_encode(b, 0x010203, COLL_CAUSE_TIMEOUT, 104);
  assert_memory_equal(b, want, sizeof want);
  assert_int_equal(coll__tcp_bye_decode(b, &origin, &cause, &detail), 1);
  assert_int_equal(origin, 0x010203);
  assert_int_equal(cause, COLL_CAUSE_TIMEOUT);
  assert_int_equal(detail, 104);
  b[6] = 1;
  assert_int_equal(coll__tcp_bye_decode(b, &origin, &cause, &detail), 0);
  b[6] = 0;
  b[15] = 1;
  assert_int_equal(coll__tcp_bye_decode(b, &origin, &cause, &detail), 0);
}

/* A connector (rank `from`) and an acceptor (rank 0) run the three
 * messages; returns the acceptor's verdict and the connector's status. */
static coll_tcp_hs_result_t run_hs(const char *job_c, const char *tok_c,
                                   int from, int world_c, const char *tok_a,
                                   coll_status_t *connector) {
  coll_tcp_hs_ctx_t a, c;
  uint8_t ns[COLL_TCP_NONCE_BYTES], nc[COLL_TCP_NONCE_BYTES], nc_seen[16];
  uint8_t ch[COLL_TCP_CHALLENGE_BYTES], he[COLL_TCP_HELLO_BYTES];
  uint8_t we[COLL_TCP_WELCOME_BYTES], ns_seen[16];
  char why[200];
  int peer = -1;
  coll_tcp_hs_result_t res;
  coll__tcp_hs_ctx_init(&a, 0, 4, "job", tok_a);
  coll__tcp_hs_ctx_init(&c, from, world_c, job_c, tok_c);
  assert_int_equal(coll__tcp_hs_nonce(ns), COLL_OK);
  assert_int_equal(coll__tcp_hs_nonce(nc), COLL_OK);
  coll__tcp_hs_challenge(&a, ns, ch);
  if (world_c == 4)
    assert_int_equal(
        coll__tcp_hs_check_challenge(&c, ch, 0, ns_seen, why, sizeof why),
        COLL_OK);
  else
    memcpy(ns_seen, ns, sizeof ns);
  coll__tcp_hs_hello(&c, 0, ns_seen, nc, he);
  res = coll__tcp_hs_check_hello(&a, he, ns, &peer, nc_seen);
  if (res == COLL_TCP_HS_OK) {
    assert_int_equal(peer, from);
    assert_memory_equal(nc_seen, nc, sizeof nc);
  }
  coll__tcp_hs_welcome(&a, peer, res, ns, nc_seen, we);
  *connector =
      coll__tcp_hs_check_welcome(&c, we, 0, ns_seen, nc, why, sizeof why);
  return res;
}

static void test_handshake_verdicts(void **state) {
  coll_status_t cs;
  (void)state;
  assert_int_equal(run_hs("job", NULL, 2, 4, NULL, &cs), COLL_TCP_HS_OK);
  assert_int_equal(cs, COLL_OK);
  assert_int_equal(run_hs("job", "s3cret", 3, 4, "s3cret", &cs),
                   COLL_TCP_HS_OK);
  assert_int_equal(cs, COLL_OK);
  assert_int_equal(run_hs("job", "wrong", 3, 4, "s3cret", &cs),
                   COLL_TCP_HS_BAD_AUTH);
  assert_int_equal(cs, COLL_ERR_PROTOCOL);
  assert_int_equal(run_hs("job", NULL, 3, 4, "s3cret", &cs),
                   COLL_TCP_HS_BAD_AUTH);
  assert_int_equal(run_hs("other", NULL, 1, 4, NULL, &cs), COLL_TCP_HS_BAD_JOB);
  assert_int_equal(cs, COLL_ERR_PROTOCOL);
  assert_int_equal(run_hs("job", NULL, 1, 5, NULL, &cs), COLL_TCP_HS_BAD_WORLD);
  /* Rank 0 is the acceptor: rank 0 itself may not dial it, nor rank 4. */
  assert_int_equal(run_hs("job", NULL, 0, 4, NULL, &cs), COLL_TCP_HS_BAD_RANK);
  assert_int_equal(run_hs("job", NULL, 4, 4, NULL, &cs), COLL_TCP_HS_BAD_RANK);
}

/* The acceptor has a token, the connector answers with the right one but
 * for another challenge (a replay): refused. And an acceptor without the
 * token cannot fool a connector that has one. */
static void test_handshake_replay_and_impostor(void **state) {
  coll_tcp_hs_ctx_t a, c, imp;
  uint8_t ns1[16], ns2[16], nc[16], seen[16], he[COLL_TCP_HELLO_BYTES];
  uint8_t we[COLL_TCP_WELCOME_BYTES];
  char why[200];
  int peer;
  (void)state;
  coll__tcp_hs_ctx_init(&a, 0, 2, "job", "tok");
  coll__tcp_hs_ctx_init(&c, 1, 2, "job", "tok");
  coll__tcp_hs_ctx_init(&imp, 0, 2, "job", NULL);
  coll__tcp_hs_nonce(ns1);
  coll__tcp_hs_nonce(ns2);
  coll__tcp_hs_nonce(nc);
  coll__tcp_hs_hello(&c, 0, ns1, nc, he);
  assert_int_equal(coll__tcp_hs_check_hello(&a, he, ns2, &peer, seen),
                   COLL_TCP_HS_BAD_AUTH);
  assert_int_equal(coll__tcp_hs_check_hello(&a, he, ns1, &peer, seen),
                   COLL_TCP_HS_OK);
  coll__tcp_hs_welcome(&imp, 1, COLL_TCP_HS_OK, ns1, nc, we);
  assert_int_equal(
      coll__tcp_hs_check_welcome(&c, we, 0, ns1, nc, why, sizeof why),
      COLL_ERR_PROTOCOL);
  assert_non_null(strstr(why, "token"));
  /* Garbage instead of a hello. */
  memset(he, 0x41, sizeof he);
  assert_int_equal(coll__tcp_hs_check_hello(&a, he, ns1, &peer, seen),
                   COLL_TCP_HS_BAD_MAGIC);
  coll__tcp_hs_hello(&c, 0, ns1, nc, he);
  he[4] = 9; /* another wire version */
  assert_int_equal(coll__tcp_hs_check_hello(&a, he, ns1, &peer, seen),
                   COLL_TCP_HS_BAD_VERSION);
}

static void roundtrip(const char *text, const char *want) {
  struct sockaddr_storage ss;
  socklen_t len;
  char out[COLL_TCP_ADDR_MAX];
  assert_int_equal(coll__tcp_addr_parse(text, &ss, &len), COLL_OK);
  coll__tcp_addr_format((struct sockaddr *)&ss, out, sizeof out);
  assert_string_equal(out, want);
}

static void test_addr_text(void **state) {
  struct sockaddr_storage ss;
  socklen_t len;
  const char *bad[] = {"1.2.3.4",       "1.2.3.4:",    "1.2.3.4:0",
                       "1.2.3.4:65536", "[::1]5678",   "[::1:5678",
                       "host:80",       "::1:5678",    ":80",
                       "1.2.3.4:80x",   "999.1.1.1:80"};
  size_t i;
  (void)state;
  roundtrip("127.0.0.1:5678", "127.0.0.1:5678");
  roundtrip("[::1]:80", "[::1]:80");
  roundtrip("[0:0:0:0:0:0:0:1]:65535", "[::1]:65535");
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(coll__tcp_addr_parse(bad[i], &ss, &len),
                     COLL_ERR_INVALID_ARG);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sha256_vectors),
      cmocka_unit_test(test_hmac_vectors),
      cmocka_unit_test(test_frame_layout),
      cmocka_unit_test(test_bye_layout),
      cmocka_unit_test(test_handshake_verdicts),
      cmocka_unit_test(test_handshake_replay_and_impostor),
      cmocka_unit_test(test_addr_text),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]); /* e.g. "*kill*" */
  return cmocka_run_group_tests(tests, NULL, NULL);
}
