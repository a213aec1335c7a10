/* SPDX-License-Identifier: Apache-2.0 */
/* reduce_avx512.c: AVX-512 (F/BW/VL) kernels for f32, f64, f16 and bf16
 * (all four ops, and scaling), bit for bit the scalar ones of reduce_ops.h.
 *
 * The same scheme as reduce_avx2.c with twice the lanes; tails use masked
 * loads and stores instead of a scalar loop. f16 rounds with vcvtps2ph
 * (round to nearest even), bf16 with integer adds, never vcvtneps2bf16,
 * which flushes denormals. */
#include "reduce/reduce_impl.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "reduce/reduce_ops.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,f16c")))

/* 16 f32 lanes; NaN results become the canonical NaN. The bit operations
 * go through the integer forms: the float ones need AVX512DQ. */
static inline AVX512 __m512 ps_nan(void) {
  return _mm512_castsi512_ps(_mm512_set1_epi32((int)COLL_NAN_F32));
}

static inline AVX512 __m512 ps_canon(__m512 r) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(r, r, _CMP_UNORD_Q), r,
                              ps_nan());
}

static inline AVX512 __m512 ps_sum(__m512 a, __m512 b) {
  return ps_canon(_mm512_add_ps(a, b));
}

static inline AVX512 __m512 ps_prod(__m512 a, __m512 b) {
  return ps_canon(_mm512_mul_ps(a, b));
}

/* Both operand orders, ANDed (max) or ORed (min), settle +0/-0. */
static inline AVX512 __m512 ps_max(__m512 a, __m512 b) {
  __m512i r = _mm512_and_si512(_mm512_castps_si512(_mm512_max_ps(a, b)),
                               _mm512_castps_si512(_mm512_max_ps(b, a)));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q),
                              _mm512_castsi512_ps(r), ps_nan());
}

static inline AVX512 __m512 ps_min(__m512 a, __m512 b) {
  __m512i r = _mm512_or_si512(_mm512_castps_si512(_mm512_min_ps(a, b)),
                              _mm512_castps_si512(_mm512_min_ps(b, a)));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q),
                              _mm512_castsi512_ps(r), ps_nan());
}

/* 8 f64 lanes, the same rules. */
static inline AVX512 __m512d pd_nan(void) {
  return _mm512_castsi512_pd(_mm512_set1_epi64((long long)COLL_NAN_F64));
}

static inline AVX512 __m512d pd_canon(__m512d r) {
  return _mm512_mask_blend_pd(_mm512_cmp_pd_mask(r, r, _CMP_UNORD_Q), r,
                              pd_nan());
}

static inline AVX512 __m512d pd_sum(__m512d a, __m512d b) {
  return pd_canon(_mm512_add_pd(a, b));
}

static inline AVX512 __m512d pd_prod(__m512d a, __m512d b) {
  return pd_canon(_mm512_mul_pd(a, b));
}

static inline AVX512 __m512d pd_max(__m512d a, __m512d b) {
  __m512i r = _mm512_and_si512(_mm512_castpd_si512(_mm512_max_pd(a, b)),
                               _mm512_castpd_si512(_mm512_max_pd(b, a)));
  return _mm512_mask_blend_pd(_mm512_cmp_pd_mask(a, b, _CMP_UNORD_Q),
                              _mm512_castsi512_pd(r), pd_nan());
}

static inline AVX512 __m512d pd_min(__m512d a, __m512d b) {
  __m512i r = _mm512_or_si512(_mm512_castpd_si512(_mm512_min_pd(a, b)),
                              _mm512_castpd_si512(_mm512_min_pd(b, a)));
  return _mm512_mask_blend_pd(_mm512_cmp_pd_mask(a, b, _CMP_UNORD_Q),
                              _mm512_castsi512_pd(r), pd_nan());
}

/* Masked loads and stores of up to one vector of elements; m has a bit per
 * element. Masked-off lanes read as zero and are never written. */
static inline AVX512 __m512 ld_f32(const float *p, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, p);
}

