/* SPDX-License-Identifier: Apache-2.0 */
/* test_reduce.c: the reduce test executable: kernels, conversions, AVG's
 * finishing steps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce/reduce.h"
#include "reduce/reduce_impl.h"
#include "tests.h"

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#else
#define UNDER_TSAN 0
#endif

int test_quick(void) {
  const char *q = getenv("TEST_QUICK");
  if (q != NULL && q[0] != '\0') return strcmp(q, "0") != 0;
  return UNDER_TSAN;
}

const char *const test_isas[3] = {"scalar", "avx2", "avx512"};

void test_note_missing_isa(const char *isa) {
  static int noted[3];
  for (int i = 0; i < 3; i++) {
    if (strcmp(isa, test_isas[i]) == 0 && !noted[i]) {
      noted[i] = 1;
      printf("note: this CPU lacks %s; its kernels are not tested here\n", isa);
    }
  }
}

long test_first_diff(const void *a, const void *b, size_t n, size_t size) {
  const unsigned char *x = a, *y = b;
  for (size_t i = 0; i < n; i++)
    if (memcmp(x + i * size, y + i * size, size) != 0) return (long)i;
  return -1;
}

/* Exit code ctest reads as "skipped" (SKIP_RETURN_CODE). */
#define SKIP_CODE 77

int main(void) {
  int failed = 0;
  /* ctest runs this executable again with COLL_SIMD forcing each
   * instruction set: on a CPU without it, that run has nothing to test and
   * says so as a skip rather than passing on the fallback kernels. */
  const char *forced = getenv("COLL_SIMD");
  int isa = forced != NULL ? coll__isa_from_name(forced) : -1;
  if (isa >= 0 && !coll__isa_supported((coll_isa_t)isa)) {
    printf("SKIP: COLL_SIMD=%s, but this CPU lacks %s\n", forced, forced);
    return SKIP_CODE;
  }
  failed += test_kernels_run(); /* first: it races the dispatch's start */
  failed += test_half_run();
  failed += test_finish_run();
  printf("reduction kernels picked by the dispatch: %s\n", coll__reduce_isa());
  if (isa >= 0 && coll__isa_from_name(coll__reduce_isa()) != isa) {
    printf("FAIL: COLL_SIMD=%s, but the dispatch picked %s\n", forced,
           coll__reduce_isa());
    failed++;
  }
  return failed == 0 ? 0 : 1;
}
