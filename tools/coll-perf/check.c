/* SPDX-License-Identifier: Apache-2.0 */
/* check.c: inputs that stay exact in every dtype, and their verification
 * against a reduction computed here, independently of libcoll.
 *
 * Every input is a small integer of (rank, index), chosen per op so that the
 * exact result, and every partial result a ring or a tree can form on the
 * way, is representable in the dtype (bf16 holds integers up to 256 exactly,
 * f16 up to 2048): SUM and AVG use values whose sum over ranks is a multiple
 * of the world size, PROD uses factors 1, 2 (and -1 for signed types) with
 * few 2s, MAX and MIN use values in [-30, 30]. For bf16 this stays exact up
 * to 256 ranks. */
#include <math.h>
#include <string.h>

#include "perf.h"

/* |partial sums| must stay at or below this to be exact in dt. */
static int64_t sum_limit(coll_dtype_t dt) {
  switch (dt) {
    case COLL_F16: return 2048;
    case COLL_BF16: return 256;
    case COLL_I8: return 127;
    case COLL_U8: return 255;
    default: return INT64_C(1) << 24; /* f32 mantissa; ample for the rest */
  }
}

/* How many factors of 2 a product may hold and stay exact in dt. */
static int prod_twos(coll_dtype_t dt) {
  switch (dt) {
    case COLL_I8: return 6;
    case COLL_U8: return 7;
    case COLL_F16: return 14;
    default: return 30;
  }
}

static int is_signed(coll_dtype_t dt) { return dt != COLL_U8; }

/* SUM/AVG: rank pairs (2k, 2k+1) hold base+j and base-j, a last unpaired
 * rank holds base, so the sum is world*base while the values still depend
 * on rank and index. Values lie in [0, 2*base] with 2*base*world within
 * the dtype's exact range. */
static int64_t sum_value(coll_dtype_t dt, int world, int rank, size_t i) {
  int64_t budget = sum_limit(dt) / world, half, base, j;
  if (budget > 64) budget = 64;
  half = budget / 2 > 0 ? budget / 2 : 1;
  base = 1 + (int64_t)(i % (size_t)half);
  j = (int64_t)((i + (size_t)(rank / 2)) % (size_t)(base + 1));
  if (rank == world - 1 && world % 2 == 1) return base;
  return rank % 2 == 0 ? base + j : base - j;
}

/* PROD: 2 where (rank + i) % p == 0, spread so that at most prod_twos(dt)
 * ranks hold a 2 at any index; -1 now and then for signed types. */
static int64_t prod_value(coll_dtype_t dt, int world, int rank, size_t i) {
  int64_t p = (world + prod_twos(dt) - 1) / prod_twos(dt);
  if (p < 3) p = 3;
  if (((int64_t)rank + (int64_t)(i % (size_t)p)) % p == 0) return 2;
  if (is_signed(dt) && ((size_t)rank * 3 + i) % 5 == 0) return -1;
  return 1;
}

static int64_t minmax_value(coll_dtype_t dt, int rank, size_t i) {
  int64_t v = (int64_t)(((size_t)rank * 5 + (i % 61) * 3) % 61);
  return is_signed(dt) ? v - 30 : v;
}

static int64_t input_value(const perf_opts_t *o, int world, int rank,
                           size_t i) {
  switch (o->op) {
    case COLL_PROD: return prod_value(o->dtype, world, rank, i);
    case COLL_MAX:
    case COLL_MIN: return minmax_value(o->dtype, rank, i);
    default: return sum_value(o->dtype, world, rank, i);
  }
}

/* f16/bf16 of a value known to be exact in the format (a small integer). */
static uint16_t exact_to_f16(double v) {
  uint16_t sign = v < 0 ? 0x8000 : 0;
  int e;
  double m;
  if (v == 0) return 0;
  m = frexp(fabs(v), &e); /* |v| = m * 2^e, m in [0.5, 1) */
  return (uint16_t)(sign | (uint16_t)((e - 1 + 15) << 10) |
                    (uint16_t)((m * 2 - 1) * 1024));
}

static double f16_value(uint16_t h) {
  int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v;
  if (exp == 0)
    v = ldexp(man, -24);
  else if (exp == 31)
    v = man != 0 ? NAN : INFINITY;
  else
    v = ldexp(man | 0x400, exp - 25);
  return (h & 0x8000) != 0 ? -v : v;
}

