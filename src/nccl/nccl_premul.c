/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_premul.c: the dtypes NCCL's pre-multiplied sum takes (the scalar has
 * the element type: nccl.h, ncclRedOpCreatePreMulSum) and the reductions an
 * NCCL comm refuses. */
#include "nccl/nccl_premul.h"

#include <string.h>

#include "core/error.h"
#include "reduce/half.h"

coll_status_t coll__nccl_premul_dtype(coll_dtype_t dt, size_t index,
                                      const char *what) {
  switch (dt) {
    case COLL_F16:
    case COLL_BF16:
    case COLL_F32:
    case COLL_F64:
      return COLL_OK;
    default:
      return coll__err(COLL_ERR_UNSUPPORTED,
                       "%s: an NCCL comm takes f16, bf16, f32 or f64 buffers; "
                       "buffer %zu is %s",
                       what, index, coll_dtype_name(dt));
  }
}

void coll__nccl_premul_scalar(coll_dtype_t dt, float factor, void *out) {
  uint16_t h;
  double d = factor;
  memset(out, 0, 8);
  switch (dt) {
    case COLL_F16:
      h = coll__f2h(factor);
      memcpy(out, &h, sizeof h);
      break;
    case COLL_BF16:
      h = coll__f2bf(factor);
      memcpy(out, &h, sizeof h);
      break;
    case COLL_F64:
      memcpy(out, &d, sizeof d);
      break;
    default:
      memcpy(out, &factor, sizeof factor);
      break;
  }
}

coll_status_t coll__nccl_check_numerics(coll_dtype_t dt, coll_op_t op,
                                        const char *what) {
  if (op == COLL_AVG && (dt == COLL_I8 || dt == COLL_U8))
    return coll__err(COLL_ERR_UNSUPPORTED,
                     "%s: avg of %s on an NCCL comm wraps the sum before it "
                     "divides (NCCL's ncclAvg); use i32, or a CPU comm",
                     what, coll_dtype_name(dt));
  return COLL_OK;
}
