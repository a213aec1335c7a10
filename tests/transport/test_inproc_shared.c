/* SPDX-License-Identifier: Apache-2.0 */
/* test_inproc_shared.c: the shared memory the in-process transport gives
 * the collectives designed for it (inproc_shared.c): rank threads that
 * write their slots, post and wait see each other's data; a wait ends
 * with the endpoint's abort, with a peer that closed before it finished
 * the round (naming it, for the flight recorder too), or at the deadline
 * naming the rank behind; a peer that finished the round and left does
 * not fail it. What the collectives do with it through a comm:
 * test_inproc_shared_comm.c. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/clock.h"
#include "core/cores.h"
#include "core/trace.h"
#include "transport/endpoint.h"
#include "transport/inproc/inproc.h"
#include "transport_test.h"

#define ROUNDS 200

static coll_rounds_t *sh_of(coll_transport_t *t) {
  coll_rounds_t *sh = coll__t_rounds(t);
  assert_non_null(sh);
  return sh;
}

static int64_t deadline_in(int64_t ms) { return coll__now_ms() + ms; }

/* The rank of t starts round 1 and posts its IN flag. */
static void enter_round1(coll_transport_t *t) {
  assert_int_equal(coll__rounds_next(sh_of(t)), 1);
  coll__rounds_post(sh_of(t), COLL_T_FLAG_IN, 1);
}

static void expect_text(const char *want) {
  if (strstr(coll_last_error(), want) == NULL)
    fail_msg("expected '%s' in the error, got: %s", want, coll_last_error());
}

/* The table: every rank sees the same slots, one area per rank and
 * buffer, none overlapping; the policy COLL_ALGO=auto reads. */
static void test_table(void **state) {
  coll_transport_t *t[3];
  coll_rounds_t *sh;
  int r, b;
  (void)state;
  assert_int_equal(coll_inproc_create(3, t), COLL_OK);
  sh = sh_of(t[0]);
  assert_int_equal(sh->slot_bytes % 64, 0);
  assert_int_equal(sh->allreduce_below, 0);
  assert_int_equal(sh->direct_from, 8u << 20);
  assert_non_null(sh->ops->read_begin);
  assert_non_null(sh->ops->read_end);
  assert_true(coll__rounds_direct(sh));
  /* Three threads outnumber the cores of a 2-core host. */
  assert_int_equal(sh->others_below, 3 > coll__cores() ? 2u << 20 : 0);
  assert_int_equal(sh->reduce_scatter_below, SIZE_MAX);
  for (r = 0; r < 3; r++)
    for (b = 0; b < 2; b++) {
      char *slot = coll__rounds_slot(sh, r, b);
      char *res = coll__rounds_result(sh, r, b);
      assert_ptr_equal(slot, coll__rounds_slot(sh_of(t[2]), r, b));
      assert_ptr_equal(coll__rounds_note(sh, r, b),
                       coll__rounds_note(sh_of(t[1]), r, b));
      /* Whole areas are usable: a write at both ends. */
      slot[0] = slot[sh->slot_bytes - 1] = (char)(r + b);
      /* Half a page in, clear of where callers' buffers start. */
      assert_int_equal((uintptr_t)slot % 4096, 2048);
      assert_int_equal((uintptr_t)res % 4096, 2048);
      res[0] = res[sh->slot_bytes - 1] = (char)(r + b);
    }
  for (r = 0; r < 3; r++) {
    char *s0 = coll__rounds_slot(sh, r, 0), *s1 = coll__rounds_slot(sh, r, 1);
    char *r0 = coll__rounds_result(sh, r, 0);
    assert_true(s1 >= s0 + sh->slot_bytes && r0 >= s1 + sh->slot_bytes);
  }
  for (r = 0; r < 3; r++) coll_transport_destroy(t[r]);
}

/* Broadcast, allgather and reduce-scatter take rounds (below 2 MiB) only
 * where the rank threads outnumber the cores. */
