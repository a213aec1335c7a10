/* SPDX-License-Identifier: Apache-2.0 */
/* store_parse.c: checking a store request's header and splitting its keys,
 * over bytes only. */
#include "bootstrap/store/store_parse.h"

#include <stdio.h>
#include <string.h>

int coll__store_check_hdr(const uint8_t in[COLL_STORE_HDR_BYTES], int authed,
                          coll_store_hdr_t *h, char *why, size_t cap) {
  uint32_t min_body = 0, max_body = COLL_STORE_BODY_MAX;
  coll__store_hdr_decode(in, h);
  if (h->magic != COLL_STORE_MAGIC) {
    snprintf(why, cap, "not a libcoll store message (magic 0x%08x)", h->magic);
    return -1;
  }
  if (h->version != COLL_STORE_VERSION) {
    snprintf(why, cap, "store protocol version %u; this server speaks %u",
             h->version, COLL_STORE_VERSION);
    return -1;
  }
  if (!authed) {
    if (h->code != COLL_STORE_OP_HELLO || h->nkeys != 0 ||
        h->body_len != COLL_STORE_HELLO_BODY) {
      snprintf(why, cap, "expected HELLO first, got op %u with %u bytes",
               h->code, h->body_len);
      return -1;
    }
    min_body = max_body = COLL_STORE_HELLO_BODY;
  } else {
    int one_key = h->code == COLL_STORE_OP_SET ||
                  h->code == COLL_STORE_OP_GET || h->code == COLL_STORE_OP_ADD;
    if (!one_key && h->code != COLL_STORE_OP_WAIT) {
      snprintf(why, cap, "unknown store op %u", h->code);
      return -1;
    }
    if ((one_key && h->nkeys != 1) ||
        (!one_key && (h->nkeys < 1 || h->nkeys > COLL_STORE_WAIT_KEYS_MAX))) {
      snprintf(why, cap, "op %u names %u keys", h->code, h->nkeys);
      return -1;
    }
    min_body = 3u * h->nkeys; /* each key: a u16 length and >= 1 byte */
  }
  if (h->body_len < min_body || h->body_len > max_body) {
    snprintf(why, cap, "request claims a %u-byte body; allowed %u..%u",
             h->body_len, min_body, max_body);
    return -1;
  }
  return 0;
}

int coll__store_split_keys(const uint8_t *body, size_t len, uint16_t nkeys,
                           store_key_t *keys, size_t *end, int *bad) {
  size_t off = 0;
  int i;
  for (i = 0; i < nkeys; i++) {
    size_t klen;
    if (len - off < 2) goto malformed;
    klen = coll__get_le16(body + off);
    off += 2;
    if (klen == 0 || klen > COLL_STORE_KEY_MAX || len - off < klen)
      goto malformed;
    if (memchr(body + off, '\0', klen) != NULL) goto malformed;
    keys[i].off = (uint32_t)off;
    keys[i].len = (uint16_t)klen;
    off += klen;
  }
  *end = off;
  return 0;
malformed:
  *bad = i;
  return -1;
}
