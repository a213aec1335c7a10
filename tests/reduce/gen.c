/* SPDX-License-Identifier: Apache-2.0 */
/* gen.c: test input pairs that reach the corners of the reduction kernels. */
#include <math.h>
#include <string.h>

#include "ref.h"
#include "test_util.h"

/* Significand bits (with the implicit one), exponent range. */
typedef struct {
  int p, emin, emax;
} fmt_t;

static fmt_t fmt_of(coll_dtype_t dt) {
  switch (dt) {
    case COLL_F16: return (fmt_t){11, -14, 15};
    case COLL_BF16: return (fmt_t){8, -126, 127};
    case COLL_F32: return (fmt_t){24, -126, 127};
    default: return (fmt_t){53, -1022, 1023};
  }
}

static int rand_int(uint64_t *rng, int lo, int hi) {
  return lo + (int)(test_rand(rng) % (uint64_t)(hi - lo + 1));
}

static void put_bits(coll_dtype_t dt, void *p, size_t i, uint64_t bits) {
  switch (dt) {
    case COLL_F16:
    case COLL_BF16: ((uint16_t *)p)[i] = (uint16_t)bits; break;
    case COLL_F32: {
      uint32_t u = (uint32_t)bits;
      memcpy((float *)p + i, &u, 4);
      break;
    }
    default: memcpy((double *)p + i, &bits, 8); break;
  }
}

/* v must not be NaN; it is rounded if dt cannot hold it exactly. */
static void put_value(coll_dtype_t dt, void *p, size_t i, double v) {
  switch (dt) {
    case COLL_F16: ((uint16_t *)p)[i] = ref_f16_from_double(v); break;
    case COLL_BF16: ((uint16_t *)p)[i] = ref_bf16_from_double(v); break;
    case COLL_F32: ((float *)p)[i] = (float)v; break;
    default: ((double *)p)[i] = v; break;
  }
}

/* Quiet and signaling NaNs, with and without payload, of either sign. */
static uint64_t nan_bits(coll_dtype_t dt, int k) {
  static const uint64_t f16[] = {0x7e01, 0x7c01, 0xfe00, 0x7fff};
  static const uint64_t bf16[] = {0x7fc1, 0x7f81, 0xffc0, 0x7fff};
  static const uint64_t f32[] = {0x7fc00001, 0x7f800001, 0xffc00000,
                                 0x7fffffff};
  static const uint64_t f64[] = {0x7ff8000000000001ull, 0x7ff0000000000001ull,
                                 0xfff8000000000000ull, 0x7fffffffffffffffull};
  switch (dt) {
    case COLL_F16: return f16[k];
    case COLL_BF16: return bf16[k];
    case COLL_F32: return f32[k];
    default: return f64[k];
  }
}

static void put_special(coll_dtype_t dt, void *p, size_t i, uint64_t *rng) {
  fmt_t f = fmt_of(dt);
  double max = ldexp(2.0 - ldexp(1, 1 - f.p), f.emax);
  double tiny = ldexp(1, f.emin - f.p + 1);
  const double vals[] = {0.0,  -0.0, INFINITY, -INFINITY,        max,
                         -max, tiny, -tiny,    ldexp(1, f.emin), 1.0};
  int k = rand_int(rng, 0, 13);
  if (k < 10)
    put_value(dt, p, i, vals[k]);
  else
    put_bits(dt, p, i, nan_bits(dt, k - 10));
}

/* +-sig * 2^e with a short significand, so that sums and products are
 * often exact and often land on a tie of the destination format. */
static double short_value(fmt_t f, uint64_t *rng, int elo, int ehi) {
  int k = (f.p + 1) / 2;
  double sig = 1.0 + ldexp(rand_int(rng, 0, (1 << k) - 1), -k);
  double v = ldexp(sig, rand_int(rng, elo, ehi));
  return (test_rand(rng) & 1) ? -v : v;
}