static void test_crowded_world(void **state) {
  unsigned cores = coll__cores();
  coll_transport_t **t = calloc(cores + 1, sizeof *t);
  (void)state;
  assert_non_null(t);
  assert_int_equal(coll_inproc_create((int)cores, t), COLL_OK);
  assert_int_equal(sh_of(t[0])->others_below, 0);
  for (unsigned r = 0; r < cores; r++) coll_transport_destroy(t[r]);
  assert_int_equal(coll_inproc_create((int)cores + 1, t), COLL_OK);
  assert_int_equal(sh_of(t[0])->others_below, 2u << 20);
  assert_int_equal(sh_of(t[0])->allreduce_below, 0);
  for (unsigned r = 0; r <= cores; r++) coll_transport_destroy(t[r]);
  free(t);
}

typedef struct rounds_job {
  coll_transport_t *t[TT_MAX_RANKS];
  tt_result_t res[TT_MAX_RANKS];
} rounds_job_t;

/* Each round: write (rank, round) over the slot and the note, post IN,
 * wait for every IN, check every peer's slot and note, post OUT, wait for
 * every OUT before the buffer comes round again. */
static void rounds_rank(int rank, int world, void *arg) {
  rounds_job_t *j = arg;
  coll_rounds_t *sh = coll__t_rounds(j->t[rank]);
  size_t words = sh->slot_bytes / sizeof(uint64_t), k;
  for (int i = 0; i < ROUNDS; i++) {
    uint64_t v = coll__rounds_next(sh);
    int b = (int)(v & 1);
    uint64_t *mine = (uint64_t *)coll__rounds_slot(sh, rank, b);
    if (v != (uint64_t)i + 1) {
      tt_fail(&j->res[rank], "round %llu, expected %d", (unsigned long long)v,
              i + 1);
      return;
    }
    if (v > 2 && coll__rounds_wait(sh, COLL_T_FLAG_OUT, v - 2,
                                   deadline_in(TT_WAIT_MS)) != COLL_OK) {
      tt_fail(&j->res[rank], "round %d, OUT: %s", i, coll_last_error());
      return;
    }
    for (k = 0; k < words; k += 509) mine[k] = (uint64_t)rank << 32 | v;
    memcpy(coll__rounds_note(sh, rank, b), &v, sizeof v);
    coll__rounds_post(sh, COLL_T_FLAG_IN, v);
    if (coll__rounds_wait(sh, COLL_T_FLAG_IN, v, deadline_in(TT_WAIT_MS)) !=
        COLL_OK) {
      tt_fail(&j->res[rank], "round %d, IN: %s", i, coll_last_error());
      return;
    }
    for (int p = 0; p < world; p++) {
      const uint64_t *theirs = (const uint64_t *)coll__rounds_slot(sh, p, b);
      uint64_t note;
      memcpy(&note, coll__rounds_note(sh, p, b), sizeof note);
      for (k = 0; k < words; k += 509)
        if (theirs[k] != ((uint64_t)p << 32 | v) || note != v) {
          tt_fail(&j->res[rank], "round %d: rank %d's slot or note is stale", i,
                  p);
          return;
        }
    }
    coll__rounds_post(sh, COLL_T_FLAG_OUT, v);
  }
}

static void test_rounds_between_threads(void **state) {
  rounds_job_t j;
  int n, r;
  (void)state;
  for (n = 2; n <= 4; n++) {
    memset(&j, 0, sizeof j);
    assert_int_equal(coll_inproc_create(n, j.t), COLL_OK);
    test_run_ranks(n, rounds_rank, &j, TT_RUN_MS, "rounds");
    TT_ASSERT_RANKS_OK(j.res, n);
    for (r = 0; r < n; r++) coll_transport_destroy(j.t[r]);
  }
}

typedef struct later {
  coll_transport_t *t;
  int64_t after_ms;
  int destroy;
} later_t;

static void *close_later(void *arg) {
  later_t *l = arg;
  test_sleep_ms(l->after_ms);
  if (l->destroy)
    coll_transport_destroy(l->t);
  else
    coll__t_abort(l->t);
  return NULL;
}

/* An abort from another thread ends this rank's own wait (asleep by then:
 * the spin is 50 us) with ABORTED, long before the deadline. */
