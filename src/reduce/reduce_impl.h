/* SPDX-License-Identifier: Apache-2.0 */
/* reduce_impl.h: how the reduce area's files find each other's kernels.
 *
 * Each family file (reduce_float.c, reduce_half.c, reduce_int.c) and each
 * SIMD file (reduce_avx2.c, reduce_avx512.c) answers "your kernel for
 * (dt, op)" or NULL; reduce_dispatch.c picks the instruction set once and
 * falls back from AVX-512 to AVX2 to scalar per kernel. Tests reach every
 * instruction set through coll__reduce_fn_isa and compare them bit for bit
 * with the scalar reference. */
#ifndef COLL_REDUCE_REDUCE_IMPL_H
#define COLL_REDUCE_REDUCE_IMPL_H

#include "reduce/reduce.h"

/* Instruction sets, each a superset of the one before. */
typedef enum coll_isa {
  COLL_ISA_SCALAR = 0,
  COLL_ISA_AVX2,   /* AVX2 + F16C */
  COLL_ISA_AVX512, /* AVX-512 F/BW/VL, plus AVX2 + F16C */
  COLL_ISA_COUNT
} coll_isa_t;

/* dst[i] = src[i] * factor for a float dtype (dst may equal src); f16, bf16
 * and f32 use (float)factor, f64 uses factor. */
typedef void (*coll_scale_fn_t)(void *dst, const void *src, size_t n,
                                double factor);

/* Scalar kernels of each family: NULL for a (dt, op) of another family or
 * for op not in SUM, PROD, MAX, MIN. dt and op must be in range. */
coll_reduce_fn_t coll__reduce_float_scalar(coll_dtype_t dt, coll_op_t op);
coll_reduce_fn_t coll__reduce_half_scalar(coll_dtype_t dt, coll_op_t op);
coll_reduce_fn_t coll__reduce_int_scalar(coll_dtype_t dt, coll_op_t op);
coll_scale_fn_t coll__scale_scalar(coll_dtype_t dt);

/* SIMD kernels: NULL where that instruction set has no kernel of its own.
 * Only call what they return on a CPU that has the instruction set. */
coll_reduce_fn_t coll__reduce_avx2(coll_dtype_t dt, coll_op_t op);
coll_reduce_fn_t coll__reduce_avx512(coll_dtype_t dt, coll_op_t op);
coll_scale_fn_t coll__scale_avx2(coll_dtype_t dt);
coll_scale_fn_t coll__scale_avx512(coll_dtype_t dt);

/* The instruction set named `isa` ("scalar", "avx2", "avx512", any case),
 * or -1 for another name. */
int coll__isa_from_name(const char *isa);
const char *coll__isa_name(coll_isa_t isa);

/* Whether this CPU (and OS) can run `isa`. Any thread. */
int coll__isa_supported(coll_isa_t isa);

/* The instruction set a COLL_SIMD value asks for on this CPU: the best
 * supported one for NULL or "auto"; the named one if the CPU has it, else
 * (with a warning) the best supported one; for an unknown name, a warning
 * and the best supported one. Pure apart from the warning; any thread. */
coll_isa_t coll__isa_pick(const char *want);

/* The kernel coll__reduce_fn would return if `isa` had been picked: the
 * instruction set's own kernel where it has one, else the next smaller
 * set's. NULL for an unknown name, a set this CPU lacks, or an invalid
 * (dt, op). Any thread. */
coll_reduce_fn_t coll__reduce_fn_isa(const char *isa, coll_dtype_t dt,
                                     coll_op_t op);

/* Scale kernels, picked like the reductions; NULL for a non-float dtype. */
coll_scale_fn_t coll__scale_fn(coll_dtype_t dt);
coll_scale_fn_t coll__scale_fn_isa(const char *isa, coll_dtype_t dt);

#endif
