/* SPDX-License-Identifier: Apache-2.0 */
/* api_test.h: what the public-API tests share: a failure log that rank
 * threads write and the test thread asserts on, the test's own f16/bf16
 * conversions, deterministic inputs per (rank, index, case) and a serial
 * reference for every dtype and op with the numerics of DESIGN 3.5. */
#ifndef COLL_TESTS_API_TEST_H
#define COLL_TESTS_API_TEST_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "coll.h"
#include "test_util.h"

/* ---- failure log: rank threads record, the test thread asserts -------- */

#define T_FAIL_KEEP 8

typedef struct t_fail {
  pthread_mutex_t mu;
  int count;
  char first[T_FAIL_KEEP][512];
} t_fail_t;

void t_fail_init(t_fail_t *f);
/* Records one failure; the first T_FAIL_KEEP keep their text. Any thread. */
void t_fail(t_fail_t *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prints the kept texts to stderr and returns the count. Test thread. */
int t_fail_report(t_fail_t *f, const char *what);
void t_fail_destroy(t_fail_t *f);

/* Records a failure unless s == want; says what was called and the text of
 * coll_last_error(). Returns 1 when s == want. */
int t_expect(t_fail_t *f, coll_status_t s, coll_status_t want, const char *fmt,
             ...) __attribute__((format(printf, 4, 5)));

/* Records a failure unless s == want; for a failure status also unless
 * coll_last_error() is non-empty and contains `name` ("" checks only that
 * there is a text). `call` and `line` say where. Returns 1 when all held. */
int t_expect_err(t_fail_t *f, coll_status_t s, coll_status_t want,
                 const char *name, const char *call, int line);

/* 1 when TEST_QUICK=1 is set or the build runs under ThreadSanitizer or
 * AddressSanitizer (TEST_QUICK=0 forces the full matrix). */
int t_quick(void);

/* ---- the test's own half-precision conversions ------------------------ */

uint16_t t_f32_to_f16(float f); /* round to nearest even */
float t_f16_to_f32(uint16_t h);
uint16_t t_f32_to_bf16(float f); /* round to nearest even */
float t_bf16_to_f32(uint16_t h);

/* ---- elements ---------------------------------------------------------- */

int t_is_float(coll_dtype_t dt);
size_t t_size(coll_dtype_t dt); /* the test's own table, not the library's */
/* v rounded to dt (float dtypes). */
double t_round(coll_dtype_t dt, double v);
double t_load_f(coll_dtype_t dt, const void *buf, size_t i);
void t_store_f(coll_dtype_t dt, void *buf, size_t i, double v);
int64_t t_load_i(coll_dtype_t dt, const void *buf, size_t i);
void t_store_i(coll_dtype_t dt, void *buf, size_t i, int64_t v); /* wraps */
/* "1.5 (0x3e00)" / "-7": one element for a failure text. */
void t_fmt(coll_dtype_t dt, const void *buf, size_t i, char *out, size_t cap);

/* ---- deterministic inputs and the serial reference --------------------- */

/* A 64-bit hash of three values (splitmix64 rounds). */
uint64_t t_mix(uint64_t a, uint64_t b, uint64_t c);

/* Input element idx of `rank` for case `cas`, chosen for (dt, op) so that
 * the reference is exact (small integers for float SUM/AVG, powers of two
 * for float PROD, overflowing values for integer SUM/PROD, 8-bit values that
 * clamp). Written into buf[i]. */
void t_gen(coll_dtype_t dt, coll_op_t op, int rank, size_t idx, uint64_t cas,
           void *buf, size_t i);
/* Fills buf[0..n) with t_gen for indices idx0.. */
void t_gen_n(coll_dtype_t dt, coll_op_t op, int rank, size_t idx0, uint64_t cas,
             void *buf, size_t n);
/* The expected reduction over ranks 0..world-1 (world <= 64) of
 * t_gen(.., idx, ..), written into out[0]. */
void t_ref(coll_dtype_t dt, coll_op_t op, int world, size_t idx, uint64_t cas,
           void *out);
/* Pseudo-random bytes for copies (broadcast, allgather). */
void t_bytes(int rank, uint64_t cas, void *buf, size_t n);

/* Compares got[0..n) with t_ref for indices idx0..; records the first
 * mismatch with its details (prefixed by `what`). Returns 1 when equal. */
int t_check_reduced(t_fail_t *f, const char *what, coll_dtype_t dt,
                    coll_op_t op, int world, size_t idx0, uint64_t cas,
                    const void *got, size_t n);
/* Compares got[0..n) with t_gen of `rank` for indices idx0.. (an input that
 * must not have changed). Returns 1 when equal. */
int t_check_input(t_fail_t *f, const char *what, coll_dtype_t dt, coll_op_t op,
                  int rank, size_t idx0, uint64_t cas, const void *got,
                  size_t n);

/* 1 when coll_last_error() is non-empty and contains `name`. */
int t_err_names(const char *name);

#endif
