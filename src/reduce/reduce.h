/* SPDX-License-Identifier: Apache-2.0 */
/* reduce.h: elementwise reduction kernels, picked per (dtype, op) at run time.
 *
 * Numerics (DESIGN.md 3.5): f16/bf16 are widened to f32, combined, and
 * rounded back (round to nearest even) in every call; MAX/MIN are exact (a
 * NaN operand gives NaN); I32/I64 (and I8/U8 PROD) wrap as two's complement.
 * Exact 8-bit SUM/AVG are done by widening to i32 (coll__widen_8bit), summing
 * in i32, and narrowing once (coll__narrow_8bit). Every kernel is a pure
 * function of its arguments; the SIMD variants give the same bits as the
 * scalar ones. A NaN result is always the positive quiet NaN (no payload),
 * and MAX/MIN are IEEE 754-2019 maximum/minimum (+0 > -0), so results never
 * depend on operand order. I8/U8 SUM kernels wrap (the exact 8-bit sum goes
 * through widen/narrow). dst and src never overlap partially (they may be
 * equal). */
#ifndef COLL_REDUCE_REDUCE_H
#define COLL_REDUCE_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

/* dst[i] = dst[i] OP src[i] for i < n. */
typedef void (*coll_reduce_fn_t)(void *dst, const void *src, size_t n);

/* The kernel for (dt, op), op one of SUM, PROD, MAX, MIN (AVG is SUM plus
 * coll__scale at the end); NULL for an invalid pair. Any thread. */
coll_reduce_fn_t coll__reduce_fn(coll_dtype_t dt, coll_op_t op);

/* The scalar reference kernel for (dt, op), for tests and fallbacks. */
coll_reduce_fn_t coll__reduce_fn_scalar(coll_dtype_t dt, coll_op_t op);

/* Which implementation coll__reduce_fn picks: "scalar", "avx2", "avx512".
 * Chosen once from the CPU's features and COLL_SIMD. Any thread. */
const char *coll__reduce_isa(void);

/* buf[i] = buf[i] * factor for float dtypes (f16/bf16 computed in f32 with
 * (float)factor, f32 with (float)factor, f64 with factor). Returns 0, or -1
 * for a non-float dtype (nothing written). */
int coll__scale(coll_dtype_t dt, void *buf, size_t n, double factor);

/* dst[i] = src[i] * factor with the same rounding as coll__scale; dst may
 * equal src. Returns 0, or -1 for a non-float dtype. */
int coll__scale_copy(coll_dtype_t dt, void *dst, const void *src, size_t n,
                     double factor);

/* Integer AVG finish for I32/I64: buf[i] = buf[i] / n, truncated toward zero
 * (NCCL's rule). Returns 0, or -1 for another dtype or n < 1. */
int coll__int_div(coll_dtype_t dt, void *buf, size_t count, int n);

/* 8-bit exact sums: widen I8/U8 src into i32 dst; narrow i32 sums back:
 * for SUM clamp to the dtype's range once; for AVG divide by n and round to
 * nearest, ties away from zero (then clamp, which cannot trigger). */
void coll__widen_8bit(coll_dtype_t dt, int32_t *dst, const void *src, size_t n);
void coll__narrow_8bit(coll_dtype_t dt, coll_op_t op, void *dst,
                       const int32_t *src, size_t n, int world);

/* f16/bf16 <-> f32 conversions (round to nearest even, NaN preserved). */
float coll__f16_to_f32(uint16_t h);
uint16_t coll__f32_to_f16(float f);
float coll__bf16_to_f32(uint16_t h);
uint16_t coll__f32_to_bf16(float f);

#endif
