/* SPDX-License-Identifier: Apache-2.0 */
/* bad_input.c: the bad-input tests' harness (bad_input.h). */
#include "bad_input.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

t_fail_t g_fails;

void bi_expect_refused(coll_status_t s, const char *call, int line) {
  if (s != COLL_ERR_INVALID_ARG && s != COLL_ERR_NOT_AVAILABLE)
    t_fail(&g_fails,
           "line %d: %s returned %s, expected INVALID_ARG or "
           "NOT_AVAILABLE",
           line, call, coll_status_name(s));
  else if (coll_last_error()[0] == '\0')
    t_fail(&g_fails, "line %d: %s returned %s without an error text", line,
           call, coll_status_name(s));
}

void bi_begin(void) { t_fail_init(&g_fails); }

void bi_end(const char *what) {
  int n = t_fail_report(&g_fails, what);
  t_fail_destroy(&g_fails);
  assert_int_equal(n, 0);
}
