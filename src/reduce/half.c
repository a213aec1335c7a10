/* SPDX-License-Identifier: Apache-2.0 */
/* half.c: the exported f16/bf16 <-> f32 conversions (definitions in half.h). */
#include "reduce/half.h"
#include "reduce/reduce.h"

float coll__f16_to_f32(uint16_t h) { return coll__h2f(h); }

uint16_t coll__f32_to_f16(float f) { return coll__f2h(f); }

float coll__bf16_to_f32(uint16_t h) { return coll__bf2f(h); }

uint16_t coll__f32_to_bf16(float f) { return coll__f2bf(f); }
