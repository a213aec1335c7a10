/* SPDX-License-Identifier: Apache-2.0 */
/* test_refusal_log.c: refused connections are logged at WARN at a rate no
 * client sets: one line for the first refusal of each source, then one
 * count per source (and one for the sources beyond the table) at a flush.
 * The log goes to stderr, which the test points at a file to count lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/refusal_log.h"

/* Lines of f that contain `part`. */
static int count_lines(FILE *f, const char *part) {
  char line[1024];
  int n = 0;
  rewind(f);
  while (fgets(line, sizeof line, f) != NULL)
    if (strstr(line, part) != NULL) n++;
  return n;
}

static void test_flood_costs_a_line_per_source(void **state) {
  coll_refusal_log_t l;
  FILE *f = tmpfile();
  char src[64];
  int saved = dup(2), k;
  (void)state;
  assert_non_null(f);
  assert_true(saved >= 0);
  fflush(stderr);
  assert_true(dup2(fileno(f), 2) >= 0);
  coll__refusal_log_init(&l, COLL_LOG_NET, "tcp: rank 7");
  /* 1000 refusals from one host (any port), one from an IPv6 host, and
   * 40 hosts once each: more sources than the table holds. */
  for (k = 0; k < 1000; k++) {
    snprintf(src, sizeof src, "10.0.0.1:%d", 1024 + k);
    coll__refusal_note(&l, src, k == 999 ? "the last reason" : "idle");
  }
  coll__refusal_note(&l, "[::1]:5555", "not a libcoll handshake");
  for (k = 0; k < 40; k++) {
    snprintf(src, sizeof src, "10.0.1.%d:80", k);
    coll__refusal_note(&l, src, "idle");
  }
  coll__refusal_flush(&l);
  coll__refusal_flush(&l); /* nothing new: no line */
  fflush(stderr);
  assert_true(dup2(saved, 2) >= 0);
  close(saved);
  assert_int_equal(count_lines(f,
                               "COLL WARN NET tcp: rank 7: refusing a "
                               "connection from"),
                   COLL_REFUSAL_SOURCES);
  assert_int_equal(count_lines(f,
                               "refusing a connection from 10.0.0.1:1024: "
                               "idle"),
                   1);
  assert_int_equal(count_lines(f,
                               "refusing a connection from [::1]:5555: not "
                               "a libcoll handshake"),
                   1);
  assert_int_equal(count_lines(f,
                               "refused 999 more connections from "
                               "10.0.0.1 (last: the last reason)"),
                   1);
  /* 16 sources fit: 10.0.0.1, ::1 and 14 of the 40; 26 did not. */
  assert_int_equal(count_lines(f,
                               "refused 26 connections from other "
                               "sources"),
                   1);
  assert_int_equal(count_lines(f, "COLL WARN"), COLL_REFUSAL_SOURCES + 2);
  fclose(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_flood_costs_a_line_per_source),
  };
  /* The lines counted are WARN lines: make sure WARN is on. */
  setenv("COLL_DEBUG", "WARN", 1);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
