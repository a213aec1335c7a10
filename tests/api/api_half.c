/* SPDX-License-Identifier: Apache-2.0 */
/* api_half.c: the tests' own f16/bf16 conversions and element access,
 * written independently of the library's (a reference must not share the
 * mistakes of what it checks). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "api_test.h"

/* ---- half precision ---------------------------------------------------- */

/* 2^k for the normal double range, built from its bits (exact, and much
 * cheaper than ldexp in the reference's inner loop). */
static double pow2i(int k) {
  uint64_t b = (uint64_t)(k + 1023) << 52;
  double d;
  memcpy(&d, &b, 8);
  return d;
}

/* floor(log2 |v|) for a finite, non-zero v. */
static int exponent_of(double v) {
  uint64_t b;
  int e;
  memcpy(&b, &v, 8);
  if (((b >> 52) & 0x7ff) == 0) { /* a double subnormal: not on a hot path */
    (void)frexp(v, &e);
    return e - 1;
  }
  return (int)((b >> 52) & 0x7ff) - 1023;
}

/* v rounded to nearest even on the grid of a binary format with p
 * significand bits (hidden bit included), smallest normal exponent emin and
 * largest exponent emax; overflow gives infinity. Scaling by powers of two
 * and rint() are exact, so this is one correct rounding. */
static double round_fmt(double v, int p, int emin, int emax) {
  int e;
  double q, r, maxv;
  if (isnan(v) || isinf(v) || v == 0.0) return v;
  e = exponent_of(v); /* |v| in [2^e, 2^(e+1)) */
  if (e < emin) e = emin;
  q = pow2i(e - (p - 1));
  r = rint(v / q) * q;
  maxv = (2.0 - pow2i(1 - p)) * pow2i(emax);
  if (fabs(r) > maxv) return copysign(INFINITY, v);
  return r;
}

/* Bits of a value already on the format's grid (bias = -emin + 1). */
static uint16_t encode_fmt(double r, int p, int emin) {
  uint16_t sign = signbit(r) ? 0x8000 : 0;
  int bias = 1 - emin, e, expbits = 15 - (p - 1);
  uint16_t expmax = (uint16_t)((1u << expbits) - 1);
  double a = fabs(r);
  if (isnan(r)) return (uint16_t)(sign | (expmax << (p - 1)) | (1u << (p - 2)));
  if (isinf(r)) return (uint16_t)(sign | (expmax << (p - 1)));
  if (a == 0.0) return sign;
  e = exponent_of(a);
  if (e < emin) return (uint16_t)(sign | (uint16_t)(a / pow2i(emin - (p - 1))));
  return (uint16_t)(sign | ((uint16_t)(e + bias) << (p - 1)) |
                    (uint16_t)((a / pow2i(e) - 1.0) * pow2i(p - 1)));
}

static double decode_fmt(uint16_t h, int p, int emin) {
  int bias = 1 - emin, expbits = 15 - (p - 1);
  unsigned expmax = (1u << expbits) - 1;
  unsigned ex = (h >> (p - 1)) & expmax, man = h & ((1u << (p - 1)) - 1);
  double v;
  if (ex == expmax)
    v = man ? NAN : INFINITY;
  else if (ex == 0)
    v = (double)man * pow2i(emin - (p - 1));
  else
    v = (1.0 + (double)man * pow2i(-(p - 1))) * pow2i((int)ex - bias);
  return (h & 0x8000) ? -v : v;
}

uint16_t t_f32_to_f16(float f) {
  return encode_fmt(round_fmt((double)f, 11, -14, 15), 11, -14);
}
float t_f16_to_f32(uint16_t h) { return (float)decode_fmt(h, 11, -14); }
uint16_t t_f32_to_bf16(float f) {
  return encode_fmt(round_fmt((double)f, 8, -126, 127), 8, -126);
}
float t_bf16_to_f32(uint16_t h) { return (float)decode_fmt(h, 8, -126); }

/* ---- elements ---------------------------------------------------------- */

int t_is_float(coll_dtype_t dt) {
  return dt == COLL_F16 || dt == COLL_BF16 || dt == COLL_F32 || dt == COLL_F64;
}

size_t t_size(coll_dtype_t dt) {
  switch (dt) {
    case COLL_F16:
    case COLL_BF16: return 2;
    case COLL_F32:
    case COLL_I32: return 4;
    case COLL_F64:
    case COLL_I64: return 8;
    case COLL_I8:
    case COLL_U8: return 1;
    default: return 0;
  }
}

double t_round(coll_dtype_t dt, double v) {
  switch (dt) {
    case COLL_F16: return round_fmt(v, 11, -14, 15);
    case COLL_BF16: return round_fmt(v, 8, -126, 127);
    case COLL_F32: return (double)(float)v;
    default: return v;
  }
}

double t_load_f(coll_dtype_t dt, const void *buf, size_t i) {
  const char *p = (const char *)buf + i * t_size(dt);
  uint16_t h;
  float f;
  double d;
  switch (dt) {
    case COLL_F16: memcpy(&h, p, 2); return decode_fmt(h, 11, -14);
    case COLL_BF16: memcpy(&h, p, 2); return decode_fmt(h, 8, -126);
    case COLL_F32: memcpy(&f, p, 4); return f;
    default: memcpy(&d, p, 8); return d;
  }
}

void t_store_f(coll_dtype_t dt, void *buf, size_t i, double v) {
  char *p = (char *)buf + i * t_size(dt);
  uint16_t h;
  float f;
  switch (dt) {
    case COLL_F16:
      h = encode_fmt(round_fmt(v, 11, -14, 15), 11, -14);
      memcpy(p, &h, 2);
      break;
    case COLL_BF16:
      h = encode_fmt(round_fmt(v, 8, -126, 127), 8, -126);
      memcpy(p, &h, 2);
      break;
    case COLL_F32:
      f = (float)v;
      memcpy(p, &f, 4);
      break;
    default: memcpy(p, &v, 8); break;
  }
}

int64_t t_load_i(coll_dtype_t dt, const void *buf, size_t i) {
  const char *p = (const char *)buf + i * t_size(dt);
  int8_t i8;
  uint8_t u8;
  int32_t i32;
  int64_t i64;
  switch (dt) {
    case COLL_I8: memcpy(&i8, p, 1); return i8;
    case COLL_U8: memcpy(&u8, p, 1); return u8;
    case COLL_I32: memcpy(&i32, p, 4); return i32;
    default: memcpy(&i64, p, 8); return i64;
  }
}

void t_store_i(coll_dtype_t dt, void *buf, size_t i, int64_t v) {
  char *p = (char *)buf + i * t_size(dt);
  uint64_t u = (uint64_t)v;
  uint8_t b = (uint8_t)u;
  uint32_t w = (uint32_t)u;
  switch (dt) {
    case COLL_I8:
    case COLL_U8: memcpy(p, &b, 1); break;
    case COLL_I32: memcpy(p, &w, 4); break;
    default: memcpy(p, &u, 8); break;
  }
}

void t_fmt(coll_dtype_t dt, const void *buf, size_t i, char *out, size_t cap) {
  const unsigned char *p = (const unsigned char *)buf + i * t_size(dt);
  uint64_t bits = 0;
  memcpy(&bits, p, t_size(dt)); /* little-endian host */
  if (t_is_float(dt))
    snprintf(out, cap, "%.17g (0x%0*" PRIx64 ")", t_load_f(dt, buf, i),
             (int)(2 * t_size(dt)), bits);
  else
    snprintf(out, cap, "%" PRId64, t_load_i(dt, buf, i));
}
