/* SPDX-License-Identifier: Apache-2.0 */
/* numerics_model.c: the model behind numerics_model.h. Rounding is done by
 * frexp/nearbyint/ldexp here, independently of src/reduce/half.h. */
#include "numerics_model.h"

#include <math.h>
#include <string.h>

#include "test_util.h"

/* ---- the model --------------------------------------------------------- */

/* x rounded to p significant bits, normal exponents from emin to emax:
 * nearest even, subnormals kept, overflow to infinity. */
double round_fmt(double x, int p, int emin, int emax) {
  double r, max = ldexp(2.0 - ldexp(1.0, 1 - p), emax);
  int e, q;
  if (x == 0 || isnan(x) || isinf(x)) return x;
  (void)frexp(x, &e); /* |x| in [2^(e-1), 2^e) */
  q = (e - 1 > emin ? e - 1 : emin) - (p - 1);
  r = ldexp(nearbyint(ldexp(x, -q)), q);
  return fabs(r) > max ? copysign(INFINITY, x) : r;
}

double model_round(ncclDataType_t dt, double x) {
  switch (dt) {
    case ncclFloat16: return round_fmt(x, 11, -14, 15);
    case ncclBfloat16: return round_fmt(x, 8, -126, 127);
    case ncclFloat32: return (double)(float)x;
    default: return x;
  }
}

/* Exact in double: a sum or product of two f16/bf16 values; for f32 the
 * double sum may round once, harmlessly (53 >= 2 * 24 + 2). */
double model_step(ncclDataType_t dt, ncclRedOp_t op, double a, double v) {
  switch (op) {
    case ncclProd: return model_round(dt, a * v);
    case ncclMax: return isnan(v) || (!isnan(a) && !(v > a)) ? a : v;
    case ncclMin: return isnan(v) || (!isnan(a) && !(v < a)) ? a : v;
    default: return model_round(dt, a + v);
  }
}

/* NCCL's ncclAvg scalar for a floating type (hostToDevRedOp): 1/w in
 * double; for the narrower types through float first. */
double model_avg_scalar(ncclDataType_t dt, int w) {
  if (dt == ncclFloat64) return 1.0 / w;
  return model_round(dt, (double)(float)(1.0 / w));
}

/* Rank 0's value first; k[r] != NULL: premul scalars. */
double model_reduce(ncclDataType_t dt, ncclRedOp_t op, const double *v,
                    const double *k) {
  double acc = 0, x;
  int r;
  for (r = 0; r < W; r++) {
    x = k != NULL ? model_round(dt, v[r] * k[r]) : v[r];
    acc = r == 0 ? x : model_step(dt, op, acc, x);
  }
  return acc;
}

/* ---- element bits ------------------------------------------------------ */

size_t esize(ncclDataType_t dt) {
  return dt == ncclFloat64 ? 8 : dt == ncclFloat32 ? 4 : 2;
}

double dec_f16(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0    ? ldexp(m, -24)
             : e == 31 ? (m != 0 ? NAN : INFINITY)
                       : ldexp(m + 1024, e - 25);
  return (h & 0x8000) ? -v : v;
}

double dec_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Element i of the buffer p, as a double. */
double elem(ncclDataType_t dt, const void *p, size_t i) {
  const char *b = (const char *)p + i * esize(dt);
  uint16_t h;
  float f;
  double d;
  switch (dt) {
    case ncclFloat16: memcpy(&h, b, 2); return dec_f16(h);
    case ncclBfloat16: memcpy(&h, b, 2); return dec_bf16(h);
    case ncclFloat32: memcpy(&f, b, 4); return f;
    default: memcpy(&d, b, 8); return d;
  }
}

/* A random finite element: random sign and mantissa, the biased exponent
 * field in [elo, ehi] (0: subnormals and zeros). */
void rand_elem(ncclDataType_t dt, void *p, size_t i, int elo, int ehi,
               uint64_t *rs) {
  char *b = (char *)p + i * esize(dt);
  uint64_t r = test_rand(rs);
  uint64_t e = (uint64_t)elo + (r >> 40) % (uint64_t)(ehi - elo + 1);
  uint64_t s = r >> 63;
  uint16_t h;
  uint32_t u;
  switch (dt) {
    case ncclFloat16:
      h = (uint16_t)(s << 15 | e << 10 | (r & 0x3ff));
      memcpy(b, &h, 2);
      break;
    case ncclBfloat16:
      h = (uint16_t)(s << 15 | e << 7 | (r & 0x7f));
      memcpy(b, &h, 2);
      break;
    case ncclFloat32:
      u = (uint32_t)(s << 31 | e << 23 | (r & 0x7fffff));
      memcpy(b, &u, 4);
      break;
    default:
      r = s << 63 | e << 52 | (test_rand(rs) & 0xfffffffffffffull);
      memcpy(b, &r, 8);
      break;
  }
}

int same(double a, double b) {
  return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b));
}
