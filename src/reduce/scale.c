/* SPDX-License-Identifier: Apache-2.0 */
/* scale.c: AVG's finish: float scaling (scalar reference plus the
 * dispatched entry points) and the integer division for I32/I64. */
#include "reduce/reduce_impl.h"
#include "reduce/reduce_ops.h"

static void scale_f16(void *dst, const void *src, size_t n, double factor) {
  uint16_t *d = dst;
  const uint16_t *s = src;
  float f = (float)factor;
  for (size_t i = 0; i < n; i++) d[i] = coll__scale_f16(s[i], f);
}

static void scale_bf16(void *dst, const void *src, size_t n, double factor) {
  uint16_t *d = dst;
  const uint16_t *s = src;
  float f = (float)factor;
  for (size_t i = 0; i < n; i++) d[i] = coll__scale_bf16(s[i], f);
}

static void scale_f32(void *dst, const void *src, size_t n, double factor) {
  float *d = dst;
  const float *s = src;
  float f = (float)factor;
  for (size_t i = 0; i < n; i++) d[i] = coll__prod_f32(s[i], f);
}

static void scale_f64(void *dst, const void *src, size_t n, double factor) {
  double *d = dst;
  const double *s = src;
  for (size_t i = 0; i < n; i++) d[i] = coll__prod_f64(s[i], factor);
}

coll_scale_fn_t coll__scale_scalar(coll_dtype_t dt) {
  switch (dt) {
    case COLL_F16: return scale_f16;
    case COLL_BF16: return scale_bf16;
    case COLL_F32: return scale_f32;
    case COLL_F64: return scale_f64;
    default: return NULL;
  }
}

int coll__scale_copy(coll_dtype_t dt, void *dst, const void *src, size_t n,
                     double factor) {
  coll_scale_fn_t fn = coll__scale_fn(dt);
  if (fn == NULL) return -1;
  fn(dst, src, n, factor);
  return 0;
}

int coll__scale(coll_dtype_t dt, void *buf, size_t n, double factor) {
  return coll__scale_copy(dt, buf, buf, n, factor);
}

/* C division truncates toward zero, which is the rule. The sums have
 * already wrapped; with n >= 1 no quotient can overflow. */
int coll__int_div(coll_dtype_t dt, void *buf, size_t count, int n) {
  if (n < 1) return -1;
  if (dt == COLL_I32) {
    int32_t *b = buf;
    for (size_t i = 0; i < count; i++) b[i] = (int32_t)(b[i] / n);
    return 0;
  }
  if (dt == COLL_I64) {
    int64_t *b = buf;
    for (size_t i = 0; i < count; i++) b[i] /= n;
    return 0;
  }
  return -1;
}
