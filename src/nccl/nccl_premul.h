/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_premul.h: what NCCL comms take in numerics: pre-multiplied sums per
 * floating dtype, and the reductions refused because NCCL's result would
 * break the documented contract. */
#ifndef COLL_NCCL_NCCL_PREMUL_H
#define COLL_NCCL_NCCL_PREMUL_H

#include "coll.h"

/* COLL_OK for f16, bf16, f32, f64; else COLL_ERR_UNSUPPORTED naming
 * buffer `index`. */
coll_status_t coll__nccl_premul_dtype(coll_dtype_t dt, size_t index,
                                      const char *what);
/* factor in dt's representation (round to nearest even), into out (8
 * bytes): the host-immediate scalar of ncclRedOpCreatePreMulSum. */
void coll__nccl_premul_scalar(coll_dtype_t dt, float factor, void *out);
/* COLL_ERR_UNSUPPORTED for AVG of i8/u8 (NCCL wraps the sum before it
 * divides, so the result is neither the contract's nor a useful one). */
coll_status_t coll__nccl_check_numerics(coll_dtype_t dt, coll_op_t op,
                                        const char *what);

#endif
