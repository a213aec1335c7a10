/* SPDX-License-Identifier: Apache-2.0 */
/* test_fault_stall.c: a stopped rank (SIGSTOP) on every path a job takes
 * on one machine (shared memory, TCP, the two-level path), four rank
 * processes each:
 *  - no heartbeats: the others time out at the comm's timeout, and the
 *    report names the stopped rank as one that did not answer (it cannot
 *    say where it is; its memory still says "in the allreduce");
 *  - heartbeats of T: rank 3, late and idle (only heartbeats leave it),
 *    is stopped for 0.8 T: nobody may name it, every allreduce ends right;
 *  - the same rank stopped for 1.5 T: every other rank names it
 *    unresponsive, never sooner than T after the stop, and rank 3, resumed,
 *    names itself;
 *  - rank 1 stopped in a stream of allreduces for 2.5 T: resumed long after the
 *    others named it, it must read their goodbyes before it judges them,
 *    and name itself, not a live peer.
 * The lower bounds allow only a twentieth of T for the victim's own beat
 * thread starved just before the stop (fault_judge.c); the
 * upper ones allow 3 s for a loaded machine (tools/fault-harness.sh prints
 * the times). A stall the machine stretched past T (the test process woke
 * late to resume the rank) proves nothing about a stall under T: it is run
 * again, at most twice, and skipped if it never came out short enough. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "fault_judge.h"

#define HB_MS 2000

static void verdict(const fj_spec_t *s, const fj_result_t *res,
                    const char *what) {
  fj_expect_t e;
  fj_verdict_t v;
  fj_expect_for(s, &e);
  fj_judge(s, res, &e, &v);
  printf(
      "  %s, %s: %d of %d ranks as expected; released %lld..%lld ms "
      "after the stop\n",
      fj_path_name(s->path), what, v.named, v.judged, (long long)v.fastest_ms,
      (long long)v.slowest_ms);
  if (!v.ok) fail_msg("%s, %s: %s", fj_path_name(s->path), what, v.msg);
}

static void run(const fj_spec_t *s, fj_result_t *res, const char *what) {
  if (fj_run(s, res) != 0)
    fail_msg("%s, %s: the job broke: %s", fj_path_name(s->path), what,
             res->why);
}

/* No heartbeats, a 4 s timeout (it bounds the comm's setup too, which
 * takes seconds under a sanitizer on a loaded machine): "rank 1 did not
 * answer". */
static void unanswered(fj_path_t path) {
  fj_spec_t s = fj_spec_default(path);
  fj_result_t res;
  s.hb_ms = 0;
  s.timeout_ms = 4000;
  s.fault = FJ_STOP;
  s.victim = 1;
  s.stop_ms = -1;      /* killed once the others ended */
  s.after = FJ_STREAM; /* the stop lands in the stream */
  run(&s, &res, "stopped, no heartbeats");
  verdict(&s, &res, "stopped, no heartbeats");
}

/* Rank 3 late and idle: settle long enough that only heartbeats leave it
 * (a quarter of T and more), then stopped for stop_ms. */
static fj_spec_t idle_stop(fj_path_t path, int64_t stop_ms) {
  fj_spec_t s = fj_spec_default(path);
  s.hb_ms = HB_MS;
  s.late = 3;
  s.victim = 3;
  s.fault = FJ_STOP;
  s.settle_ms = HB_MS / 2;
  s.stop_ms = stop_ms;
  s.after = 2;
  s.bound_ms = 3 * HB_MS + 10000;
  return s;
}

static void short_stall(fj_path_t path) {
  for (int attempt = 0; attempt < 3; attempt++) {
    fj_spec_t s = idle_stop(path, HB_MS * 8 / 10);
    fj_result_t res;
    int64_t real;
    /* It comes back on its own, once its stall is over. */
    s.late_ms = s.settle_ms + s.stop_ms + 300;
    run(&s, &res, "stopped for 0.8 T");
    real = res.resume_ms - res.fault_ms;
    if (real >= HB_MS * 95 / 100) {
      printf("  %s: the stall came out %lld ms long (not under T); again\n",
             fj_path_name(path), (long long)real);
      continue;
    }
    verdict(&s, &res, "stopped for 0.8 T");
    return;
  }
  skip();
}

static void long_stall(fj_path_t path) {
  fj_spec_t s = idle_stop(path, HB_MS * 3 / 2);
  fj_result_t res;
  run(&s, &res, "stopped for 1.5 T");
  verdict(&s, &res, "stopped for 1.5 T");
}

/* Rank 1 in a stream of allreduces, stopped 2.5 T: the others name it at T,
 * say goodbye and stay alive; resumed, it must name itself. */
static void resumed(fj_path_t path) {
  fj_spec_t s = fj_spec_default(path);
  fj_result_t res;
  s.hb_ms = HB_MS / 2;
  s.fault = FJ_STOP;
  s.victim = 1;
  s.stop_ms = HB_MS * 5 / 4;
  s.after = FJ_STREAM;
  s.bound_ms = HB_MS * 5 / 4 + 10000;
  run(&s, &res, "resumed after 2.5 T");
  verdict(&s, &res, "resumed after 2.5 T");
}

#define CASES(name, path)                           \
  static void test_##name##_unanswered(void **st) { \
    (void)st;                                       \
    unanswered(path);                               \
  }                                                 \
  static void test_##name##_short(void **st) {      \
    (void)st;                                       \
    short_stall(path);                              \
  }                                                 \
  static void test_##name##_long(void **st) {       \
    (void)st;                                       \
    long_stall(path);                               \
  }                                                 \
  static void test_##name##_resumed(void **st) {    \
    (void)st;                                       \
    resumed(path);                                  \
  }

CASES(shm, FJ_SHM)
CASES(tcp, FJ_TCP)
CASES(route, FJ_ROUTE)

#define TESTS(name)                           \
  cmocka_unit_test(test_##name##_unanswered), \
      cmocka_unit_test(test_##name##_short),  \
      cmocka_unit_test(test_##name##_long),   \
      cmocka_unit_test(test_##name##_resumed)

int main(void) {
  const struct CMUnitTest tests[] = {TESTS(shm), TESTS(tcp), TESTS(route)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