static inline AVX512 void st_f32(float *p, __mmask16 m, __m512 v) {
  _mm512_mask_storeu_ps(p, m, v);
}

static inline AVX512 __m512d ld_f64(const double *p, __mmask8 m) {
  return _mm512_maskz_loadu_pd(m, p);
}

static inline AVX512 void st_f64(double *p, __mmask8 m, __m512d v) {
  _mm512_mask_storeu_pd(p, m, v);
}

static inline AVX512 __m512 ld_f16(const uint16_t *p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

static inline AVX512 void st_f16(uint16_t *p, __mmask16 m, __m512 v) {
  _mm256_mask_storeu_epi16(p, m, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

/* bf16, 32 elements a step, as in reduce_avx2.c: unpacking with zero
 * widens, packus of the rounded high halves narrows back in order (both
 * work within 128-bit lanes). The lanes are never NaN at the rounding. */
static inline AVX512 __m512 bf_lo(__m512i x) {
  return _mm512_castsi512_ps(_mm512_unpacklo_epi16(_mm512_setzero_si512(), x));
}

static inline AVX512 __m512 bf_hi(__m512i x) {
  return _mm512_castsi512_ps(_mm512_unpackhi_epi16(_mm512_setzero_si512(), x));
}

static inline AVX512 __m512i bf_round(__m512 v) {
  __m512i u = _mm512_castps_si512(v);
  __m512i lsb =
      _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  u = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  return _mm512_srli_epi32(u, 16);
}

static inline AVX512 __m512i bf_pack(__m512 lo, __m512 hi) {
  return _mm512_packus_epi32(bf_round(lo), bf_round(hi));
}

/* dst[i] = OP(dst[i], src[i]): full vectors, then one masked vector. */
#define AVX512_KERNEL(name, T, W, M, LD, ST, VOP)                 \
  static AVX512 void name(void *dst, const void *src, size_t n) { \
    T *d = dst;                                                   \
    const T *s = src;                                             \
    const M all = (M)0xffffu; /* every lane */                    \
    size_t i = 0;                                                 \
    for (; i + W <= n; i += W)                                    \
      ST(d + i, all, VOP(LD(d + i, all), LD(s + i, all)));        \
    if (i < n) {                                                  \
      M m = (M)((1u << (n - i)) - 1u);                            \
      ST(d + i, m, VOP(LD(d + i, m), LD(s + i, m)));              \
    }                                                             \
  }

#define AVX512_FAMILY(pre, T, W, M, LD, ST, V)         \
  AVX512_KERNEL(pre##_sum, T, W, M, LD, ST, V##_sum)   \
  AVX512_KERNEL(pre##_prod, T, W, M, LD, ST, V##_prod) \
  AVX512_KERNEL(pre##_max, T, W, M, LD, ST, V##_max)   \
  AVX512_KERNEL(pre##_min, T, W, M, LD, ST, V##_min)

AVX512_FAMILY(f32, float, 16, __mmask16, ld_f32, st_f32, ps)
AVX512_FAMILY(f64, double, 8, __mmask8, ld_f64, st_f64, pd)
AVX512_FAMILY(f16, uint16_t, 16, __mmask16, ld_f16, st_f16, ps)

/* bf16: 32 elements, two f32 vectors (see bf_lo), a step; masked tail. */
#define AVX512_BF16_STEP(VOP, dp, sp, m)              \
  do {                                                \
    __m512i a = _mm512_maskz_loadu_epi16(m, dp);      \
    __m512i b = _mm512_maskz_loadu_epi16(m, sp);      \
    __m512 lo = VOP(bf_lo(a), bf_lo(b));              \
    __m512 hi = VOP(bf_hi(a), bf_hi(b));              \
    _mm512_mask_storeu_epi16(dp, m, bf_pack(lo, hi)); \
  } while (0)

#define AVX512_BF16_KERNEL(name, VOP)                                         \
  static AVX512 void name(void *dst, const void *src, size_t n) {             \
    uint16_t *d = dst;                                                        \
    const uint16_t *s = src;                                                  \
    size_t i = 0;                                                             \
    for (; i + 32 <= n; i += 32)                                              \
      AVX512_BF16_STEP(VOP, d + i, s + i, 0xffffffffu);                       \
    if (i < n)                                                                \
      AVX512_BF16_STEP(VOP, d + i, s + i, (__mmask32)((1u << (n - i)) - 1u)); \
  }

AVX512_BF16_KERNEL(bf16_sum, ps_sum)
AVX512_BF16_KERNEL(bf16_prod, ps_prod)
AVX512_BF16_KERNEL(bf16_max, ps_max)
AVX512_BF16_KERNEL(bf16_min, ps_min)

/* dst[i] = src[i] * f, f the factor in the lane type. */
#define AVX512_SCALE(name, T, FT, W, M, LD, ST, SPLAT, VMUL)    \
  static AVX512 void name(void *dst, const void *src, size_t n, \
                          double factor) {                      \
    T *d = dst;                                                 \
    const T *s = src;                                           \
    const M all = (M)0xffffu; /* every lane */                  \
    size_t i = 0;                                               \
    for (; i + W <= n; i += W)                                  \
      ST(d + i, all, VMUL(LD(s + i, all), SPLAT((FT)factor)));  \
    if (i < n) {                                                \
      M m = (M)((1u << (n - i)) - 1u);                          \
      ST(d + i, m, VMUL(LD(s + i, m), SPLAT((FT)factor)));      \
    }                                                           \
  }

AVX512_SCALE(scale_f32, float, float, 16, __mmask16, ld_f32, st_f32,
             _mm512_set1_ps, ps_prod)
AVX512_SCALE(scale_f64, double, double, 8, __mmask8, ld_f64, st_f64,
             _mm512_set1_pd, pd_prod)
AVX512_SCALE(scale_f16, uint16_t, float, 16, __mmask16, ld_f16, st_f16,
             _mm512_set1_ps, ps_prod)

static AVX512 void scale_bf16(void *dst, const void *src, size_t n,
                              double factor) {
  uint16_t *d = dst;
  const uint16_t *s = src;
  __m512 vf = _mm512_set1_ps((float)factor);
  for (size_t i = 0; i < n; i += 32) {
    __mmask32 m = n - i >= 32 ? 0xffffffffu : (1u << (n - i)) - 1u;
    __m512i a = _mm512_maskz_loadu_epi16(m, s + i);
    _mm512_mask_storeu_epi16(
        d + i, m, bf_pack(ps_prod(bf_lo(a), vf), ps_prod(bf_hi(a), vf)));
  }
}

coll_reduce_fn_t coll__reduce_avx512(coll_dtype_t dt, coll_op_t op) {
  static const coll_reduce_fn_t fns[][4] = {
      [COLL_F16] = {f16_sum, f16_prod, f16_max, f16_min},
      [COLL_BF16] = {bf16_sum, bf16_prod, bf16_max, bf16_min},
      [COLL_F32] = {f32_sum, f32_prod, f32_max, f32_min},
      [COLL_F64] = {f64_sum, f64_prod, f64_max, f64_min},
  };
  if ((unsigned)dt > COLL_F64 || (unsigned)op > COLL_MIN) return NULL;
  return fns[dt][op];
}

coll_scale_fn_t coll__scale_avx512(coll_dtype_t dt) {
  switch (dt) {
    case COLL_F16: return scale_f16;
    case COLL_BF16: return scale_bf16;
    case COLL_F32: return scale_f32;
    case COLL_F64: return scale_f64;
    default: return NULL;
  }
}

#else /* not x86: no AVX-512 kernels */

coll_reduce_fn_t coll__reduce_avx512(coll_dtype_t dt, coll_op_t op) {
  (void)dt;
  (void)op;
  return NULL;
}

coll_scale_fn_t coll__scale_avx512(coll_dtype_t dt) {
  (void)dt;
  return NULL;
}

#endif
