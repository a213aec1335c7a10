/* SPDX-License-Identifier: Apache-2.0 */
/* ref.h: the test's own reference numerics, written independently of the
 * library's bit tricks: values are decoded to double with ldexp, combined
 * in a wider type and rounded with nearbyint (round to nearest even). */
#ifndef COLL_TEST_REDUCE_REF_H
#define COLL_TEST_REDUCE_REF_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

/* The NaN every float kernel returns (positive, quiet, no payload). */
#define REF_NAN_F16 0x7e00u
#define REF_NAN_BF16 0x7fc0u
#define REF_NAN_F32 0x7fc00000u
#define REF_NAN_F64 0x7ff8000000000000ull

double ref_f16_to_double(uint16_t h);
double ref_bf16_to_double(uint16_t h);
/* x rounded to nearest even; x must not be NaN. */
uint16_t ref_f16_from_double(double x);
uint16_t ref_bf16_from_double(double x);

/* dst[i] = dst[i] OP src[i] by the reference rules (op SUM..MIN). */
void ref_reduce(coll_dtype_t dt, coll_op_t op, void *dst, const void *src,
                size_t n);
/* dst[i] = src[i] * factor by the reference rules (float dtypes). */
void ref_scale(coll_dtype_t dt, void *dst, const void *src, size_t n,
               double factor);

/* Fills a and b with n test pairs for dt: random bits, special values
 * (+-0, +-inf, NaNs with payloads, denormals), small exact values, values
 * whose sum or product lands on or next to a rounding tie. */
void ref_fill_pairs(coll_dtype_t dt, void *a, void *b, size_t n, uint64_t *rng);

#endif