static void test_abort_wakes_the_wait(void **state) {
  coll_transport_t *t[2];
  coll_rounds_t *sh;
  later_t l;
  pthread_t th;
  (void)state;
  assert_int_equal(coll_inproc_create(2, t), COLL_OK);
  sh = sh_of(t[0]);
  l = (later_t){t[0], 100, 0};
  assert_int_equal(pthread_create(&th, NULL, close_later, &l), 0);
  assert_int_equal(coll__rounds_next(sh), 1);
  assert_int_equal(
      coll__rounds_wait(sh, COLL_T_FLAG_IN, 1, deadline_in(TT_WAIT_MS)),
      COLL_ERR_ABORTED);
  expect_text("this endpoint was aborted");
  pthread_join(th, NULL);
  coll_transport_destroy(t[0]);
  coll_transport_destroy(t[1]);
}

/* A peer aborted before it posted: the wait fails with ABORTED naming it,
 * and the flight recorder hears which peer it was. */
static void test_peer_abort_names_it(void **state) {
  coll_transport_t *t[3];
  coll_rounds_t *sh;
  later_t l;
  pthread_t th;
  (void)state;
  assert_int_equal(coll_inproc_create(3, t), COLL_OK);
  sh = sh_of(t[0]);
  (void)coll__trace_take_peer();
  enter_round1(t[1]);
  l = (later_t){t[2], 100, 0};
  assert_int_equal(pthread_create(&th, NULL, close_later, &l), 0);
  enter_round1(t[0]);
  assert_int_equal(
      coll__rounds_wait(sh, COLL_T_FLAG_IN, 1, deadline_in(TT_WAIT_MS)),
      COLL_ERR_ABORTED);
  expect_text("waiting for rank 2");
  expect_text("rank 2 aborted");
  assert_int_equal(coll__trace_take_peer(), 2);
  pthread_join(th, NULL);
  for (int r = 0; r < 3; r++) coll_transport_destroy(t[r]);
}

/* A peer that finished round 1 (IN and OUT) and was then destroyed does
 * not fail round 1; round 2, which it never reached, is PEER_LOST. */
static void test_peer_that_finished_and_left(void **state) {
  coll_transport_t *t[2];
  coll_rounds_t *sh;
  (void)state;
  assert_int_equal(coll_inproc_create(2, t), COLL_OK);
  sh = sh_of(t[0]);
  enter_round1(t[1]);
  coll__rounds_post(sh_of(t[1]), COLL_T_FLAG_OUT, 1);
  coll_transport_destroy(t[1]);
  assert_int_equal(coll__rounds_next(sh), 1);
  assert_int_equal(
      coll__rounds_wait(sh, COLL_T_FLAG_IN, 1, deadline_in(TT_WAIT_MS)),
      COLL_OK);
  assert_int_equal(
      coll__rounds_wait(sh, COLL_T_FLAG_OUT, 1, deadline_in(TT_WAIT_MS)),
      COLL_OK);
  assert_int_equal(
      coll__rounds_wait(sh, COLL_T_FLAG_IN, 2, deadline_in(TT_WAIT_MS)),
      COLL_ERR_PEER_LOST);
  expect_text("waiting for rank 1");
  coll_transport_destroy(t[0]);
}

/* Nobody closes anything: the deadline ends the wait, naming the first
 * rank behind (rank 2 posted, rank 1 did not). */
static void test_deadline_names_the_rank_behind(void **state) {
  coll_transport_t *t[3];
  coll_rounds_t *sh;
  (void)state;
  assert_int_equal(coll_inproc_create(3, t), COLL_OK);
  sh = sh_of(t[0]);
  (void)coll__trace_take_peer();
  enter_round1(t[2]);
  assert_int_equal(coll__rounds_next(sh), 1);
  assert_int_equal(coll__rounds_wait(sh, COLL_T_FLAG_IN, 1, deadline_in(200)),
                   COLL_ERR_TIMEOUT);
  expect_text("rank 1 did not reach round 1");
  assert_int_equal(coll__trace_take_peer(), 1);
  for (int r = 0; r < 3; r++) coll_transport_destroy(t[r]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table),
      cmocka_unit_test(test_crowded_world),
      cmocka_unit_test(test_rounds_between_threads),
      cmocka_unit_test(test_abort_wakes_the_wait),
      cmocka_unit_test(test_peer_abort_names_it),
      cmocka_unit_test(test_peer_that_finished_and_left),
      cmocka_unit_test(test_deadline_names_the_rank_behind),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
