/* SPDX-License-Identifier: Apache-2.0 */
/* widen.c: exact 8-bit SUM/AVG: widen to i32 partial sums, narrow once. */
#include "reduce/reduce.h"

void coll__widen_8bit(coll_dtype_t dt, int32_t *dst, const void *src,
                      size_t n) {
  if (dt == COLL_I8) {
    const int8_t *s = src;
    for (size_t i = 0; i < n; i++) dst[i] = s[i];
  } else if (dt == COLL_U8) {
    const uint8_t *s = src;
    for (size_t i = 0; i < n; i++) dst[i] = s[i];
  }
}

/* sum / world rounded to nearest, ties away from zero: for s >= 0 that is
 * floor((2s + w) / 2w). Done in 64 bits so 2s cannot overflow. */
static int64_t div_round_away(int64_t s, int64_t w) {
  int64_t q = (2 * (s < 0 ? -s : s) + w) / (2 * w);
  return s < 0 ? -q : q;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

/* A world below 1 cannot happen for a real comm; it is taken as 1 so that
 * the result is still the clamped sum rather than a division by zero. */
void coll__narrow_8bit(coll_dtype_t dt, coll_op_t op, void *dst,
                       const int32_t *src, size_t n, int world) {
  int64_t w = world < 1 ? 1 : world;
  int avg = op == COLL_AVG;
  if (dt == COLL_I8) {
    int8_t *d = dst;
    for (size_t i = 0; i < n; i++) {
      int64_t v = avg ? div_round_away(src[i], w) : src[i];
      d[i] = (int8_t)clamp64(v, INT8_MIN, INT8_MAX);
    }
  } else if (dt == COLL_U8) {
    uint8_t *d = dst;
    for (size_t i = 0; i < n; i++) {
      int64_t v = avg ? div_round_away(src[i], w) : src[i];
      d[i] = (uint8_t)clamp64(v, 0, UINT8_MAX);
    }
  }
}
