/* SPDX-License-Identifier: Apache-2.0 */
/* api_test.c: failure log, deterministic inputs and the serial reference
 * shared by the public-API tests. Written independently of the library's
 * own kernels: the reference must not share their mistakes. */
#include "api_test.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- failure log ------------------------------------------------------- */

void t_fail_init(t_fail_t *f) {
  memset(f, 0, sizeof *f);
  pthread_mutex_init(&f->mu, NULL);
}

void t_fail(t_fail_t *f, const char *fmt, ...) {
  va_list ap;
  pthread_mutex_lock(&f->mu);
  if (f->count < T_FAIL_KEEP) {
    va_start(ap, fmt);
    vsnprintf(f->first[f->count], sizeof f->first[0], fmt, ap);
    va_end(ap);
  }
  f->count++;
  pthread_mutex_unlock(&f->mu);
}

int t_fail_report(t_fail_t *f, const char *what) {
  int i, n;
  pthread_mutex_lock(&f->mu);
  n = f->count;
  for (i = 0; i < n && i < T_FAIL_KEEP; i++)
    fprintf(stderr, "FAIL %s: %s\n", what, f->first[i]);
  if (n > T_FAIL_KEEP)
    fprintf(stderr, "FAIL %s: ... and %d more\n", what, n - T_FAIL_KEEP);
  pthread_mutex_unlock(&f->mu);
  return n;
}

void t_fail_destroy(t_fail_t *f) { pthread_mutex_destroy(&f->mu); }

int t_expect(t_fail_t *f, coll_status_t s, coll_status_t want, const char *fmt,
             ...) {
  char what[256];
  va_list ap;
  if (s == want) return 1;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  t_fail(f, "%s: returned %s, expected %s (last error: \"%s\")", what,
         coll_status_name(s), coll_status_name(want), coll_last_error());
  return 0;
}

int t_expect_err(t_fail_t *f, coll_status_t s, coll_status_t want,
                 const char *name, const char *call, int line) {
  if (s != want) {
    t_fail(f, "line %d: %s returned %s, expected %s (\"%s\")", line, call,
           coll_status_name(s), coll_status_name(want), coll_last_error());
    return 0;
  }
  if (want != COLL_OK && !t_err_names(name)) {
    t_fail(f,
           "line %d: %s returned %s but its error text \"%s\" does not "
           "name \"%s\"",
           line, call, coll_status_name(s), coll_last_error(), name);
    return 0;
  }
  return 1;
}

/* Sanitizer builds run several times slower: they take the quick matrix. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define T_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define T_SANITIZED 1
#endif
#endif
#ifndef T_SANITIZED
#define T_SANITIZED 0
#endif

int t_quick(void) {
  const char *q = getenv("TEST_QUICK");
  if (q != NULL && q[0] != '\0') return strcmp(q, "0") != 0;
  return T_SANITIZED;
}

/* ---- inputs and reference ---------------------------------------------- */

static uint64_t splitmix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* t_mix(a, b, c) = splitmix(seed(a, b) ^ c): loops over c hoist the seed. */
static uint64_t seed_of(uint64_t a, uint64_t b) {
  return splitmix(splitmix(a) ^ b);
}

uint64_t t_mix(uint64_t a, uint64_t b, uint64_t c) {
  return splitmix(seed_of(a, b) ^ c);
}

/* Float inputs come from small value sets, rounded to each dtype once and
 * kept with their bits, so that generating and reducing them stays cheap:
 *  SUM/AVG: integers in [-8, 8]: every partial sum of up to 8 ranks is an
 *           integer of magnitude <= 64, exact even in bf16;
 *  PROD:    powers of two (and zero): every partial product is exact;
 *  MAX/MIN: multiples of 1/16 in [-125, 125], rounded to the dtype. */
#define N_SUM 17
#define N_PROD 7
#define N_MM 4001
static const double k_pow2[N_PROD] = {-2.0, -1.0, -0.5, 0.5, 1.0, 2.0, 0.0};

typedef struct vset {
  double v[N_MM];
  uint64_t bits[N_MM];
} vset_t;

static struct { vset_t sum, prod, mm; } g_sets[4]; /* F16, BF16, F32, F64 */
static pthread_once_t g_sets_once = PTHREAD_ONCE_INIT;

static void vset_put(vset_t *s, coll_dtype_t dt, int k, double v) {
  unsigned char b[8] = {0};
  s->v[k] = t_round(dt, v);
  t_store_f(dt, b, 0, s->v[k]);
  memcpy(&s->bits[k], b, 8);
}

