/* SPDX-License-Identifier: Apache-2.0 */
/* test_shrink_args.c: what coll_comm_shrink and coll_comm_shrink_exclude
 * refuse before any backend runs, on every build (CPU comms over the
 * in-process transport): NULL pointers, a bad exclude list, a config
 * without the INIT macro or with the old comm's abort handle, and an
 * exclude list on a backend that takes none. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "coll.h"
#include "test_util.h"

#define WORLD 3

/* The call returned `want`, recorded `text` and left *n NULL (passed by
 * address: the call sets it, and arguments are evaluated in any order). */
static void refused(coll_status_t got, coll_status_t want,
                    coll_comm_t *const *n, const char *text) {
  assert_int_equal(got, want);
  assert_null(*n);
  if (strstr(coll_last_error(), text) == NULL)
    fail_msg("'%s' lacks '%s'", coll_last_error(), text);
}

static void test_shrink_refusals(void **state) {
  coll_comm_t *comms[WORLD] = {0}, *n = NULL, *c;
  coll_comm_config_t bad = COLL_COMM_CONFIG_INIT;
  coll_abort_handle_t *own = NULL;
  int self[1] = {1}, big[1] = {WORLD}, neg[1] = {-2}, twice[3] = {2, 0, 2};
  int other[1] = {2};
  (void)state;
  assert_int_equal(test_inproc_comms(WORLD, 10000, comms), 0);
  c = comms[1];
#define N_RESET (n = (coll_comm_t *)&n)
  assert_int_equal(coll_comm_shrink(c, NULL, NULL), COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "newcomm is NULL"));
  assert_int_equal(coll_comm_shrink_exclude(c, NULL, 0, NULL, NULL),
                   COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "newcomm is NULL"));
  N_RESET;
  refused(coll_comm_shrink(NULL, NULL, &n), COLL_ERR_INVALID_ARG, &n,
          "comm is NULL");
  N_RESET;
  refused(coll_comm_shrink_exclude(NULL, other, 1, NULL, &n),
          COLL_ERR_INVALID_ARG, &n, "comm is NULL");
  N_RESET;
  refused(coll_comm_shrink_exclude(c, other, -1, NULL, &n),
          COLL_ERR_INVALID_ARG, &n, "nexclude -1 is negative");
  N_RESET;
  refused(coll_comm_shrink_exclude(c, NULL, 2, NULL, &n), COLL_ERR_INVALID_ARG,
          &n, "exclude is NULL but nexclude is 2");
  N_RESET;
  refused(coll_comm_shrink_exclude(c, self, 1, NULL, &n), COLL_ERR_INVALID_ARG,
          &n, "rank 1 excludes itself");
  N_RESET;
  refused(coll_comm_shrink_exclude(c, big, 1, NULL, &n), COLL_ERR_INVALID_ARG,
          &n, "exclude[0] = 3 is not a rank of a 3-rank comm");
  N_RESET;
  refused(coll_comm_shrink_exclude(c, neg, 1, NULL, &n), COLL_ERR_INVALID_ARG,
          &n, "exclude[0] = -2");
  N_RESET;
  refused(coll_comm_shrink_exclude(c, twice, 3, NULL, &n), COLL_ERR_INVALID_ARG,
          &n, "rank 2 is listed twice");
  bad.magic = 0;
  N_RESET;
  refused(coll_comm_shrink(c, &bad, &n), COLL_ERR_INVALID_ARG, &n,
          "COLL_COMM_CONFIG_INIT");
  N_RESET;
  refused(coll_comm_shrink_exclude(c, other, 1, &bad, &n), COLL_ERR_INVALID_ARG,
          &n, "COLL_COMM_CONFIG_INIT");
  bad = (coll_comm_config_t)COLL_COMM_CONFIG_INIT;
  assert_int_equal(coll_comm_abort_handle(c, &own), COLL_OK);
  bad.abort_handle = own;
  N_RESET;
  refused(coll_comm_shrink(c, &bad, &n), COLL_ERR_INVALID_ARG, &n,
          "abort handle is the old comm's");
  N_RESET;
  refused(coll_comm_shrink_exclude(c, other, 1, &bad, &n), COLL_ERR_INVALID_ARG,
          &n, "abort handle is the old comm's");
  coll_abort_handle_release(own);
  /* A CPU comm's ranks agree on who is alive themselves: no list. */
  N_RESET;
  refused(coll_comm_shrink_exclude(c, other, 1, NULL, &n),
          COLL_ERR_NOT_AVAILABLE, &n, "the cpu backend takes no exclude list");
#undef N_RESET
  test_destroy_comms(WORLD, comms);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shrink_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
