/* SPDX-License-Identifier: Apache-2.0 */
/* test_half.c: f16/bf16 <-> f32 conversions: every 16-bit pattern, every
 * rounding tie and its neighbours, random f32 patterns; against the test's
 * reference and, where the CPU has F16C, against the hardware. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "reduce/reduce.h"
#include "ref.h"
#include "test_util.h"
#include "tests.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif

#define RANDOM_F32 (test_quick() ? 1 << 16 : 1 << 20)

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static int h_is_nan(uint16_t h, int bf) {
  return bf ? (h & 0x7fff) > 0x7f80 : (h & 0x7fff) > 0x7c00;
}

/* Widening is exact; a NaN stays a NaN of the same sign. */
static void check_widen_all(int bf) {
  for (uint32_t i = 0; i <= 0xffff; i++) {
    uint16_t h = (uint16_t)i;
    float got = bf ? coll__bf16_to_f32(h) : coll__f16_to_f32(h);
    double want = bf ? ref_bf16_to_double(h) : ref_f16_to_double(h);
    if (h_is_nan(h, bf)) {
      if (!isnan(got) || (bits_of(got) >> 31) != (h >> 15u))
        fail_msg("%s 0x%04x: got 0x%08x, want a NaN of the same sign",
                 bf ? "bf16" : "f16", h, bits_of(got));
    } else if ((double)got != want || !signbit(got) != !signbit(want)) {
      fail_msg("%s 0x%04x: got %a, want %a", bf ? "bf16" : "f16", h,
               (double)got, want);
    }
  }
}

/* Narrowing a widened value gives it back; a NaN stays a NaN, same sign. */
static void check_round_trip_all(int bf) {
  for (uint32_t i = 0; i <= 0xffff; i++) {
    uint16_t h = (uint16_t)i, back;
    back = bf ? coll__f32_to_bf16(coll__bf16_to_f32(h))
              : coll__f32_to_f16(coll__f16_to_f32(h));
    if (h_is_nan(h, bf) ? !h_is_nan(back, bf) || (back >> 15) != (h >> 15)
                        : back != h)
      fail_msg("%s 0x%04x: round trip gave 0x%04x", bf ? "bf16" : "f16", h,
               back);
  }
}

static void check_narrow_one(float f, int bf) {
  uint16_t got = bf ? coll__f32_to_bf16(f) : coll__f32_to_f16(f);
  uint16_t want;
  if (isnan(f)) {
    if (!h_is_nan(got, bf) || (got >> 15) != (bits_of(f) >> 31))
      fail_msg("%s of NaN 0x%08x gave 0x%04x", bf ? "bf16" : "f16", bits_of(f),
               got);
    return;
  }
  want = bf ? ref_bf16_from_double(f) : ref_f16_from_double(f);
  if (got != want)
    fail_msg("%s of %a (0x%08x): got 0x%04x, want 0x%04x", bf ? "bf16" : "f16",
             (double)f, bits_of(f), got, want);
}

/* Every midpoint between neighbouring 16-bit values (exact in f32), the
 * f32 values just beside it, of both signs; then random f32 patterns. */
static void check_narrow(int bf) {
  uint16_t top = bf ? 0x7f80 : 0x7c00; /* +inf */
  uint64_t rng = bf ? 202 : 101;
  for (uint16_t h = 0; h < top; h++) {
    double lo = bf ? ref_bf16_to_double(h) : ref_f16_to_double(h);
    double hi = (uint16_t)(h + 1) == top
                    ? (bf ? ldexp(1, 128) : 65536.0) /* next power */
                    : (bf ? ref_bf16_to_double((uint16_t)(h + 1))
                          : ref_f16_to_double((uint16_t)(h + 1)));
    float mid = (float)((lo + hi) / 2);
    for (int s = 0; s < 2; s++) {
      float m = s ? -mid : mid;
      check_narrow_one(m, bf);
      check_narrow_one(nextafterf(m, INFINITY), bf);
      check_narrow_one(nextafterf(m, -INFINITY), bf);
    }
  }
  for (int i = 0; i < RANDOM_F32; i++)
    check_narrow_one(float_of((uint32_t)test_rand(&rng)), bf);
}

static void test_f16_widen(void **state) {
  (void)state;
  check_widen_all(0);
}

static void test_bf16_widen(void **state) {
  (void)state;
  check_widen_all(1);
}

static void test_f16_round_trip(void **state) {
  (void)state;
  check_round_trip_all(0);
}

static void test_bf16_round_trip(void **state) {
  (void)state;
  check_round_trip_all(1);
}

static void test_f16_narrow(void **state) {
  (void)state;
  check_narrow(0);
}

static void test_bf16_narrow(void **state) {
  (void)state;
  check_narrow(1);
}

#if HAVE_X86
/* The kernels' SIMD paths convert with F16C; the scalar conversions must
 * agree with it on every bit, NaN payloads included. */
__attribute__((target("f16c"))) static uint16_t hw_f2h(float f) {
  __m128i r = _mm_cvtps_ph(_mm_set1_ps(f), _MM_FROUND_TO_NEAREST_INT);
  return (uint16_t)_mm_extract_epi16(r, 0);
}

__attribute__((target("f16c"))) static float hw_h2f(uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_set1_epi16((short)h)));
}

/* F16C from CPUID (clang before 16 has no "f16c" cpu feature string); it
 * runs on the AVX register state. */
static int have_f16c(void) {
  unsigned a, b, c, d;
  return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) &&
         (c & bit_F16C) != 0;
}

static void test_f16_matches_f16c(void **state) {
  uint64_t rng = 303;
  (void)state;
  if (!have_f16c()) {
    printf("note: no F16C on this CPU; hardware comparison skipped\n");
    return;
  }
  for (uint32_t i = 0; i <= 0xffff; i++) {
    float got = coll__f16_to_f32((uint16_t)i), want = hw_h2f((uint16_t)i);
    if (bits_of(got) != bits_of(want))
      fail_msg("f16 0x%04x: got 0x%08x, F16C 0x%08x", i, bits_of(got),
               bits_of(want));
  }
  for (int i = 0; i < RANDOM_F32; i++) {
    float f = float_of((uint32_t)test_rand(&rng));
    if (coll__f32_to_f16(f) != hw_f2h(f))
      fail_msg("f32 0x%08x: got 0x%04x, F16C 0x%04x", bits_of(f),
               coll__f32_to_f16(f), hw_f2h(f));
  }
}
#endif

int test_half_run(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_f16_widen),
    cmocka_unit_test(test_bf16_widen),
    cmocka_unit_test(test_f16_round_trip),
    cmocka_unit_test(test_bf16_round_trip),
    cmocka_unit_test(test_f16_narrow),
    cmocka_unit_test(test_bf16_narrow),
#if HAVE_X86
    cmocka_unit_test(test_f16_matches_f16c),
#endif
  };
  return cmocka_run_group_tests_name("f16/bf16 conversions", tests, NULL, NULL);
}
