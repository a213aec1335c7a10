/* SPDX-License-Identifier: Apache-2.0 */
/* sha256.h: SHA-256 and HMAC-SHA-256 (FIPS 180-4, RFC 2104) for the
 * handshakes' job hash and token proofs (the TCP transport's and the
 * rendezvous store's). Pure functions; any thread. */
#ifndef COLL_CORE_SHA256_H
#define COLL_CORE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define COLL_SHA256_BYTES 32
#define COLL_SHA256_BLOCK 64

typedef struct coll_sha256 {
  uint32_t h[8];
  uint64_t total; /* bytes hashed so far */
  uint8_t block[COLL_SHA256_BLOCK];
  size_t fill;
} coll_sha256_t;

void coll__sha256_init(coll_sha256_t *s);
void coll__sha256_update(coll_sha256_t *s, const void *data, size_t len);
void coll__sha256_final(coll_sha256_t *s, uint8_t out[COLL_SHA256_BYTES]);
/* One-shot digest. */
void coll__sha256(const void *data, size_t len, uint8_t out[COLL_SHA256_BYTES]);

/* HMAC-SHA-256 over the concatenation of n parts. */
typedef struct coll_bytes {
  const void *p;
  size_t len;
} coll_bytes_t;
void coll__hmac_sha256(const void *key, size_t key_len,
                       const coll_bytes_t *parts, int n,
                       uint8_t out[COLL_SHA256_BYTES]);

/* 1 when the n bytes are equal, in time independent of where they differ. */
int coll__bytes_equal_ct(const uint8_t *a, const uint8_t *b, size_t n);

#endif