static void sets_init(void) {
  int d, k;
  for (d = 0; d < 4; d++) {
    coll_dtype_t dt = (coll_dtype_t)d; /* COLL_F16..COLL_F64 are 0..3 */
    for (k = 0; k < N_SUM; k++) vset_put(&g_sets[d].sum, dt, k, k - 8);
    for (k = 0; k < N_PROD; k++) vset_put(&g_sets[d].prod, dt, k, k_pow2[k]);
    for (k = 0; k < N_MM; k++)
      vset_put(&g_sets[d].mm, dt, k, (double)(k - 2000) / 16.0);
  }
}

/* The set and index of a float input. */
static const vset_t *gen_float(coll_dtype_t dt, coll_op_t op, uint64_t h,
                               int *k) {
  pthread_once(&g_sets_once, sets_init);
  switch (op) {
    case COLL_SUM:
    case COLL_AVG: *k = (int)(h % N_SUM); return &g_sets[dt].sum;
    case COLL_PROD:
      *k = (h % 37 == 0) ? N_PROD - 1 : (int)((h >> 8) % (N_PROD - 1));
      return &g_sets[dt].prod;
    default: *k = (int)(h % N_MM); return &g_sets[dt].mm;
  }
}

static int64_t gen_int(coll_dtype_t dt, coll_op_t op, size_t idx, uint64_t h) {
  int clampy = (op == COLL_SUM || op == COLL_AVG);
  switch (dt) {
    case COLL_I8:
      /* 100 or -100 on every rank makes the sum leave the range. */
      if (clampy && idx % 4 == 0) return 100;
      if (clampy && idx % 4 == 1) return -100;
      return (int64_t)(int8_t)(uint8_t)(h >> 17);
    case COLL_U8:
      if (clampy && idx % 4 == 0) return 100;
      if (clampy && idx % 4 == 1) return 250;
      return (int64_t)(uint8_t)(h >> 17);
    case COLL_I32:
      /* Full range: sums and products overflow and must wrap. */
      return (int64_t)(int32_t)(uint32_t)(h >> 11);
    default: return (int64_t)h;
  }
}

static void gen_seeded(coll_dtype_t dt, coll_op_t op, uint64_t seed, size_t idx,
                       void *buf, size_t i) {
  uint64_t h = splitmix(seed ^ (uint64_t)idx);
  if (t_is_float(dt)) {
    int k;
    const vset_t *s = gen_float(dt, op, h, &k);
    memcpy((char *)buf + i * t_size(dt), &s->bits[k], t_size(dt));
  } else {
    t_store_i(dt, buf, i, gen_int(dt, op, idx, h));
  }
}

void t_gen(coll_dtype_t dt, coll_op_t op, int rank, size_t idx, uint64_t cas,
           void *buf, size_t i) {
  gen_seeded(dt, op, seed_of(cas, (uint64_t)rank), idx, buf, i);
}

void t_gen_n(coll_dtype_t dt, coll_op_t op, int rank, size_t idx0, uint64_t cas,
             void *buf, size_t n) {
  uint64_t seed = seed_of(cas, (uint64_t)rank);
  size_t i;
  for (i = 0; i < n; i++) gen_seeded(dt, op, seed, idx0 + i, buf, i);
}

#define T_MAX_RANKS 64

static void ref_float(coll_dtype_t dt, coll_op_t op, int world, size_t idx,
                      const uint64_t *seeds, void *out) {
  double acc = 0.0;
  int q;
  for (q = 0; q < world; q++) {
    int k;
    const vset_t *s = gen_float(dt, op, splitmix(seeds[q] ^ (uint64_t)idx), &k);
    double x = s->v[k];
    if (q == 0) {
      acc = x;
      continue;
    }
    switch (op) {
      case COLL_PROD: acc *= x; break;
      case COLL_MAX: acc = x > acc ? x : acc; break;
      case COLL_MIN: acc = x < acc ? x : acc; break;
      default: acc += x; break;
    }
  }
  if (op == COLL_AVG) {
    /* The sum (exact) scaled once by 1/n: in f64 for f64, else in f32 and
     * then rounded to the dtype. */
    if (dt == COLL_F64) {
      acc = acc * (1.0 / world);
    } else {
      volatile float p = (float)acc * (float)(1.0 / world);
      acc = p;
    }
  }
  t_store_f(dt, out, 0, acc);
}

