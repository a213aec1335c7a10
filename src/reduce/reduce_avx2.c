/* SPDX-License-Identifier: Apache-2.0 */
/* reduce_avx2.c: AVX2 + F16C kernels for f32, f64, f16 and bf16 (all four
 * ops, and scaling), bit for bit the scalar ones of reduce_ops.h.
 *
 * Each function carries its own target attribute, so the library builds
 * without -march and these run only where the dispatch found AVX2 + F16C.
 * f16 rounds with vcvtps2ph in round-to-nearest-even mode, which is exactly
 * coll__f2h; bf16 rounds with integer adds (as coll__f2bf does) because
 * AVX512_BF16's vcvtneps2bf16 flushes denormals. Tails run the scalar
 * element operations. */
#include "reduce/reduce_impl.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "reduce/reduce_ops.h"

#define AVX2 __attribute__((target("avx2,f16c")))

/* 8 f32 lanes: NaN results become the canonical NaN (reduce_ops.h). */
static inline AVX2 __m256 ps_canon(__m256 r) {
  __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32((int)COLL_NAN_F32));
  return _mm256_blendv_ps(r, nan, _mm256_cmp_ps(r, r, _CMP_UNORD_Q));
}

static inline AVX2 __m256 ps_sum(__m256 a, __m256 b) {
  return ps_canon(_mm256_add_ps(a, b));
}

static inline AVX2 __m256 ps_prod(__m256 a, __m256 b) {
  return ps_canon(_mm256_mul_ps(a, b));
}

/* maxps returns its second operand for equal inputs and for NaNs; taking
 * both orders and ANDing (max) or ORing (min) the bits settles +0/-0, and
 * the NaN lanes are then overwritten. */
static inline AVX2 __m256 ps_max(__m256 a, __m256 b) {
  __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32((int)COLL_NAN_F32));
  __m256 r = _mm256_and_ps(_mm256_max_ps(a, b), _mm256_max_ps(b, a));
  return _mm256_blendv_ps(r, nan, _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
}

static inline AVX2 __m256 ps_min(__m256 a, __m256 b) {
  __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32((int)COLL_NAN_F32));
  __m256 r = _mm256_or_ps(_mm256_min_ps(a, b), _mm256_min_ps(b, a));
  return _mm256_blendv_ps(r, nan, _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
}

/* 4 f64 lanes, the same rules. */
static inline AVX2 __m256d pd_canon(__m256d r) {
  __m256d nan =
      _mm256_castsi256_pd(_mm256_set1_epi64x((long long)COLL_NAN_F64));
  return _mm256_blendv_pd(r, nan, _mm256_cmp_pd(r, r, _CMP_UNORD_Q));
}

static inline AVX2 __m256d pd_sum(__m256d a, __m256d b) {
  return pd_canon(_mm256_add_pd(a, b));
}

static inline AVX2 __m256d pd_prod(__m256d a, __m256d b) {
  return pd_canon(_mm256_mul_pd(a, b));
}

static inline AVX2 __m256d pd_max(__m256d a, __m256d b) {
  __m256d nan =
      _mm256_castsi256_pd(_mm256_set1_epi64x((long long)COLL_NAN_F64));
  __m256d r = _mm256_and_pd(_mm256_max_pd(a, b), _mm256_max_pd(b, a));
  return _mm256_blendv_pd(r, nan, _mm256_cmp_pd(a, b, _CMP_UNORD_Q));
}

static inline AVX2 __m256d pd_min(__m256d a, __m256d b) {
  __m256d nan =
      _mm256_castsi256_pd(_mm256_set1_epi64x((long long)COLL_NAN_F64));
  __m256d r = _mm256_or_pd(_mm256_min_pd(a, b), _mm256_min_pd(b, a));
  return _mm256_blendv_pd(r, nan, _mm256_cmp_pd(a, b, _CMP_UNORD_Q));
}

/* Loads and stores of 8 elements as f32 lanes. */
static inline AVX2 __m256 ld_f32(const float *p) { return _mm256_loadu_ps(p); }
static inline AVX2 void st_f32(float *p, __m256 v) { _mm256_storeu_ps(p, v); }
static inline AVX2 __m256d ld_f64(const double *p) {
  return _mm256_loadu_pd(p);
}
static inline AVX2 void st_f64(double *p, __m256d v) { _mm256_storeu_pd(p, v); }

