/* SPDX-License-Identifier: Apache-2.0 */
/* store_parse.h: the store server's judgement of a request's bytes as pure
 * functions (no connection, no socket), so that the server and the store
 * fuzzer run the same code. Any thread. */
#ifndef COLL_BOOTSTRAP_STORE_PARSE_H
#define COLL_BOOTSTRAP_STORE_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap/store/store_proto.h"

/* The body of a client's HELLO: its nonce and its MAC. */
#define COLL_STORE_HELLO_BODY (COLL_STORE_NONCE_BYTES + COLL_STORE_MAC_BYTES)

/* One key of a request: where its bytes are in the body. */
typedef struct store_key {
  uint32_t off; /* offset of the key bytes in the body */
  uint16_t len;
} store_key_t;

/* Decodes the header in `in` into *h and checks it before anything is
 * allocated for its body: the magic, the version, HELLO first (until
 * `authed`), a known op with a sane number of keys, and a body length the
 * op allows. Returns 0, or -1 with a sentence in why. */
int coll__store_check_hdr(const uint8_t in[COLL_STORE_HDR_BYTES], int authed,
                          coll_store_hdr_t *h, char *why, size_t cap);

/* Splits the first nkeys keys off a body of len bytes into keys[0..nkeys):
 * each a u16 length and 1..COLL_STORE_KEY_MAX bytes without NUL. Returns
 * 0 and *end (the offset of what follows the keys), or -1 and *bad (the
 * index of the first malformed key). */
int coll__store_split_keys(const uint8_t *body, size_t len, uint16_t nkeys,
                           store_key_t *keys, size_t *end, int *bad);

#endif
