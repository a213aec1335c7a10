/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_seeds.c: writes the seed corpus of the fuzz targets, a few valid
 * messages each, built with the library's own encoders:
 *   fuzz_seeds DIR  ->  DIR/tcp_frame/, DIR/tcp_handshake/, DIR/store_request/,
 *                       DIR/shrink_msg/
 * The committed corpus under tests/fuzz/corpus/ came from it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "bootstrap/store/store_parse.h"
#include "core/le.h"
#include "fuzz_hs_fixture.h"
#include "transport/common/shrink_agree.h"
#include "transport/tcp/wire.h"

static const char *g_dir;

static int put(const char *target, const char *name, const uint8_t *p,
               size_t n) {
  char path[4096];
  FILE *f;
  snprintf(path, sizeof path, "%s/%s", g_dir, target);
  if (mkdir(path, 0755) != 0 && errno != EEXIST) return -1;
  snprintf(path, sizeof path, "%s/%s/%s", g_dir, target, name);
  f = fopen(path, "wb");
  if (f == NULL) return -1;
  if (n > 0 && fwrite(p, 1, n, f) != n) {
    fclose(f);
    return -1;
  }
  return fclose(f);
}

/* Frame seeds: 3 option bytes, then frames from rank 1. */
static size_t frame(uint8_t *p, uint8_t kind, uint8_t flags, uint32_t tag,
                    const char *payload, size_t n) {
  coll__tcp_frame_encode(p, kind, flags, 1, tag, n);
  memcpy(p + COLL_TCP_FRAME_BYTES, payload, n);
  return COLL_TCP_FRAME_BYTES + n;
}

static int frame_seeds(void) {
  uint8_t b[512];
  size_t n;
  int rc = 0;
  /* One message to a posted receive (tag 0, capacity 7 * 16 bytes). */
  b[0] = 1 << 1, b[1] = 16, b[2] = 4;
  n = 3 + frame(b + 3, COLL_TCP_K_DATA, 0, 0, "hello", 5);
  rc |= put("tcp_frame", "data_posted", b, n);
  /* An early message in two frames, then a goodbye. */
  b[0] = 0, b[1] = 8, b[2] = 0;
  n = 3;
  n += frame(b + n, COLL_TCP_K_DATA, COLL_TCP_F_MORE, 2, "abcdefgh", 8);
  n += frame(b + n, COLL_TCP_K_CONT, 0, 2, "ijkl", 4);
  n += frame(b + n, COLL_TCP_K_GOODBYE, 0, 0, "", 0);
  rc |= put("tcp_frame", "early_cont_goodbye", b, n);
  /* Two messages of different tags, the first too long for its receive. */
  b[0] = 2 << 1, b[1] = 1, b[2] = 1;
  n = 3;
  n += frame(b + n, COLL_TCP_K_DATA, 0, 0, "0123456789", 10);
  n += frame(b + n, COLL_TCP_K_DATA, 0, 1, "xy", 2);
  rc |= put("tcp_frame", "too_long_then_next", b, n);
  /* A desync query, an answer, then a report and a goodbye. */
  {
    static const char rep[] =
        "allreduce #2 timed out after 1.0 s: ranks 0,1 "
        "are in it";
    coll_tcp_pos_t pos;
    uint8_t pb[COLL_TCP_POS_BYTES];
    memset(&pos, 0, sizeof pos);
    pos.seq = 2;
    pos.count = 1024;
    pos.kind = 1;
    pos.in_call = 1;
    coll__tcp_pos_encode(pb, &pos);
    b[0] = 0, b[1] = 4, b[2] = 2;
    n = 3;
    n += frame(b + n, COLL_TCP_K_QUERY, 0, 0, "", 0);
    n += frame(b + n, COLL_TCP_K_POSITION, 0, 0, (const char *)pb, sizeof pb);
    n += frame(b + n, COLL_TCP_K_REPORT, 0, 0, rep, sizeof rep - 1);
    n += frame(b + n, COLL_TCP_K_GOODBYE, 0, 0, "", 0);
    rc |= put("tcp_frame", "query_position_report", b, n);
  }
  return rc;
}

