/* SPDX-License-Identifier: Apache-2.0 */
/* tests.h: the test groups of the reduce test executable, and helpers they
 * share. Each group returns the number of failed tests. */
#ifndef COLL_TEST_REDUCE_TESTS_H
#define COLL_TEST_REDUCE_TESTS_H

#include <stddef.h>

int test_kernels_run(void);
int test_half_run(void);
int test_finish_run(void);

/* 1 when TEST_QUICK=1 is set or the build runs under ThreadSanitizer
 * (TEST_QUICK=0 forces the full sizes): fewer long lengths and random
 * patterns, the same corner cases. */
int test_quick(void);

/* The instruction set names coll__reduce_fn_isa knows. */
extern const char *const test_isas[3];

/* Prints (once per name) that an instruction set is not on this CPU. */
void test_note_missing_isa(const char *isa);

/* Index of the first differing byte-group of `size` bytes, or -1. */
long test_first_diff(const void *a, const void *b, size_t n, size_t size);

#endif
