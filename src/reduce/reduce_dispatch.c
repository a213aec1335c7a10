/* SPDX-License-Identifier: Apache-2.0 */
/* reduce_dispatch.c: picks the kernels' instruction set once (CPU features
 * and COLL_SIMD) and hands out the kernel for each (dtype, op). */
#include <string.h>
#include <strings.h>
#include <uv.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "core/env.h"
#include "core/log.h"
#include "reduce/reduce_impl.h"

static const char *const isa_names[COLL_ISA_COUNT] = {"scalar", "avx2",
                                                      "avx512"};

static uv_once_t isa_once = UV_ONCE_INIT;
static coll_isa_t isa_chosen = COLL_ISA_SCALAR; /* written once, in isa_init */

const char *coll__isa_name(coll_isa_t isa) {
  return (unsigned)isa < COLL_ISA_COUNT ? isa_names[isa] : "?";
}

int coll__isa_from_name(const char *isa) {
  for (int i = 0; isa != NULL && i < COLL_ISA_COUNT; i++)
    if (strcasecmp(isa, isa_names[i]) == 0) return i;
  return -1;
}

#if defined(__x86_64__) || defined(__i386__)
/* F16C from CPUID leaf 1: clang before 16 knows no "f16c" for
 * __builtin_cpu_supports. F16C uses the AVX register state, which the
 * "avx2" check below has found saved by the OS. */
static int cpu_has_f16c(void) {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}
#endif

/* __builtin_cpu_supports also checks that the OS saves the AVX/AVX-512
 * register state (XGETBV), so a "yes" means the instructions will run. */
int coll__isa_supported(coll_isa_t isa) {
#if defined(__x86_64__) || defined(__i386__)
  switch (isa) {
    case COLL_ISA_SCALAR: return 1;
    case COLL_ISA_AVX2: return __builtin_cpu_supports("avx2") && cpu_has_f16c();
    case COLL_ISA_AVX512:
      return coll__isa_supported(COLL_ISA_AVX2) &&
             __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
    default: return 0;
  }
#else
  return isa == COLL_ISA_SCALAR;
#endif
}

static coll_isa_t isa_best(void) {
  int i = COLL_ISA_COUNT - 1;
  while (i > COLL_ISA_SCALAR && !coll__isa_supported((coll_isa_t)i)) i--;
  return (coll_isa_t)i;
}

coll_isa_t coll__isa_pick(const char *want) {
  int i;
  if (want == NULL || strcasecmp(want, "auto") == 0) return isa_best();
  i = coll__isa_from_name(want);
  if (i < 0) {
    COLL_WARN(COLL_LOG_INIT,
              "COLL_SIMD=%s is not auto, scalar, avx2 or avx512; using %s",
              want, isa_names[isa_best()]);
    return isa_best();
  }
  if (!coll__isa_supported((coll_isa_t)i)) {
    COLL_WARN(COLL_LOG_INIT, "COLL_SIMD=%s: this CPU lacks %s; using %s", want,
              want, isa_names[isa_best()]);
    return isa_best();
  }
  return (coll_isa_t)i;
}

static void isa_init(void) {
  isa_chosen = coll__isa_pick(coll__knob_word(COLL_ENV_SIMD));
  COLL_INFO(COLL_LOG_INIT, "reduction kernels: %s", isa_names[isa_chosen]);
}

static coll_isa_t isa_get(void) {
  uv_once(&isa_once, isa_init);
  return isa_chosen;
}

const char *coll__reduce_isa(void) { return isa_names[isa_get()]; }

coll_reduce_fn_t coll__reduce_fn_scalar(coll_dtype_t dt, coll_op_t op) {
  coll_reduce_fn_t fn;
  if ((unsigned)dt >= COLL_DTYPE_COUNT || (unsigned)op > COLL_MIN) return NULL;
  fn = coll__reduce_float_scalar(dt, op);
  if (fn == NULL) fn = coll__reduce_half_scalar(dt, op);
  if (fn == NULL) fn = coll__reduce_int_scalar(dt, op);
  return fn;
}

/* The best kernel up to `isa`; the caller has checked dt, op and support. */
static coll_reduce_fn_t reduce_fn_upto(coll_isa_t isa, coll_dtype_t dt,
                                       coll_op_t op) {
  coll_reduce_fn_t fn = NULL;
  if (isa >= COLL_ISA_AVX512) fn = coll__reduce_avx512(dt, op);
  if (fn == NULL && isa >= COLL_ISA_AVX2) fn = coll__reduce_avx2(dt, op);
  return fn != NULL ? fn : coll__reduce_fn_scalar(dt, op);
}

coll_reduce_fn_t coll__reduce_fn(coll_dtype_t dt, coll_op_t op) {
  if ((unsigned)dt >= COLL_DTYPE_COUNT || (unsigned)op > COLL_MIN) return NULL;
  return reduce_fn_upto(isa_get(), dt, op);
}

coll_reduce_fn_t coll__reduce_fn_isa(const char *isa, coll_dtype_t dt,
                                     coll_op_t op) {
  int i = coll__isa_from_name(isa);
  if (i < 0 || !coll__isa_supported((coll_isa_t)i)) return NULL;
  if ((unsigned)dt >= COLL_DTYPE_COUNT || (unsigned)op > COLL_MIN) return NULL;
  return reduce_fn_upto((coll_isa_t)i, dt, op);
}

static coll_scale_fn_t scale_fn_upto(coll_isa_t isa, coll_dtype_t dt) {
  coll_scale_fn_t fn = NULL;
  if ((unsigned)dt >= COLL_DTYPE_COUNT) return NULL;
  if (isa >= COLL_ISA_AVX512) fn = coll__scale_avx512(dt);
  if (fn == NULL && isa >= COLL_ISA_AVX2) fn = coll__scale_avx2(dt);
  return fn != NULL ? fn : coll__scale_scalar(dt);
}

coll_scale_fn_t coll__scale_fn(coll_dtype_t dt) {
  return scale_fn_upto(isa_get(), dt);
}

coll_scale_fn_t coll__scale_fn_isa(const char *isa, coll_dtype_t dt) {
  int i = coll__isa_from_name(isa);
  if (i < 0 || !coll__isa_supported((coll_isa_t)i)) return NULL;
  return scale_fn_upto((coll_isa_t)i, dt);
}
