/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_premul.c: the element-typed scalar of NCCL's pre-multiplied sums, and
 * the numerics check of reductions on NCCL comms. */
#include "nccl/nccl_premul.h"

#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "reduce/half.h"

coll_status_t coll__nccl_premul_scalar(coll_dtype_t dt, float factor,
                                       size_t buf, const char *what,
                                       void *scalar_out, ncclDataType_t *ndt) {
  uint16_t h;
  double d;
  if (what == NULL) what = coll__work_name(COLL_WORK_PREMUL_SUM);
  if (scalar_out == NULL || ndt == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "%s: %s is NULL", what,
                     scalar_out == NULL ? "scalar_out" : "ndt");
  memset(scalar_out, 0, 8);
  switch (dt) {
    case COLL_F16:
      h = coll__f2h(factor);
      memcpy(scalar_out, &h, sizeof h);
      *ndt = ncclFloat16;
      return COLL_OK;
    case COLL_BF16:
      h = coll__f2bf(factor);
      memcpy(scalar_out, &h, sizeof h);
      *ndt = ncclBfloat16;
      return COLL_OK;
    case COLL_F32:
      memcpy(scalar_out, &factor, sizeof factor);
      *ndt = ncclFloat32;
      return COLL_OK;
    case COLL_F64:
      d = factor;
      memcpy(scalar_out, &d, sizeof d);
      *ndt = ncclFloat64;
      return COLL_OK;
    case COLL_I8:
    case COLL_U8:
    case COLL_I32:
    case COLL_I64:
      /* NCCL has integer premul ops, but a float factor truncated to an
       * integer is not what coll.h promises. */
      return coll__err(COLL_ERR_UNSUPPORTED,
                       "%s: an NCCL comm takes f16, bf16, f32 or f64 "
                       "buffers; buffer %zu is %s",
                       what, buf, coll_dtype_name(dt));
    default:
      return coll__err(COLL_ERR_INVALID_ARG, "%s: buffer %zu has dtype %d",
                       what, buf, (int)dt);
  }
}

coll_status_t coll__nccl_check_numerics(coll_work_kind_t kind, coll_dtype_t dt,
                                        coll_op_t op, const char *what) {
  if (what == NULL) what = coll__work_name(kind);
  switch (kind) {
    case COLL_WORK_ALLREDUCE:
    case COLL_WORK_REDUCE:
    case COLL_WORK_REDUCE_SCATTER: break;
    default: return COLL_OK;
  }
  /* ncclAvg on integers is a wrapped sum divided afterwards: for 8 bits
   * that wraps at any real world size, where the CPU backend returns the
   * exact mean. Wider integers wrap only where their sum overflows anyway. */
  if (op == COLL_AVG && (dt == COLL_I8 || dt == COLL_U8))
    return coll__err(COLL_ERR_UNSUPPORTED,
                     "%s: avg of %s on an NCCL comm wraps the sum before "
                     "dividing (NCCL's ncclAvg); use i32, or a CPU comm",
                     what, coll_dtype_name(dt));
  return COLL_OK;
}
