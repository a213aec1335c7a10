/* SPDX-License-Identifier: Apache-2.0 */
/* test_version.c: the libcoll.so this program loads reports the version
 * the build gave it. The expected numbers come from CMake's project
 * version (COLL_TEST_VERSION_*), not from coll.h, and the shared library's
 * file name carries them too, so a library built from another header, or
 * a build whose version did not follow the header, fails here. */
#include <dlfcn.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coll.h"

#define EXPECTED                                                     \
  (COLL_TEST_VERSION_MAJOR * 10000 + COLL_TEST_VERSION_MINOR * 100 + \
   COLL_TEST_VERSION_PATCH)

/* The loaded library answers with the project's version. */
static void test_library_version(void **state) {
  (void)state;
  assert_int_equal(coll_version(), EXPECTED);
}

/* The header a user compiles against says the same. */
static void test_header_version(void **state) {
  (void)state;
  assert_int_equal(COLL_VERSION_MAJOR, COLL_TEST_VERSION_MAJOR);
  assert_int_equal(COLL_VERSION_MINOR, COLL_TEST_VERSION_MINOR);
  assert_int_equal(COLL_VERSION_PATCH, COLL_TEST_VERSION_PATCH);
  assert_int_equal(COLL_VERSION, EXPECTED);
}

/* coll_version() above came from libcoll.so.MAJOR, whose file is
 * libcoll.so.MAJOR.MINOR.PATCH: the build's soname and file version follow
 * the same numbers. */
static void test_loaded_file(void **state) {
  int (*fn)(void) = coll_version;
  void *addr;
  Dl_info info;
  char real[PATH_MAX], want[64];
  const char *base;
  (void)state;
  memcpy(&addr, &fn, sizeof addr); /* ISO C has no function-to-data cast */
  assert_int_not_equal(dladdr(addr, &info), 0);
  assert_non_null(info.dli_fname);
  base = strrchr(info.dli_fname, '/');
  base = base ? base + 1 : info.dli_fname;
  snprintf(want, sizeof want, "libcoll.so.%d", COLL_TEST_VERSION_MAJOR);
  if (strcmp(base, want) != 0)
    fail_msg("coll_version comes from %s, expected %s", info.dli_fname, want);
  assert_non_null(realpath(info.dli_fname, real));
  base = strrchr(real, '/');
  base = base ? base + 1 : real;
  snprintf(want, sizeof want, "libcoll.so.%d.%d.%d", COLL_TEST_VERSION_MAJOR,
           COLL_TEST_VERSION_MINOR, COLL_TEST_VERSION_PATCH);
  if (strcmp(base, want) != 0)
    fail_msg("libcoll.so.%d is %s, expected %s", COLL_TEST_VERSION_MAJOR, real,
             want);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_library_version),
      cmocka_unit_test(test_header_version),
      cmocka_unit_test(test_loaded_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
