/* SPDX-License-Identifier: Apache-2.0 */
/* ref.c: reference numerics and test inputs for the reduction tests. */
#include "ref.h"

#include <math.h>
#include <string.h>

#include "test_util.h"

double ref_f16_to_double(uint16_t h) {
  int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v;
  if (exp == 0x1f)
    v = man != 0 ? NAN : INFINITY;
  else if (exp == 0)
    v = ldexp(man, -24);
  else
    v = ldexp(1024 + man, exp - 25);
  return (h & 0x8000) ? -v : v;
}

double ref_bf16_to_double(uint16_t h) {
  int exp = (h >> 7) & 0xff, man = h & 0x7f;
  double v;
  if (exp == 0xff)
    v = man != 0 ? NAN : INFINITY;
  else if (exp == 0)
    v = ldexp(man, -133);
  else
    v = ldexp(128 + man, exp - 134);
  return (h & 0x8000) ? -v : v;
}

/* Rounds |x| to a format with p significand bits, smallest normal exponent
 * emin and exponent bias `bias`; `inf_at` is the first magnitude that
 * rounds to infinity. Returns the bits without the sign. */
static uint16_t round_small_float(double a, int p, int emin, int bias,
                                  double inf_at) {
  int e;
  double q;
  if (a >= inf_at) return (uint16_t)(((2 * bias + 1) << (p - 1)));
  if (a < ldexp(1, emin)) /* denormal: a multiple of 2^(emin - p + 1) */
    return (uint16_t)nearbyint(ldexp(a, p - 1 - emin));
  frexp(a, &e);                   /* a in [2^(e-1), 2^e) */
  q = nearbyint(ldexp(a, p - e)); /* in [2^(p-1), 2^p] */
  if (q == ldexp(1, p)) {
    q = ldexp(1, p - 1);
    e++;
  }
  return (uint16_t)(((e - 1 + bias) << (p - 1)) | ((int)q - (1 << (p - 1))));
}

uint16_t ref_f16_from_double(double x) {
  uint16_t sign = signbit(x) ? 0x8000 : 0;
  return (uint16_t)(sign | round_small_float(fabs(x), 11, -14, 15, 65520.0));
}

uint16_t ref_bf16_from_double(double x) {
  uint16_t sign = signbit(x) ? 0x8000 : 0;
  return (uint16_t)(sign |
                    round_small_float(fabs(x), 8, -126, 127, ldexp(511, 119)));
}

/* IEEE 754-2019 maximum/minimum of non-NaN values: +0 > -0. */
static double ref_max(double a, double b) {
  if (a > b) return a;
  if (b > a) return b;
  return signbit(a) ? b : a;
}

static double ref_min(double a, double b) {
  if (a < b) return a;
  if (b < a) return b;
  return signbit(a) ? a : b;
}

/* One float op. SUM and PROD are exact in __float128 for f64 operands (and
 * exact or innocuously rounded in it for narrower ones); the caller rounds
 * once to the destination format. */
static __float128 ref_combine(coll_op_t op, double a, double b) {
  if (isnan(a) || isnan(b)) return NAN;
  switch (op) {
    case COLL_SUM: return (__float128)a + (__float128)b;
    case COLL_PROD: return (__float128)a * (__float128)b;
    case COLL_MAX: return ref_max(a, b);
    default: return ref_min(a, b);
  }
}

static double get_float(coll_dtype_t dt, const void *p, size_t i) {
  switch (dt) {
    case COLL_F16: return ref_f16_to_double(((const uint16_t *)p)[i]);
    case COLL_BF16: return ref_bf16_to_double(((const uint16_t *)p)[i]);
    case COLL_F32: return ((const float *)p)[i];
    default: return ((const double *)p)[i];
  }
}

/* Stores r rounded to dt; f16/bf16 go through f32 first, as the contract
 * says (widen, combine in f32, round back). NaN becomes the canonical NaN. */
static void put_result(coll_dtype_t dt, void *p, size_t i, __float128 r) {
  uint32_t n32 = REF_NAN_F32;
  uint64_t n64 = REF_NAN_F64;
  int nan = r != r;
  switch (dt) {
    case COLL_F16:
      ((uint16_t *)p)[i] =
          nan ? REF_NAN_F16 : ref_f16_from_double((double)(float)r);
      break;
    case COLL_BF16:
      ((uint16_t *)p)[i] =
          nan ? REF_NAN_BF16 : ref_bf16_from_double((double)(float)r);
      break;
    case COLL_F32:
      if (nan)
        memcpy((float *)p + i, &n32, 4);
      else
        ((float *)p)[i] = (float)r;
      break;
    default:
      if (nan)
        memcpy((double *)p + i, &n64, 8);
      else
        ((double *)p)[i] = (double)r;
      break;
  }
}

/* Integers: the exact result wrapped into the dtype's range modulo 2^bits. */
static __int128 get_int(coll_dtype_t dt, const void *p, size_t i) {
  switch (dt) {
    case COLL_I8: return ((const int8_t *)p)[i];
    case COLL_U8: return ((const uint8_t *)p)[i];
    case COLL_I32: return ((const int32_t *)p)[i];
    default: return ((const int64_t *)p)[i];
  }
}

static void put_int(coll_dtype_t dt, void *p, size_t i, __int128 x) {
  int bits = dt == COLL_I64 ? 64 : dt == COLL_I32 ? 32 : 8;
  __int128 mod = (__int128)1 << bits, m = x % mod;
  if (m < 0) m += mod;
  if (dt != COLL_U8 && m >= mod / 2) m -= mod;
  switch (dt) {
    case COLL_I8: ((int8_t *)p)[i] = (int8_t)m; break;
    case COLL_U8: ((uint8_t *)p)[i] = (uint8_t)m; break;
    case COLL_I32: ((int32_t *)p)[i] = (int32_t)m; break;
    default: ((int64_t *)p)[i] = (int64_t)m; break;
  }
}

static __int128 int_combine(coll_op_t op, __int128 a, __int128 b) {
  switch (op) {
    case COLL_SUM: return a + b;
    case COLL_PROD: return a * b;
    case COLL_MAX: return a > b ? a : b;
    default: return a < b ? a : b;
  }
}

static int is_float(coll_dtype_t dt) { return dt <= COLL_F64; }

void ref_reduce(coll_dtype_t dt, coll_op_t op, void *dst, const void *src,
                size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (is_float(dt))
      put_result(dt, dst, i,
                 ref_combine(op, get_float(dt, dst, i), get_float(dt, src, i)));
    else
      put_int(dt, dst, i,
              int_combine(op, get_int(dt, dst, i), get_int(dt, src, i)));
  }
}

/* f16, bf16 and f32 scale by (float)factor; the product of two f32 values is
 * exact in double, so the only rounding is put_result's. */
void ref_scale(coll_dtype_t dt, void *dst, const void *src, size_t n,
               double factor) {
  double f = dt == COLL_F64 ? factor : (double)(float)factor;
  for (size_t i = 0; i < n; i++)
    put_result(dt, dst, i, ref_combine(COLL_PROD, get_float(dt, src, i), f));
}
