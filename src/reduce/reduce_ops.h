/* SPDX-License-Identifier: Apache-2.0 */
/* reduce_ops.h: the per-element float operations every kernel is defined by.
 *
 * Two rules make a float result independent of operand order and of which
 * path (scalar, AVX2, AVX-512) computed it, so that ranks combining the same
 * values in a different order still agree bit for bit:
 *  - a NaN result is always the positive quiet NaN with no payload (x86
 *    otherwise returns the first operand's payload, and compilers are free
 *    to swap the operands of a commutative add);
 *  - MAX/MIN are IEEE 754-2019 maximum/minimum: a NaN operand gives NaN,
 *    and max(+0, -0) = +0, min(+0, -0) = -0 whatever the order.
 * f16/bf16 elements are widened to f32, combined, and rounded back to
 * nearest even once per call. The SIMD tails call these same functions. */
#ifndef COLL_REDUCE_REDUCE_OPS_H
#define COLL_REDUCE_REDUCE_OPS_H

#include <stdint.h>

#include "reduce/half.h"

#define COLL_NAN_F32 0x7fc00000u
#define COLL_NAN_F64 0x7ff8000000000000ull
#define COLL_NAN_F16 0x7e00u
#define COLL_NAN_BF16 0x7fc0u

static inline float coll__canon_f32(float r) {
  return r != r ? coll__bits_f32(COLL_NAN_F32) : r;
}

static inline double coll__canon_f64(double r) {
  return r != r ? coll__bits_f64(COLL_NAN_F64) : r;
}

static inline float coll__sum_f32(float a, float b) {
  return coll__canon_f32(a + b);
}

static inline float coll__prod_f32(float a, float b) {
  return coll__canon_f32(a * b);
}

/* Equal non-NaN operands have equal bits except for +0/-0, where AND of
 * the bits picks +0 (maximum) and OR picks -0 (minimum). */
static inline float coll__max_f32(float a, float b) {
  if (a != a || b != b) return coll__bits_f32(COLL_NAN_F32);
  if (a == b) return coll__bits_f32(coll__f32_bits(a) & coll__f32_bits(b));
  return a > b ? a : b;
}

static inline float coll__min_f32(float a, float b) {
  if (a != a || b != b) return coll__bits_f32(COLL_NAN_F32);
  if (a == b) return coll__bits_f32(coll__f32_bits(a) | coll__f32_bits(b));
  return a < b ? a : b;
}

static inline double coll__sum_f64(double a, double b) {
  return coll__canon_f64(a + b);
}

static inline double coll__prod_f64(double a, double b) {
  return coll__canon_f64(a * b);
}

static inline double coll__max_f64(double a, double b) {
  if (a != a || b != b) return coll__bits_f64(COLL_NAN_F64);
  if (a == b) return coll__bits_f64(coll__f64_bits(a) & coll__f64_bits(b));
  return a > b ? a : b;
}

static inline double coll__min_f64(double a, double b) {
  if (a != a || b != b) return coll__bits_f64(COLL_NAN_F64);
  if (a == b) return coll__bits_f64(coll__f64_bits(a) | coll__f64_bits(b));
  return a < b ? a : b;
}

/* f16/bf16: the f32 operation between a widen and a round. The canonical
 * f32 NaN rounds to the canonical f16/bf16 NaN. */
#define COLL_HALF_OP_(name, op, widen, narrow)           \
  static inline uint16_t name(uint16_t a, uint16_t b) {  \
    return narrow(coll__##op##_f32(widen(a), widen(b))); \
  }
COLL_HALF_OP_(coll__sum_f16, sum, coll__h2f, coll__f2h)
COLL_HALF_OP_(coll__prod_f16, prod, coll__h2f, coll__f2h)
COLL_HALF_OP_(coll__max_f16, max, coll__h2f, coll__f2h)
COLL_HALF_OP_(coll__min_f16, min, coll__h2f, coll__f2h)
COLL_HALF_OP_(coll__sum_bf16, sum, coll__bf2f, coll__f2bf)
COLL_HALF_OP_(coll__prod_bf16, prod, coll__bf2f, coll__f2bf)
COLL_HALF_OP_(coll__max_bf16, max, coll__bf2f, coll__f2bf)
COLL_HALF_OP_(coll__min_bf16, min, coll__bf2f, coll__f2bf)
#undef COLL_HALF_OP_

/* Scaling (AVG's finish): the same NaN rule as the reductions. */
static inline uint16_t coll__scale_f16(uint16_t a, float f) {
  return coll__f2h(coll__prod_f32(coll__h2f(a), f));
}

static inline uint16_t coll__scale_bf16(uint16_t a, float f) {
  return coll__f2bf(coll__prod_f32(coll__bf2f(a), f));
}

#endif
