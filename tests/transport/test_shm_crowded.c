/* SPDX-License-Identifier: Apache-2.0 */
/* test_shm_crowded.c: how a shared-memory waiter spins on a crowded host.
 * With more than SHM_CROWDED_RANKS_PER_CORE of the endpoint's ranks per
 * core (the cpuset's, coll__host_cores), a waiter yields at every look and
 * spins only SHM_SPIN_CROWDED_US, unless COLL_SHM_SPIN_US is set; with
 * fewer it spins COLL_SHM_SPIN_US's default, yielding every
 * SHM_SPINS_PER_YIELD looks. Each case runs its ranks as processes and
 * checks the policy of both waits (requests and the collectives' flags);
 * the collectives' results on crowded worlds are the other tests'. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/cores.h"
#include "core/env.h"
#include "shm_test.h"
#include "transport/endpoint.h"
#include "transport/shm/shm_int.h"

typedef struct want {
  int64_t spin_ns;
  unsigned per_yield;
} want_t;

static const char *spin_env; /* COLL_SHM_SPIN_US in the ranks; NULL: unset */

static void set_spin(int rank) {
  (void)rank;
  if (spin_env != NULL)
    setenv("COLL_SHM_SPIN_US", spin_env, 1);
  else
    unsetenv("COLL_SHM_SPIN_US");
}

static void check_rank(coll_transport_t *t, int rank, int world,
                       tt_result_t *res, void *arg) {
  const want_t *w = arg;
  shm_ep_t *ep = t->ctx;
  coll_rounds_t *R = coll__t_rounds(t);
  (void)rank, (void)world;
  if (ep->spin_ns != w->spin_ns || ep->per_yield != w->per_yield)
    tt_fail(res, "waits spin %lld ns yielding every %u looks, want %lld / %u",
            (long long)ep->spin_ns, ep->per_yield, (long long)w->spin_ns,
            w->per_yield);
  if (R == NULL) {
    tt_fail(res, "the endpoint offers no shared memory");
    return;
  }
  if (R->policy.spin_ns != (uint64_t)w->spin_ns ||
      R->policy.per_yield != w->per_yield)
    tt_fail(res, "the flags' waits spin %llu ns yielding every %u looks",
            (unsigned long long)R->policy.spin_ns, R->policy.per_yield);
}

static void run_case(int world, const char *spin, want_t w) {
  tt_result_t res[TT_MAX_RANKS];
  spin_env = spin;
  assert_int_equal(shm_run(world, check_rank, &w, res, NULL, set_spin), 0);
  TT_ASSERT_RANKS_OK(res, world);
}

/* The smallest world that is crowded here, or 0 past what a test runs. */
static int crowded_world(void) {
  unsigned n = SHM_CROWDED_RANKS_PER_CORE * coll__host_cores() + 1;
  return n <= TT_MAX_RANKS ? (int)n : 0;
}

static void test_not_crowded_spins_the_default(void **state) {
  (void)state;
  if (2 > (int)(SHM_CROWDED_RANKS_PER_CORE * coll__host_cores())) skip();
  run_case(2, NULL,
           (want_t){COLL_DEFAULT_SHM_SPIN_US * 1000, SHM_SPINS_PER_YIELD});
}

static void test_crowded_yields_and_sleeps_soon(void **state) {
  int n = crowded_world();
  (void)state;
  if (n == 0) skip(); /* more cores than this test runs ranks */
  run_case(n, NULL, (want_t){SHM_SPIN_CROWDED_US * 1000, 1});
}

static void test_crowded_keeps_a_set_spin(void **state) {
  int n = crowded_world();
  (void)state;
  if (n == 0) skip();
  run_case(n, "200", (want_t){200 * 1000, 1});
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_not_crowded_spins_the_default),
      cmocka_unit_test(test_crowded_yields_and_sleeps_soon),
      cmocka_unit_test(test_crowded_keeps_a_set_spin),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
