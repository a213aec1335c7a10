/* SPDX-License-Identifier: Apache-2.0 */
/* test_fault_late.c: a rank dies or aborts while the others wait on a late
 * one. Four rank processes on each path a job can take on one machine
 * (shared memory, TCP, and the two-level path over two hosts made by the
 * host identity hook); rank 3 stays in its own code during the second
 * allreduce, which ranks 0-2 entered. Then:
 *  - kill -9 of rank 2 (waiting): ranks 0 and 1 must be released at once,
 *    naming rank 2 lost, and rank 3, once it enters, must fail at once
 *    (on two hosts rank 2 is on the other host than rank 3: rank 1 waits
 *    on rank 3 in shared memory and must hear of rank 2 over TCP);
 *  - kill -9 of rank 3 (the late one): ranks 0-2 released naming it;
 *  - abort of rank 1's comm from its own thread (it waits): rank 1 gets
 *    ABORTED, ranks 0 and 2 and then 3 ABORTED naming rank 1;
 *  - abort of rank 3's comm while it is late, in its own code.
 * The late rank is let in only once every other rank ended, so a rank
 * that waits for it instead of the failure hangs until the bound, and the
 * test fails saying so. "At once" is asserted as within 3 s, for a loaded
 * machine; tools/fault-harness.sh prints the times. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "fault_judge.h"

static void run(fj_path_t path, fj_fault_t fault, int victim) {
  fj_spec_t s = fj_spec_default(path);
  fj_result_t res;
  fj_expect_t e;
  fj_verdict_t v;
  s.late = 3;
  s.fault = fault;
  s.victim = victim;
  /* A bound well under the comm's timeout (30 s): a rank released by the
   * timeout, or by the late rank's arrival, fails the test. */
  s.bound_ms = 10000;
  if (fj_run(&s, &res) != 0)
    fail_msg("%s, %s of rank %d: the job broke: %s", fj_path_name(path),
             fj_fault_name(fault), victim, res.why);
  fj_expect_for(&s, &e);
  fj_judge(&s, &res, &e, &v);
  printf(
      "  %s, %s of rank %d (rank 3 late): %d of %d ranks named it, "
      "slowest released after %lld ms\n",
      fj_path_name(path), fj_fault_name(fault), victim, v.named, v.judged,
      (long long)v.slowest_ms);
  if (!v.ok)
    fail_msg("%s, %s of rank %d: %s", fj_path_name(path), fj_fault_name(fault),
             victim, v.msg);
}

#define CASES(name, path)                                 \
  static void test_##name##_kill_waiting(void **state) {  \
    (void)state;                                          \
    run(path, FJ_KILL, 2);                                \
  }                                                       \
  static void test_##name##_kill_late(void **state) {     \
    (void)state;                                          \
    run(path, FJ_KILL, 3);                                \
  }                                                       \
  static void test_##name##_abort_waiting(void **state) { \
    (void)state;                                          \
    run(path, FJ_ABORT, 1);                               \
  }                                                       \
  static void test_##name##_abort_late(void **state) {    \
    (void)state;                                          \
    run(path, FJ_ABORT, 3);                               \
  }

CASES(shm, FJ_SHM)
CASES(tcp, FJ_TCP)
CASES(route, FJ_ROUTE)

#define TESTS(name)                                  \
  cmocka_unit_test(test_##name##_kill_waiting),      \
      cmocka_unit_test(test_##name##_kill_late),     \
      cmocka_unit_test(test_##name##_abort_waiting), \
      cmocka_unit_test(test_##name##_abort_late)

int main(void) {
  const struct CMUnitTest tests[] = {TESTS(shm), TESTS(tcp), TESTS(route)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
