/* SPDX-License-Identifier: Apache-2.0 */
/* sha256.c: SHA-256 and HMAC-SHA-256, written from FIPS 180-4 and
 * RFC 2104 (libc has neither, and one handshake needs only a few blocks). */
#include "core/sha256.h"

#include <string.h>

/* First 32 bits of the fractional parts of the cube roots of the first 64
 * primes (FIPS 180-4, 4.2.2). */
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static uint32_t load_be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         (uint32_t)p[3];
}

static void store_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

/* One 64-byte block into the state (FIPS 180-4, 6.2.2). */
static void compress(uint32_t h[8], const uint8_t *blk) {
  uint32_t w[64], a, b, c, d, e, f, g, hh, t1, t2;
  int i;
  for (i = 0; i < 16; i++) w[i] = load_be32(blk + 4 * i);
  for (i = 16; i < 64; i++) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  a = h[0], b = h[1], c = h[2], d = h[3];
  e = h[4], f = h[5], g = h[6], hh = h[7];
  for (i = 0; i < 64; i++) {
    t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) +
         K[i] + w[i];
    t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) +
         ((a & b) ^ (a & c) ^ (b & c));
    hh = g, g = f, f = e, e = d + t1;
    d = c, c = b, b = a, a = t1 + t2;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d;
  h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

void coll__sha256_init(coll_sha256_t *s) {
  static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372,
                                 0xa54ff53a, 0x510e527f, 0x9b05688c,
                                 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, iv, sizeof iv);
  s->total = 0;
  s->fill = 0;
}

void coll__sha256_update(coll_sha256_t *s, const void *data, size_t len) {
  const uint8_t *p = data;
  s->total += len;
  while (len > 0) {
    size_t take = COLL_SHA256_BLOCK - s->fill;
    if (take > len) take = len;
    memcpy(s->block + s->fill, p, take);
    s->fill += take;
    p += take;
    len -= take;
    if (s->fill == COLL_SHA256_BLOCK) {
      compress(s->h, s->block);
      s->fill = 0;
    }
  }
}

void coll__sha256_final(coll_sha256_t *s, uint8_t out[COLL_SHA256_BYTES]) {
  uint64_t bits = s->total * 8;
  uint8_t pad = 0x80;
  int i;
  coll__sha256_update(s, &pad, 1);
  pad = 0;
  while (s->fill != COLL_SHA256_BLOCK - 8) coll__sha256_update(s, &pad, 1);
  for (i = 7; i >= 0; i--) {
    uint8_t b = (uint8_t)(bits >> (8 * i));
    coll__sha256_update(s, &b, 1);
  }
  for (i = 0; i < 8; i++) store_be32(out + 4 * i, s->h[i]);
}

void coll__sha256(const void *data, size_t len,
                  uint8_t out[COLL_SHA256_BYTES]) {
  coll_sha256_t s;
  coll__sha256_init(&s);
  coll__sha256_update(&s, data, len);
  coll__sha256_final(&s, out);
}

void coll__hmac_sha256(const void *key, size_t key_len,
                       const coll_bytes_t *parts, int n,
                       uint8_t out[COLL_SHA256_BYTES]) {
  uint8_t k[COLL_SHA256_BLOCK] = {0}, pad[COLL_SHA256_BLOCK];
  uint8_t inner[COLL_SHA256_BYTES];
  coll_sha256_t s;
  int i;
  /* Keys longer than a block are hashed first (RFC 2104, section 2). */
  if (key_len > COLL_SHA256_BLOCK)
    coll__sha256(key, key_len, k);
  else if (key_len > 0)
    memcpy(k, key, key_len);
  for (i = 0; i < COLL_SHA256_BLOCK; i++) pad[i] = k[i] ^ 0x36;
  coll__sha256_init(&s);
  coll__sha256_update(&s, pad, sizeof pad);
  for (i = 0; i < n; i++) coll__sha256_update(&s, parts[i].p, parts[i].len);
  coll__sha256_final(&s, inner);
  for (i = 0; i < COLL_SHA256_BLOCK; i++) pad[i] = k[i] ^ 0x5c;
  coll__sha256_init(&s);
  coll__sha256_update(&s, pad, sizeof pad);
  coll__sha256_update(&s, inner, sizeof inner);
  coll__sha256_final(&s, out);
}

int coll__bytes_equal_ct(const uint8_t *a, const uint8_t *b, size_t n) {
  uint8_t diff = 0;
  size_t i;
  for (i = 0; i < n; i++) diff |= (uint8_t)(a[i] ^ b[i]);
  return diff == 0;
}