/* b = +-(half an ulp of a), or just above/below it: an exact tie of the
 * sum, or the nearest non-ties. */
static double tie_partner(fmt_t f, double a, uint64_t *rng) {
  double half = ldexp(1, ilogb(a) - f.p);
  double b = half * (1.0 + rand_int(rng, -1, 1) * ldexp(1, 1 - f.p));
  return (test_rand(rng) & 1) ? -b : b;
}

static void float_pair(coll_dtype_t dt, void *a, void *b, size_t i,
                       uint64_t *rng) {
  fmt_t f = fmt_of(dt);
  double x;
  switch (rand_int(rng, 0, 7)) {
    case 0:
    case 1:
      put_bits(dt, a, i, test_rand(rng));
      put_bits(dt, b, i, test_rand(rng));
      break;
    case 2:
      put_special(dt, a, i, rng);
      if (test_rand(rng) & 1)
        put_special(dt, b, i, rng);
      else
        put_value(dt, b, i, short_value(f, rng, -3, 3));
      break;
    case 3:
      put_value(dt, a, i, short_value(f, rng, -4, 4));
      put_value(dt, b, i, short_value(f, rng, -4, 4));
      break;
    case 4:
      x = short_value(f, rng, f.emin + f.p, f.emax - 1);
      put_value(dt, a, i, x);
      put_value(dt, b, i, tie_partner(f, x, rng));
      break;
    case 5: /* denormals and the smallest normals */
      put_value(dt, a, i, short_value(f, rng, f.emin - f.p + 1, f.emin + 1));
      put_value(dt, b, i, short_value(f, rng, f.emin - f.p + 1, f.emin + 1));
      break;
    case 6: /* near overflow */
      put_value(dt, a, i, short_value(f, rng, f.emax - 1, f.emax));
      put_value(dt, b, i, short_value(f, rng, f.emax - 2, f.emax));
      break;
    default: /* equal or opposite: +-0 sums, equal max/min */
      x = short_value(f, rng, -2, 2);
      put_value(dt, a, i, x);
      put_value(dt, b, i, (test_rand(rng) & 1) ? -x : x);
      break;
  }
}

static void put_int(coll_dtype_t dt, void *p, size_t i, int64_t v) {
  switch (dt) {
    case COLL_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    case COLL_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case COLL_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    default: ((int64_t *)p)[i] = v; break;
  }
}

/* Integers: random bits, the extremes, small values, x and -x. The casts
 * keep the low bits, which is what a random pattern wants. */
static int64_t int_value(coll_dtype_t dt, uint64_t *rng) {
  static const int64_t i8[] = {INT8_MIN, INT8_MAX, 0, -1, 1};
  static const int64_t u8[] = {0, UINT8_MAX, 1, 128, 127};
  static const int64_t i32[] = {INT32_MIN, INT32_MAX, 0, -1, 1};
  static const int64_t i64[] = {INT64_MIN, INT64_MAX, 0, -1, 1};
  int k = rand_int(rng, 0, 4);
  switch (rand_int(rng, 0, 2)) {
    case 0: return (int64_t)test_rand(rng);
    case 1:
      return dt == COLL_I8    ? i8[k]
             : dt == COLL_U8  ? u8[k]
             : dt == COLL_I32 ? i32[k]
                              : i64[k];
    default: return rand_int(rng, dt == COLL_U8 ? 0 : -9, 9);
  }
}

void ref_fill_pairs(coll_dtype_t dt, void *a, void *b, size_t n,
                    uint64_t *rng) {
  for (size_t i = 0; i < n; i++) {
    if (dt <= COLL_F64) {
      float_pair(dt, a, b, i, rng);
    } else {
      int64_t x = int_value(dt, rng);
      put_int(dt, a, i, x);
      put_int(dt, b, i,
              (test_rand(rng) % 4 == 0) ? (int64_t)(0 - (uint64_t)x)
                                        : int_value(dt, rng));
    }
  }
}
