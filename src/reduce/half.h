/* SPDX-License-Identifier: Apache-2.0 */
/* half.h: inline f16/bf16 <-> f32 conversions shared by every kernel.
 *
 * They are the bit-level definitions the SIMD paths must reproduce: round to
 * nearest even (denormals kept, overflow to infinity), NaN quieted with its
 * sign and top payload bits kept, which is what F16C's vcvtps2ph/vcvtph2ps
 * do. They are inline so that the scalar kernels and the SIMD tails use the
 * very same code. */
#ifndef COLL_REDUCE_HALF_H
#define COLL_REDUCE_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t coll__f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float coll__bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline uint64_t coll__f64_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

static inline double coll__bits_f64(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

static inline float coll__h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f) /* infinity, or NaN made quiet */
    return coll__bits_f32(sign | 0x7f800000u | (man << 13) |
                          (man != 0 ? 0x400000u : 0));
  if (exp == 0) { /* zero or denormal: man * 2^-24, exact in f32 */
    float f = (float)man * 0x1p-24f;
    return coll__bits_f32(sign | coll__f32_bits(f));
  }
  return coll__bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

/* Rounds the f16 denormal range (|f| < 2^-14) by hand: u is |f|'s bits. */
static inline uint16_t coll__f2h_small(uint32_t u) {
  uint32_t e = u >> 23, m, s, q, rem, half;
  if (u <= 0x33000000u) return 0; /* <= 2^-25: ties to the even zero */
  m = (u & 0x7fffffu) | 0x800000u;
  s = 126u - e; /* |f| / 2^-24 = m * 2^(e - 126); 14 <= s <= 24 here */
  q = m >> s;
  rem = m & ((1u << s) - 1u);
  half = 1u << (s - 1u);
  if (rem > half || (rem == half && (q & 1u) != 0)) q++;
  return (uint16_t)q; /* q == 0x400 is the smallest normal: still right */
}

static inline uint16_t coll__f2h(float f) {
  uint32_t u = coll__f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) /* NaN: keep the top payload bits, set quiet */
    return (uint16_t)(sign | 0x7e00u | ((u >> 13) & 0x3ffu));
  if (u >= 0x477ff000u) /* >= 65520, halfway past the largest f16: inf */
    return (uint16_t)(sign | 0x7c00u);
  if (u >= 0x38800000u) { /* normal f16: rebias, then round on bit 13 */
    uint32_t v = u - 0x38000000u;
    v += 0xfffu + ((v >> 13) & 1u);
    return (uint16_t)(sign | (v >> 13));
  }
  return (uint16_t)(sign | coll__f2h_small(u));
}

static inline float coll__bf2f(uint16_t h) {
  return coll__bits_f32((uint32_t)h << 16);
}

static inline uint16_t coll__f2bf(float f) {
  uint32_t u = coll__f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: truncate, keep it quiet */
    return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u); /* RNE on bit 16; may carry into inf */
  return (uint16_t)(u >> 16);
}

#endif
