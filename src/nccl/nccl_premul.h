/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_premul.h: what NCCL's numerics allow on an NCCL comm: the scalar of a
 * pre-multiplied sum in each element type, and the (dtype, op) pairs whose
 * NCCL result breaks libcoll's contract badly enough to refuse them. */
#ifndef COLL_NCCL_NCCL_PREMUL_H
#define COLL_NCCL_NCCL_PREMUL_H

#include <stddef.h>

#include "core/comm.h"
#include "cuda/gpu_table.h"

/* The premul-sum scalar for buffers of dt: factor converted to the element
 * type (f16 and bf16 rounded to nearest even, as __float2half and
 * __float2bfloat16 do; f32 as is; f64 exact) and written to scalar_out, 8
 * bytes that are zeroed first, ready for ncclRedOpCreatePreMulSum with
 * ncclScalarHostImmediate; *ndt is dt's NCCL type. NCCL multiplies in the
 * element type, so one op is needed per dtype of a batch.
 *
 * buf is the buffer's index in the batch and what the call's name (NULL:
 * "allreduce_premul_sum"); both go into the error text. Returns COLL_OK,
 * COLL_ERR_UNSUPPORTED for an integer dtype ("<what>: an NCCL comm takes
 * f16, bf16, f32 or f64 buffers; buffer 2 is i32"), COLL_ERR_INVALID_ARG
 * for a dtype out of range or a NULL output. Any thread. */
coll_status_t coll__nccl_premul_scalar(coll_dtype_t dt, float factor,
                                       size_t buf, const char *what,
                                       void *scalar_out, ncclDataType_t *ndt);

/* Refuses what NCCL computes too far from libcoll's contract to pass
 * silently: COLL_AVG on i8 or u8 in a reducing work kind (allreduce, reduce,
 * reduce_scatter), where ncclAvg divides the wrapped 8-bit sum (3 ranks of
 * 100 give 14, not 100). Other kinds ignore op and pass. what is the call's
 * name for the text (NULL: the kind's name). Returns COLL_OK or
 * COLL_ERR_UNSUPPORTED with a sentence naming NCCL. Any thread. */
coll_status_t coll__nccl_check_numerics(coll_work_kind_t kind, coll_dtype_t dt,
                                        coll_op_t op, const char *what);

#endif