static uint16_t exact_to_bf16(double v) {
  float f = (float)v;
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return (uint16_t)(bits >> 16);
}

static double bf16_value(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static void put(coll_dtype_t dt, void *buf, size_t i, int64_t v) {
  switch (dt) {
    case COLL_F16: ((uint16_t *)buf)[i] = exact_to_f16((double)v); break;
    case COLL_BF16: ((uint16_t *)buf)[i] = exact_to_bf16((double)v); break;
    case COLL_F32: ((float *)buf)[i] = (float)v; break;
    case COLL_F64: ((double *)buf)[i] = (double)v; break;
    case COLL_I8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case COLL_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case COLL_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    default: ((int64_t *)buf)[i] = v; break;
  }
}

static double get(coll_dtype_t dt, const void *buf, size_t i) {
  switch (dt) {
    case COLL_F16: return f16_value(((const uint16_t *)buf)[i]);
    case COLL_BF16: return bf16_value(((const uint16_t *)buf)[i]);
    case COLL_F32: return ((const float *)buf)[i];
    case COLL_F64: return ((const double *)buf)[i];
    case COLL_I8: return ((const int8_t *)buf)[i];
    case COLL_U8: return ((const uint8_t *)buf)[i];
    case COLL_I32: return ((const int32_t *)buf)[i];
    default: return (double)((const int64_t *)buf)[i];
  }
}

void perf_fill(const perf_opts_t *o, int world, int rank, void *buf,
               size_t count) {
  size_t i;
  for (i = 0; i < count; i++)
    put(o->dtype, buf, i, input_value(o, world, rank, i));
}

void perf_poison(coll_dtype_t dt, void *buf, size_t count) {
  /* All-ones bytes are NaN in every float type and 255 in u8; 0x80 bytes
   * are a large negative number in the signed types. No input or result
   * takes these values. */
  int byte = (dt == COLL_I8 || dt == COLL_I32 || dt == COLL_I64) ? 0x80 : 0xff;
  memset(buf, byte, count * coll_dtype_size(dt));
}

/* The exact reduction over all ranks of their inputs at index i, in the
 * rules of the library's contract (I8/U8 SUM clamps once at the end, AVG
 * is the sum divided by the world size). */
static double expected_reduced(const perf_opts_t *o, int world, size_t i) {
  int64_t acc = input_value(o, world, 0, i);
  int r;
  for (r = 1; r < world; r++) {
    int64_t v = input_value(o, world, r, i);
    switch (o->op) {
      case COLL_PROD: acc *= v; break;
      case COLL_MAX: acc = v > acc ? v : acc; break;
      case COLL_MIN: acc = v < acc ? v : acc; break;
      default: acc += v; break;
    }
  }
  if (o->op == COLL_AVG) return (double)acc / world;
  if (o->op == COLL_SUM && o->dtype == COLL_I8)
    return (double)(acc > 127 ? 127 : acc < -128 ? -128 : acc);
  if (o->op == COLL_SUM && o->dtype == COLL_U8)
    return (double)(acc > 255 ? 255 : acc);
  return (double)acc;
}

/* Float AVG is scaled by 1/world once, so it may sit an ulp or so off the
 * exact quotient; everything else must match exactly. */
static int matches(const perf_opts_t *o, double got, double want) {
  double tol;
  if (got == want) return 1;
  if (o->op != COLL_AVG) return 0;
  switch (o->dtype) {
    case COLL_F16: tol = 0x1p-10; break;
    case COLL_BF16: tol = 0x1p-7; break;
    case COLL_F32: tol = 0x1p-22; break;
    case COLL_F64: tol = 0x1p-50; break;
    default: return 0;
  }
  return fabs(got - want) <= tol * fmax(1.0, fabs(want));
}

int64_t perf_check_reduced(const perf_opts_t *o, int world, const void *buf,
                           size_t first, size_t count) {
  int64_t wrong = 0;
  size_t i;
  for (i = 0; i < count; i++)
    if (!matches(o, get(o->dtype, buf, i),
                 expected_reduced(o, world, first + i)))
      wrong++;
  return wrong;
}

int64_t perf_check_input(const perf_opts_t *o, int world, int src,
                         const void *buf, size_t count) {
  int64_t wrong = 0;
  size_t i;
  for (i = 0; i < count; i++)
    if (get(o->dtype, buf, i) != (double)input_value(o, world, src, i)) wrong++;
  return wrong;
}