static int64_t clamp_i64(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

static void ref_int(coll_dtype_t dt, coll_op_t op, int world, size_t idx,
                    const uint64_t *seeds, void *out) {
  uint64_t wrap = 0;
  int64_t exact = 0, ext = 0, res;
  int q, narrow = (dt == COLL_I8 || dt == COLL_U8);
  for (q = 0; q < world; q++) {
    int64_t x = gen_int(dt, op, idx, splitmix(seeds[q] ^ (uint64_t)idx));
    if (q == 0) {
      wrap = (uint64_t)x;
      exact = ext = x;
      continue;
    }
    if (op == COLL_PROD)
      wrap *= (uint64_t)x;
    else
      wrap += (uint64_t)x;
    if (narrow) exact += x; /* 8-bit sums only: cannot overflow */
    if (op == COLL_MAX && x > ext) ext = x;
    if (op == COLL_MIN && x < ext) ext = x;
  }
  switch (op) {
    case COLL_MAX:
    case COLL_MIN: res = ext; break;
    case COLL_PROD:
      res = (int64_t)wrap; /* truncation by t_store_i wraps */
      break;
    case COLL_SUM:
      if (dt == COLL_I8)
        res = clamp_i64(exact, INT8_MIN, INT8_MAX);
      else if (dt == COLL_U8)
        res = clamp_i64(exact, 0, UINT8_MAX);
      else
        res = (int64_t)wrap;
      break;
    default: /* AVG */
      if (narrow)
        res = (int64_t)round((double)exact / (double)world);
      else if (dt == COLL_I32)
        res = (int64_t)((int32_t)(uint32_t)wrap / world);
      else
        res = (int64_t)wrap / world;
      break;
  }
  t_store_i(dt, out, 0, res);
}

static void seeds_of(uint64_t cas, int world, uint64_t *seeds) {
  int q;
  for (q = 0; q < world && q < T_MAX_RANKS; q++)
    seeds[q] = seed_of(cas, (uint64_t)q);
}

static void ref_seeded(coll_dtype_t dt, coll_op_t op, int world, size_t idx,
                       const uint64_t *seeds, void *out) {
  if (t_is_float(dt))
    ref_float(dt, op, world, idx, seeds, out);
  else
    ref_int(dt, op, world, idx, seeds, out);
}

void t_ref(coll_dtype_t dt, coll_op_t op, int world, size_t idx, uint64_t cas,
           void *out) {
  uint64_t seeds[T_MAX_RANKS];
  seeds_of(cas, world, seeds);
  ref_seeded(dt, op, world, idx, seeds, out);
}

void t_bytes(int rank, uint64_t cas, void *buf, size_t n) {
  unsigned char *p = buf;
  size_t i;
  for (i = 0; i < n; i += 8) {
    uint64_t h = t_mix(cas ^ 0x5bd1e995u, (uint64_t)rank, i);
    memcpy(p + i, &h, n - i < 8 ? n - i : 8);
  }
}

static void mismatch(t_fail_t *f, const char *what, const char *kind,
                     coll_dtype_t dt, size_t i, const void *got,
                     const void *want) {
  char g[64], w[64];
  t_fmt(dt, got, 0, g, sizeof g);
  t_fmt(dt, want, 0, w, sizeof w);
  t_fail(f, "%s: %s element %zu is %s, expected %s", what, kind, i, g, w);
}

int t_check_reduced(t_fail_t *f, const char *what, coll_dtype_t dt,
                    coll_op_t op, int world, size_t idx0, uint64_t cas,
                    const void *got, size_t n) {
  size_t es = t_size(dt), i;
  unsigned char want[8];
  uint64_t seeds[T_MAX_RANKS];
  if (world > T_MAX_RANKS) {
    t_fail(f, "%s: the reference handles at most %d ranks", what, T_MAX_RANKS);
    return 0;
  }
  seeds_of(cas, world, seeds);
  for (i = 0; i < n; i++) {
    const unsigned char *g = (const unsigned char *)got + i * es;
    ref_seeded(dt, op, world, idx0 + i, seeds, want);
    if (memcmp(g, want, es) != 0) {
      mismatch(f, what, "result", dt, i, g, want);
      return 0;
    }
  }
  return 1;
}

int t_check_input(t_fail_t *f, const char *what, coll_dtype_t dt, coll_op_t op,
                  int rank, size_t idx0, uint64_t cas, const void *got,
                  size_t n) {
  size_t es = t_size(dt), i;
  unsigned char want[8];
  uint64_t seed = seed_of(cas, (uint64_t)rank);
  for (i = 0; i < n; i++) {
    const unsigned char *g = (const unsigned char *)got + i * es;
    gen_seeded(dt, op, seed, idx0 + i, want, 0);
    if (memcmp(g, want, es) != 0) {
      mismatch(f, what, "input (must stay unchanged)", dt, i, g, want);
      return 0;
    }
  }
  return 1;
}

int t_err_names(const char *name) {
  const char *e = coll_last_error();
  return e != NULL && e[0] != '\0' && strstr(e, name) != NULL;
}
