/* SPDX-License-Identifier: Apache-2.0 */
/* reduce_float.c: scalar f32/f64 reduction kernels, the reference for SIMD. */
#include "reduce/reduce_impl.h"
#include "reduce/reduce_ops.h"

/* One kernel per (type, op): dst[i] = OP(dst[i], src[i]). */
#define FLOAT_KERNEL(name, T, OP)                          \
  static void name(void *dst, const void *src, size_t n) { \
    T *d = dst;                                            \
    const T *s = src;                                      \
    for (size_t i = 0; i < n; i++) d[i] = OP(d[i], s[i]);  \
  }

FLOAT_KERNEL(f32_sum, float, coll__sum_f32)
FLOAT_KERNEL(f32_prod, float, coll__prod_f32)
FLOAT_KERNEL(f32_max, float, coll__max_f32)
FLOAT_KERNEL(f32_min, float, coll__min_f32)
FLOAT_KERNEL(f64_sum, double, coll__sum_f64)
FLOAT_KERNEL(f64_prod, double, coll__prod_f64)
FLOAT_KERNEL(f64_max, double, coll__max_f64)
FLOAT_KERNEL(f64_min, double, coll__min_f64)

coll_reduce_fn_t coll__reduce_float_scalar(coll_dtype_t dt, coll_op_t op) {
  static const coll_reduce_fn_t f32[] = {f32_sum, f32_prod, f32_max, f32_min};
  static const coll_reduce_fn_t f64[] = {f64_sum, f64_prod, f64_max, f64_min};
  if ((unsigned)op > COLL_MIN) return NULL;
  if (dt == COLL_F32) return f32[op];
  if (dt == COLL_F64) return f64[op];
  return NULL;
}
