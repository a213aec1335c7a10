/* SPDX-License-Identifier: Apache-2.0 */
/* test_shm_flags.c: the progress flags of the shared-memory collectives
 * (shm_coll.c) when a peer leaves, between forked rank processes. A peer
 * that posted its flags for a round and left does not fail that round,
 * even for a waiter that looked before it posted (the last rank to finish
 * an allreduce must not fail because a faster one already destroyed its
 * comm); the next round, which it never reached, fails naming it. A peer
 * that left before it finished a round fails that round. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "shm_test.h"
#include "transport/endpoint.h"
#include "transport/shm/shm_int.h"

/* Set by rank 1 once its endpoint is destroyed; shared across fork. */
typedef struct left_flag {
  volatile int left;
} left_flag_t;

static void expect(tt_result_t *res, coll_status_t got, coll_status_t want,
                   const char *what) {
  if (got != want)
    tt_fail(res, "%s: %s, expected %s (%s)", what, coll_status_name(got),
            coll_status_name(want), coll_last_error());
}

static void expect_text(tt_result_t *res, const char *want, const char *what) {
  if (strstr(coll_last_error(), want) == NULL)
    tt_fail(res, "%s: the text does not say '%s': %s", what, want,
            coll_last_error());
}

static int64_t deadline_in(int64_t ms) { return coll__now_ms() + ms; }

/* Rank 1 enters round 1, posts IN and (if arg says so) OUT, and destroys
 * its endpoint; rank 0 waits until it has, then looks at the flags. */
typedef struct scen {
  left_flag_t *flag;
  int finish; /* rank 1 posts OUT before it leaves */
} scen_t;

static void leave_rank(coll_transport_t *t, int rank, int world,
                       tt_result_t *res, void *arg) {
  scen_t *sc = arg;
  coll_rounds_t *sh = coll__t_rounds(t);
  int64_t until = coll__now_ms() + TT_WAIT_MS;
  (void)world;
  if (sh == NULL) {
    tt_fail(res, "the endpoint offers no shared memory");
    coll_transport_destroy(t);
    return;
  }
  if (coll__rounds_next(sh) != 1) tt_fail(res, "the first round is not 1");
  if (rank == 1) {
    coll__rounds_post(sh, COLL_T_FLAG_IN, 1);
    if (sc->finish) coll__rounds_post(sh, COLL_T_FLAG_OUT, 1);
    coll_transport_destroy(t);
    sc->flag->left = 1;
    return;
  }
  while (!sc->flag->left && coll__now_ms() < until) test_sleep_ms(1);
  if (!sc->flag->left) {
    tt_fail(res, "rank 1 did not leave within %d ms", TT_WAIT_MS);
  } else if (sc->finish) {
    /* (A waiter that looked before rank 1 posted and asks about it only
     * once it is gone: test_rounds.c.) */
    expect(res,
           coll__rounds_wait(sh, COLL_T_FLAG_IN, 1, deadline_in(TT_WAIT_MS)),
           COLL_OK, "round 1, IN");
    expect(res,
           coll__rounds_wait(sh, COLL_T_FLAG_OUT, 1, deadline_in(TT_WAIT_MS)),
           COLL_OK, "round 1, OUT");
    expect(res,
           coll__rounds_wait(sh, COLL_T_FLAG_IN, 2, deadline_in(TT_WAIT_MS)),
           COLL_ERR_PEER_LOST, "round 2, IN");
    expect_text(res, "rank 1 left", "round 2, IN");
  } else {
    /* It posted IN and left: its IN is there, the round is not done. */
    expect(res,
           coll__rounds_wait(sh, COLL_T_FLAG_IN, 1, deadline_in(TT_WAIT_MS)),
           COLL_ERR_PEER_LOST, "round 1 of a rank that left mid-round");
    expect_text(res, "rank 1 left", "round 1, rank 1 left mid-round");
  }
  coll_transport_destroy(t);
}

static void run_leave(int finish) {
  tt_result_t res[2];
  int status[2];
  scen_t sc;
  sc.flag = mmap(NULL, sizeof *sc.flag, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(sc.flag != MAP_FAILED);
  sc.flag->left = 0;
  sc.finish = finish;
  shm_test_fn_owns_transport = 1;
  shm_run(2, leave_rank, &sc, res, status, NULL);
  shm_test_fn_owns_transport = 0;
  munmap(sc.flag, sizeof *sc.flag);
  for (int r = 0; r < 2; r++) {
    if (res[r].failed) fail_msg("rank %d: %s", r, res[r].msg);
    assert_int_equal(status[r], 0);
  }
}

static void test_peer_that_finished_and_left(void **state) {
  (void)state;
  run_leave(1);
}

static void test_peer_that_left_mid_round(void **state) {
  (void)state;
  run_leave(0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_peer_that_finished_and_left),
      cmocka_unit_test(test_peer_that_left_mid_round),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