static inline AVX2 __m256 ld_f16(const uint16_t *p) {
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static inline AVX2 void st_f16(uint16_t *p, __m256 v) {
  _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

/* bf16, 16 elements a step. Unpacking with zero puts each element in the
 * high half of a 32-bit lane, which is its f32 value; after the rounding,
 * packus of the high halves restores the order, as unpack and pack both
 * work within 128-bit lanes. Rounding to nearest even on bit 16 is
 * u + 0x7fff + (bit 16); the lanes are never NaN there (the ops made them
 * canonical), so the add cannot wrap. */
static inline AVX2 __m256 bf_lo(__m256i x) {
  return _mm256_castsi256_ps(_mm256_unpacklo_epi16(_mm256_setzero_si256(), x));
}

static inline AVX2 __m256 bf_hi(__m256i x) {
  return _mm256_castsi256_ps(_mm256_unpackhi_epi16(_mm256_setzero_si256(), x));
}

static inline AVX2 __m256i bf_round(__m256 v) {
  __m256i u = _mm256_castps_si256(v);
  __m256i lsb =
      _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  u = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
  return _mm256_srli_epi32(u, 16);
}

static inline AVX2 __m256i bf_pack(__m256 lo, __m256 hi) {
  return _mm256_packus_epi32(bf_round(lo), bf_round(hi));
}

/* dst[i] = OP(dst[i], src[i]): W elements a step, then scalar tail. */
#define AVX2_KERNEL(name, T, W, LD, ST, VOP, SOP)                    \
  static AVX2 void name(void *dst, const void *src, size_t n) {      \
    T *d = dst;                                                      \
    const T *s = src;                                                \
    size_t i = 0;                                                    \
    for (; i + W <= n; i += W) ST(d + i, VOP(LD(d + i), LD(s + i))); \
    for (; i < n; i++) d[i] = SOP(d[i], s[i]);                       \
  }

#define AVX2_FAMILY(pre, T, W, LD, ST, V)                           \
  AVX2_KERNEL(pre##_sum, T, W, LD, ST, V##_sum, coll__sum_##pre)    \
  AVX2_KERNEL(pre##_prod, T, W, LD, ST, V##_prod, coll__prod_##pre) \
  AVX2_KERNEL(pre##_max, T, W, LD, ST, V##_max, coll__max_##pre)    \
  AVX2_KERNEL(pre##_min, T, W, LD, ST, V##_min, coll__min_##pre)

AVX2_FAMILY(f32, float, 8, ld_f32, st_f32, ps)
AVX2_FAMILY(f64, double, 4, ld_f64, st_f64, pd)
AVX2_FAMILY(f16, uint16_t, 8, ld_f16, st_f16, ps)

/* bf16: 16 elements, two f32 vectors (see bf_lo), a step. */
#define AVX2_BF16_KERNEL(name, VOP, SOP)                        \
  static AVX2 void name(void *dst, const void *src, size_t n) { \
    uint16_t *d = dst;                                          \
    const uint16_t *s = src;                                    \
    size_t i = 0;                                               \
    for (; i + 16 <= n; i += 16) {                              \
      __m256i a = _mm256_loadu_si256((const __m256i *)(d + i)); \
      __m256i b = _mm256_loadu_si256((const __m256i *)(s + i)); \
      __m256 lo = VOP(bf_lo(a), bf_lo(b));                      \
      __m256 hi = VOP(bf_hi(a), bf_hi(b));                      \
      _mm256_storeu_si256((__m256i *)(d + i), bf_pack(lo, hi)); \
    }                                                           \
    for (; i < n; i++) d[i] = SOP(d[i], s[i]);                  \
  }

AVX2_BF16_KERNEL(bf16_sum, ps_sum, coll__sum_bf16)
AVX2_BF16_KERNEL(bf16_prod, ps_prod, coll__prod_bf16)
AVX2_BF16_KERNEL(bf16_max, ps_max, coll__max_bf16)
AVX2_BF16_KERNEL(bf16_min, ps_min, coll__min_bf16)

/* dst[i] = src[i] * f, f the factor in the lane type. */
#define AVX2_SCALE(name, T, FT, W, LD, ST, SPLAT, VMUL, SOP)                   \
  static AVX2 void name(void *dst, const void *src, size_t n, double factor) { \
    T *d = dst;                                                                \
    const T *s = src;                                                          \
    FT f = (FT)factor;                                                         \
    size_t i = 0;                                                              \
    for (; i + W <= n; i += W) ST(d + i, VMUL(LD(s + i), SPLAT(f)));           \
    for (; i < n; i++) d[i] = SOP(s[i], f);                                    \
  }

AVX2_SCALE(scale_f32, float, float, 8, ld_f32, st_f32, _mm256_set1_ps, ps_prod,
           coll__prod_f32)
AVX2_SCALE(scale_f64, double, double, 4, ld_f64, st_f64, _mm256_set1_pd,
           pd_prod, coll__prod_f64)
AVX2_SCALE(scale_f16, uint16_t, float, 8, ld_f16, st_f16, _mm256_set1_ps,
           ps_prod, coll__scale_f16)

static AVX2 void scale_bf16(void *dst, const void *src, size_t n,
                            double factor) {
  uint16_t *d = dst;
  const uint16_t *s = src;
  float f = (float)factor;
  __m256 vf = _mm256_set1_ps(f);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i a = _mm256_loadu_si256((const __m256i *)(s + i));
    _mm256_storeu_si256((__m256i *)(d + i),
                        bf_pack(ps_prod(bf_lo(a), vf), ps_prod(bf_hi(a), vf)));
  }
  for (; i < n; i++) d[i] = coll__scale_bf16(s[i], f);
}

coll_reduce_fn_t coll__reduce_avx2(coll_dtype_t dt, coll_op_t op) {
  static const coll_reduce_fn_t fns[][4] = {
      [COLL_F16] = {f16_sum, f16_prod, f16_max, f16_min},
      [COLL_BF16] = {bf16_sum, bf16_prod, bf16_max, bf16_min},
      [COLL_F32] = {f32_sum, f32_prod, f32_max, f32_min},
      [COLL_F64] = {f64_sum, f64_prod, f64_max, f64_min},
  };
  if ((unsigned)dt > COLL_F64 || (unsigned)op > COLL_MIN) return NULL;
  return fns[dt][op];
}

coll_scale_fn_t coll__scale_avx2(coll_dtype_t dt) {
  switch (dt) {
    case COLL_F16: return scale_f16;
    case COLL_BF16: return scale_bf16;
    case COLL_F32: return scale_f32;
    case COLL_F64: return scale_f64;
    default: return NULL;
  }
}

#else /* not x86: no AVX2 kernels */

coll_reduce_fn_t coll__reduce_avx2(coll_dtype_t dt, coll_op_t op) {
  (void)dt;
  (void)op;
  return NULL;
}

coll_scale_fn_t coll__scale_avx2(coll_dtype_t dt) {
  (void)dt;
  return NULL;
}

#endif
