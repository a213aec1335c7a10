/* SPDX-License-Identifier: Apache-2.0 */
/* reduce_half.c: scalar f16/bf16 reduction kernels, the reference for SIMD.
 * Each element is widened to f32, combined and rounded back (reduce_ops.h). */
#include "reduce/reduce_impl.h"
#include "reduce/reduce_ops.h"

#define HALF_KERNEL(name, OP)                              \
  static void name(void *dst, const void *src, size_t n) { \
    uint16_t *d = dst;                                     \
    const uint16_t *s = src;                               \
    for (size_t i = 0; i < n; i++) d[i] = OP(d[i], s[i]);  \
  }

HALF_KERNEL(f16_sum, coll__sum_f16)
HALF_KERNEL(f16_prod, coll__prod_f16)
HALF_KERNEL(f16_max, coll__max_f16)
HALF_KERNEL(f16_min, coll__min_f16)
HALF_KERNEL(bf16_sum, coll__sum_bf16)
HALF_KERNEL(bf16_prod, coll__prod_bf16)
HALF_KERNEL(bf16_max, coll__max_bf16)
HALF_KERNEL(bf16_min, coll__min_bf16)

coll_reduce_fn_t coll__reduce_half_scalar(coll_dtype_t dt, coll_op_t op) {
  static const coll_reduce_fn_t f16[] = {f16_sum, f16_prod, f16_max, f16_min};
  static const coll_reduce_fn_t bf16[] = {bf16_sum, bf16_prod, bf16_max,
                                          bf16_min};
  if ((unsigned)op > COLL_MIN) return NULL;
  if (dt == COLL_F16) return f16[op];
  if (dt == COLL_BF16) return bf16[op];
  return NULL;
}
