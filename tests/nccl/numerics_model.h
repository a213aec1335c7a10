/* SPDX-License-Identifier: Apache-2.0 */
/* numerics_model.h: an independent model of what NCCL 2.28's kernels
 * compute (rounding to the element type per step, ncclAvg as a premul by
 * 1/n, integer averages as a wrapped sum divided), and element access, for
 * the numerics tests. */
#ifndef COLL_TEST_NUMERICS_MODEL_H
#define COLL_TEST_NUMERICS_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "cuda/gpu_table.h"

/* Ranks in the numerics tests' comms: model_reduce folds this many. */
#define W 3

/* x rounded to p significant bits, exponents emin..emax (nearest even). */
double round_fmt(double x, int p, int emin, int emax);
/* x rounded to dt; one reduction step of op, rounded; ncclAvg's scalar
 * 1/w in dt; the reduction of v[0..W) in rank order (k: premul scalars,
 * or NULL). */
double model_round(ncclDataType_t dt, double x);
double model_step(ncclDataType_t dt, ncclRedOp_t op, double a, double v);
double model_avg_scalar(ncclDataType_t dt, int w);
double model_reduce(ncclDataType_t dt, ncclRedOp_t op, const double *v,
                    const double *k);
/* Element size of a float dtype; half decodes; element i of p as a
 * double; a random element with exponent field in [elo, ehi]; equality
 * that tells -0 from +0 and matches NaN with NaN. */
size_t esize(ncclDataType_t dt);
double dec_f16(uint16_t h);
double dec_bf16(uint16_t h);
double elem(ncclDataType_t dt, const void *p, size_t i);
void rand_elem(ncclDataType_t dt, void *p, size_t i, int elo, int ehi,
               uint64_t *rs);
int same(double a, double b);

#endif
