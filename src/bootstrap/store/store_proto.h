/* SPDX-License-Identifier: Apache-2.0 */
/* store_proto.h: the rendezvous store's wire format, shared by server and
 * client.
 *
 * Every message, in both directions, is a 24-byte little-endian header and a
 * body of body_len bytes:
 *
 *   u32 magic     COLL_STORE_MAGIC
 *   u8  version   COLL_STORE_VERSION
 *   u8  code      request: an op; response: a status
 *   u16 nkeys     request: number of keys at the start of the body
 *   u32 body_len  bytes that follow
 *   u32 reserved  0
 *   i64 arg       request: timeout_ms (GET, WAIT) or delta (ADD);
 *                 response: the counter (ADD) or flags (HELLO)
 *
 * A request body starts with nkeys keys, each a u16 length and that many
 * bytes (1..COLL_STORE_KEY_MAX, no NUL), followed for SET by the value.
 *
 * Connection start (challenge-response, the token never travels):
 *   server -> client  HELLO, arg = flags (bit 0: token required),
 *                     body = server nonce (32 bytes)
 *   client -> server  HELLO, arg = flags (bit 0: client has a token) and,
 *                     in bits 32..62, the rank the client says it is,
 *                     plus one (0: none; for messages only, never
 *                     trusted), body = client nonce (32) + HMAC-SHA256(token,
 *                     "coll-store-client" | server nonce | client nonce)
 *   server -> client  status OK, body = HMAC-SHA256(token,
 *                     "coll-store-server" | client nonce | server nonce),
 *                     or status AUTH with a text and the server closes.
 * Without a token both MACs are all zero. Each side proves it knows the
 * token without sending it, and neither MAC can be replayed because each
 * covers the other side's fresh nonce. */
#ifndef COLL_BOOTSTRAP_STORE_PROTO_H
#define COLL_BOOTSTRAP_STORE_PROTO_H

#include <stdint.h>
#include <string.h>

#include "bootstrap/store/store.h"
#include "core/le.h"

#define COLL_STORE_MAGIC 0x54534c43u /* "CLST" read little-endian */
#define COLL_STORE_VERSION 1u
#define COLL_STORE_HDR_BYTES 24u
#define COLL_STORE_NONCE_BYTES 32u
#define COLL_STORE_MAC_BYTES 32u
#define COLL_STORE_FLAG_TOKEN 1u
#define COLL_STORE_CLAIM_SHIFT 32

/* The largest body a request may claim: one key and a full value. WAIT may
 * carry many keys in it; the client splits longer lists. */
#define COLL_STORE_BODY_MAX \
  (2u + COLL_STORE_KEY_MAX + (uint32_t)COLL_STORE_VALUE_MAX)
/* Keys one WAIT request may name (the body cap bounds it first). */
#define COLL_STORE_WAIT_KEYS_MAX 4096u

typedef enum coll_store_op {
  COLL_STORE_OP_HELLO = 1,
  COLL_STORE_OP_SET = 2,
  COLL_STORE_OP_GET = 3,  /* waits for the key, then returns its value */
  COLL_STORE_OP_WAIT = 4, /* waits for every key */
  COLL_STORE_OP_ADD = 5   /* atomic add on a decimal counter */
} coll_store_op_t;

typedef enum coll_store_code {
  COLL_STORE_ST_OK = 0,
  COLL_STORE_ST_TIMEOUT = 1, /* body: u32 indices of the keys still missing */
  COLL_STORE_ST_BAD = 2,     /* body: text; the server closes */
  COLL_STORE_ST_AUTH = 3,    /* body: text; the server closes */
  COLL_STORE_ST_NOTNUM = 4   /* ADD on a key that is not a counter */
} coll_store_code_t;

typedef struct coll_store_hdr {
  uint32_t magic;
  uint8_t version;
  uint8_t code;
  uint16_t nkeys;
  uint32_t body_len;
  int64_t arg;
} coll_store_hdr_t;

static inline void coll__store_hdr_encode(uint8_t *p,
                                          const coll_store_hdr_t *h) {
  coll__put_le32(p, h->magic);
  p[4] = h->version;
  p[5] = h->code;
  coll__put_le16(p + 6, h->nkeys);
  coll__put_le32(p + 8, h->body_len);
  coll__put_le32(p + 12, 0);
  coll__put_le64(p + 16, (uint64_t)h->arg);
}

static inline void coll__store_hdr_decode(const uint8_t *p,
                                          coll_store_hdr_t *h) {
  h->magic = coll__get_le32(p);
  h->version = p[4];
  h->code = p[5];
  h->nkeys = coll__get_le16(p + 6);
  h->body_len = coll__get_le32(p + 8);
  h->arg = (int64_t)coll__get_le64(p + 16);
}

/* A fresh header for `code` with the magic and version filled in. */
static inline coll_store_hdr_t coll__store_hdr(uint8_t code, uint16_t nkeys,
                                               uint32_t body_len, int64_t arg) {
  coll_store_hdr_t h;
  h.magic = COLL_STORE_MAGIC;
  h.version = COLL_STORE_VERSION;
  h.code = code;
  h.nkeys = nkeys;
  h.body_len = body_len;
  h.arg = arg;
  return h;
}

#endif
