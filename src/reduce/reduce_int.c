/* SPDX-License-Identifier: Apache-2.0 */
/* reduce_int.c: scalar integer reduction kernels. SUM and PROD wrap as two's
 * complement: the arithmetic is done in the unsigned type of the same width
 * (signed overflow would be undefined), and converting back to the signed
 * type keeps the low bits (GCC and Clang define that conversion). The I8/U8
 * SUM kernels wrap too; the exact 8-bit sums of the CPU path do not use
 * them but widen to i32 (widen.c). Compilers vectorize these loops well
 * enough to stay near memory bandwidth, so they have no SIMD variant. */
#include "reduce/reduce_impl.h"

/* 8-bit operands promote to int before the multiply: 255 * 255 still fits,
 * so there is no overflow on the way to the truncation either. */
#define INT_ADD(UT, a, b) ((UT)((UT)(a) + (UT)(b)))
#define INT_MUL(UT, a, b) ((UT)((UT)(a) * (UT)(b)))
#define INT_MAX_(UT, a, b) ((a) > (b) ? (a) : (b))
#define INT_MIN_(UT, a, b) ((a) < (b) ? (a) : (b))

#define INT_KERNEL(name, T, UT, OP)                              \
  static void name(void *dst, const void *src, size_t n) {       \
    T *d = dst;                                                  \
    const T *s = src;                                            \
    for (size_t i = 0; i < n; i++) d[i] = (T)OP(UT, d[i], s[i]); \
  }

#define INT_FAMILY(T, UT, pre)                                        \
  INT_KERNEL(pre##_sum, T, UT, INT_ADD)                               \
  INT_KERNEL(pre##_prod, T, UT, INT_MUL)                              \
  INT_KERNEL(pre##_max, T, UT, INT_MAX_)                              \
  INT_KERNEL(pre##_min, T, UT, INT_MIN_)                              \
  static const coll_reduce_fn_t pre##_fns[] = {pre##_sum, pre##_prod, \
                                               pre##_max, pre##_min};

INT_FAMILY(int8_t, uint8_t, i8)
INT_FAMILY(uint8_t, uint8_t, u8)
INT_FAMILY(int32_t, uint32_t, i32)
INT_FAMILY(int64_t, uint64_t, i64)

coll_reduce_fn_t coll__reduce_int_scalar(coll_dtype_t dt, coll_op_t op) {
  if ((unsigned)op > COLL_MIN) return NULL;
  switch (dt) {
    case COLL_I8: return i8_fns[op];
    case COLL_U8: return u8_fns[op];
    case COLL_I32: return i32_fns[op];
    case COLL_I64: return i64_fns[op];
    default: return NULL;
  }
}