static int hs_seeds(void) {
  uint8_t b[1 + COLL_TCP_HELLO_BYTES];
  uint8_t nonce_s[COLL_TCP_NONCE_BYTES], nonce_c[COLL_TCP_NONCE_BYTES];
  coll_tcp_hs_ctx_t acc, con;
  int token, rc = 0;
  for (token = 0; token < 2; token++) {
    char name[32];
    coll__fuzz_hs_fixture(token, &acc, &con, nonce_s, nonce_c);
    b[0] = (uint8_t)(0 | token << 2);
    coll__tcp_hs_hello(&con, acc.rank, nonce_s, nonce_c, b + 1);
    snprintf(name, sizeof name, "hello_token%d", token);
    rc |= put("tcp_handshake", name, b, 1 + COLL_TCP_HELLO_BYTES);
    b[0] = (uint8_t)(1 | token << 2);
    coll__tcp_hs_challenge(&acc, nonce_s, b + 1);
    snprintf(name, sizeof name, "challenge_token%d", token);
    rc |= put("tcp_handshake", name, b, 1 + COLL_TCP_CHALLENGE_BYTES);
    b[0] = (uint8_t)(2 | token << 2);
    coll__tcp_hs_welcome(&acc, con.rank, COLL_TCP_HS_OK, nonce_s, nonce_c,
                         b + 1);
    snprintf(name, sizeof name, "welcome_token%d", token);
    rc |= put("tcp_handshake", name, b, 1 + COLL_TCP_WELCOME_BYTES);
  }
  return rc;
}

/* A request: header, then keys (each a u16 length and bytes), then value. */
static size_t request(uint8_t *p, uint8_t op, int64_t arg, const char *const *k,
                      int nk, const char *val) {
  size_t off = COLL_STORE_HDR_BYTES, vlen = val ? strlen(val) : 0;
  coll_store_hdr_t h;
  int i;
  for (i = 0; i < nk; i++) {
    size_t kl = strlen(k[i]);
    coll__put_le16(p + off, (uint16_t)kl);
    memcpy(p + off + 2, k[i], kl);
    off += 2 + kl;
  }
  if (vlen > 0) memcpy(p + off, val, vlen);
  off += vlen;
  h = coll__store_hdr(op, (uint16_t)nk, (uint32_t)(off - COLL_STORE_HDR_BYTES),
                      arg);
  coll__store_hdr_encode(p, &h);
  return off;
}

static int store_seeds(void) {
  static const char *const one[] = {"rank/0"};
  static const char *const three[] = {"a", "rank/1", "rank/2"};
  uint8_t b[1024];
  size_t n;
  coll_store_hdr_t h =
      coll__store_hdr(COLL_STORE_OP_HELLO, 0, COLL_STORE_HELLO_BODY, 0);
  int rc = 0;
  coll__store_hdr_encode(b, &h);
  memset(b + COLL_STORE_HDR_BYTES, 0x11, COLL_STORE_HELLO_BODY);
  n = COLL_STORE_HDR_BYTES + COLL_STORE_HELLO_BODY;
  rc |= put("store_request", "hello", b, n);
  {
    size_t m = n;
    m += request(b + m, COLL_STORE_OP_SET, 0, one, 1, "10.0.0.1:29500");
    m += request(b + m, COLL_STORE_OP_GET, 1000, one, 1, NULL);
    rc |= put("store_request", "hello_set_get", b, m);
  }
  {
    size_t m = n;
    m += request(b + m, COLL_STORE_OP_ADD, 1, one, 1, NULL);
    m += request(b + m, COLL_STORE_OP_WAIT, 0, three, 3, NULL);
    rc |= put("store_request", "hello_add_wait", b, m);
  }
  return rc;
}

/* Agreement seeds: world 4, from rank 1: a HELLO, then an EST. */
static int shrink_seeds(void) {
  uint8_t b[2048];
  coll_shrink_view_t v;
  size_t n, m;
  int rc;
  if (coll__shrink_view_init(&v, 4) != COLL_OK) return -1;
  v.member[0] = v.member[1] = v.member[3] = 1;
  strcpy(v.addr[0], "127.0.0.1:4000");
  strcpy(v.addr[1], "127.0.0.1:4001");
  strcpy(v.addr[3], "[::1]:4003");
  b[0] = 3; /* world 4 */
  b[1] = 1; /* from rank 1 */
  n = coll__shrink_hello_encode(b + 6, sizeof b - 6, 1, v.addr[1]);
  coll__put_le32(b + 2, (uint32_t)n);
  m = coll__shrink_est_encode(b + 10 + n, sizeof b - 10 - n, 1, &v);
  coll__put_le32(b + 6 + n, (uint32_t)m);
  rc = put("shrink_msg", "hello", b, 6 + n);
  rc |= put("shrink_msg", "hello_est", b, 10 + n + m);
  coll__shrink_view_free(&v);
  return rc;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  if (mkdir(g_dir, 0755) != 0 && errno != EEXIST) {
    perror(g_dir);
    return 1;
  }
  if (frame_seeds() != 0 || hs_seeds() != 0 || store_seeds() != 0 ||
      shrink_seeds() != 0) {
    fprintf(stderr, "fuzz_seeds: cannot write under %s\n", g_dir);
    return 1;
  }
  return 0;
}
