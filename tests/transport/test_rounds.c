/* SPDX-License-Identifier: Apache-2.0 */
/* test_rounds.c: the slot-and-flag rounds (transport/common/rounds.h) over
 * a stand-in provider in plain memory, where the test decides when a peer
 * posts and when it is gone, down to the moment between a waiter's look
 * at a flag and its question about the peer. What every provider's rounds
 * (the in-process and the shared-memory transport) rely on: a peer that
 * posted, finished the round and left does not fail it, even for a
 * waiter that found it behind just before; one that left mid-round does,
 * named; the endpoint's own close ends the wait; the deadline names the
 * first rank behind; a post wakes the sleepers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/clock.h"
#include "core/error.h"
#include "test_util.h"
#include "transport/common/rounds.h"

#define WORLD 3
#define SLOT 256

/* The stand-in provider: one world, every rank's control in one array. */
typedef struct fake {
  coll_round_ctl_t ctl[WORLD];
  coll_round_ctl_t *ctlp[WORLD];
  char mem[WORLD][4 * SLOT];
  char *memp[WORLD];
  coll_rounds_t R[WORLD];
  atomic_int gone[WORLD];
  int wakes, sleeps, whys;
  /* Called once, at the first question about rank hook_rank: what a peer
   * does between a waiter's look at its flag and that question. */
  void (*hook)(struct fake *f);
  int hook_rank;
} fake_t;

static int f_gone(void *arg, int p) {
  fake_t **fp = arg;
  return atomic_load(&(*fp)->gone[p]);
}

static coll_rounds_t *rounds_of(void *arg);

static coll_status_t f_why(void *arg, int p, char *buf, size_t n) {
  fake_t *f = *(fake_t **)arg;
  f->whys++;
  if (f->hook != NULL && p == f->hook_rank) {
    void (*h)(fake_t *) = f->hook;
    f->hook = NULL;
    h(f);
  }
  if (!atomic_load(&f->gone[p])) return COLL_OK;
  if (p == rounds_of(arg)->rank)
    snprintf(buf, n, "this endpoint was aborted");
  else
    snprintf(buf, n, "rank %d left", p);
  return p == rounds_of(arg)->rank ? COLL_ERR_ABORTED : COLL_ERR_PEER_LOST;
}

static void f_wake(void *arg) { (*(fake_t **)arg)->wakes++; }

static void f_sleep(void *arg, const coll_rounds_t *R, int which, uint64_t v,
                    int64_t ms) {
  fake_t *f = *(fake_t **)arg;
  f->sleeps++;
  if (coll__rounds_blocked(R, which, v))
    test_sleep_ms(ms < 0 || ms > 1 ? 1 : ms);
}

static const coll_rounds_ops_t fake_ops = {f_gone,  f_why, f_wake,
                                           f_sleep, NULL,  NULL};

/* Each rank's arg: where its fake is, and its rank (the rounds' arg). */
static fake_t *g_args[WORLD];
static coll_rounds_t *rounds_of(void *arg) {
  fake_t *f = *(fake_t **)arg;
  return &f->R[(fake_t **)arg - g_args];
}

static fake_t *fake_new(void) {
  static const coll_wait_policy_t pol = {1000, 8, 1, 0};
  fake_t *f = calloc(1, sizeof *f);
  assert_non_null(f);
  for (int r = 0; r < WORLD; r++) {
    coll__round_ctl_init(&f->ctl[r]);
    f->ctlp[r] = &f->ctl[r];
    f->memp[r] = f->mem[r];
    atomic_init(&f->gone[r], 0);
    g_args[r] = f;
  }
  for (int r = 0; r < WORLD; r++)
    coll__rounds_init(&f->R[r], "fake", r, WORLD, SLOT, f->ctlp, f->memp,
                      &fake_ops, &g_args[r], &pol);
  return f;
}

static int64_t deadline_in(int64_t ms) { return coll__now_ms() + ms; }

static void expect_text(const char *want) {
  if (strstr(coll_last_error(), want) == NULL)
    fail_msg("expected '%s' in the error, got: %s", want, coll_last_error());
}

/* Every rank begins round 1; ranks in `posting` post IN. */
static void round1(fake_t *f, int rank_a, int rank_b) {
  for (int r = 0; r < WORLD; r++)
    assert_int_equal(coll__rounds_next(&f->R[r]), 1);
  coll__rounds_post(&f->R[rank_a], COLL_T_FLAG_IN, 1);
  if (rank_b >= 0) coll__rounds_post(&f->R[rank_b], COLL_T_FLAG_IN, 1);
}

/* Rank 2 posts IN and OUT of round 1 and leaves. */
static void finish_and_leave(fake_t *f) {
  coll__rounds_post(&f->R[2], COLL_T_FLAG_IN, 1);
  coll__rounds_post(&f->R[2], COLL_T_FLAG_OUT, 1);
  atomic_store(&f->gone[2], 1);
}

/* Rank 0 found rank 2 behind; rank 2 posted, finished the round and left
 * before rank 0 asked why: the round stands. Round 2, which rank 2 never
 * reached, fails naming it. */
static void test_peer_finished_and_left_between_look_and_why(void **state) {
  fake_t *f = fake_new();
  (void)state;
  round1(f, 0, 1);
  coll__rounds_post(&f->R[1], COLL_T_FLAG_OUT, 1);
  f->hook = finish_and_leave;
  f->hook_rank = 2;
  assert_int_equal(
      coll__rounds_wait(&f->R[0], COLL_T_FLAG_IN, 1, deadline_in(5000)),
      COLL_OK);
  assert_null(f->hook); /* the race happened */
  assert_int_equal(
      coll__rounds_wait(&f->R[0], COLL_T_FLAG_OUT, 1, deadline_in(5000)),
      COLL_OK);
  assert_int_equal(coll__rounds_next(&f->R[0]), 2);
  assert_int_equal(
      coll__rounds_wait(&f->R[0], COLL_T_FLAG_IN, 2, deadline_in(5000)),
      COLL_ERR_PEER_LOST);
  expect_text("waiting for rank 2");
  expect_text("rank 2 left");
  free(f);
}

/* Rank 2 posted IN and left before OUT: it gave up on the round, so a
 * wait for IN, which it reached, fails too, naming it. */
static void test_peer_left_mid_round(void **state) {
  fake_t *f = fake_new();
  (void)state;
  round1(f, 1, 2);
  coll__rounds_post(&f->R[0], COLL_T_FLAG_IN, 1);
  atomic_store(&f->gone[2], 1);
  assert_int_equal(
      coll__rounds_wait(&f->R[0], COLL_T_FLAG_IN, 1, deadline_in(5000)),
      COLL_ERR_PEER_LOST);
  expect_text("waiting for rank 2 in collective round 1");
  assert_int_equal(coll__rounds_blocked(&f->R[0], COLL_T_FLAG_OUT, 1), 0);
  free(f);
}

/* The endpoint's own close ends its wait, whoever is behind. */
static void test_own_close(void **state) {
  fake_t *f = fake_new();
  (void)state;
  round1(f, 0, -1);
  atomic_store(&f->gone[0], 1);
  assert_int_equal(
      coll__rounds_wait(&f->R[0], COLL_T_FLAG_IN, 1, deadline_in(5000)),
      COLL_ERR_ABORTED);
  expect_text("fake rank 0: collective round 1: this endpoint was aborted");
  free(f);
}

/* Nobody closes anything: the deadline ends the wait, naming the first
 * rank behind (rank 2 posted, rank 1 did not), after sleeping. */
static void test_deadline_names_the_first_behind(void **state) {
  fake_t *f = fake_new();
  (void)state;
  round1(f, 0, 2);
  assert_int_equal(f->wakes, 2);
  assert_int_equal(
      coll__rounds_wait(&f->R[0], COLL_T_FLAG_IN, 1, deadline_in(50)),
      COLL_ERR_TIMEOUT);
  expect_text("fake: rank 1 did not reach round 1");
  assert_true(f->sleeps > 0);
  assert_int_equal(atomic_load(&f->R[0].waiters), 0);
  free(f);
}

/* The areas: two slots and two results per rank, SLOT bytes each, in
 * order, and the notes in the control; no direct mode without read_begin. */
static void test_areas(void **state) {
  fake_t *f = fake_new();
  (void)state;
  for (int r = 0; r < WORLD; r++) {
    assert_ptr_equal(coll__rounds_slot(&f->R[0], r, 1), f->mem[r] + SLOT);
    assert_ptr_equal(coll__rounds_result(&f->R[1], r, 0), f->mem[r] + 2 * SLOT);
    assert_ptr_equal(coll__rounds_note(&f->R[2], r, 1), f->ctl[r].note[1]);
  }
  f->R[0].direct_from = 1;
  assert_false(coll__rounds_direct(&f->R[0]));
  assert_int_equal(coll__rounds_read_begin(&f->R[0]), COLL_ERR_INTERNAL);
  free(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_peer_finished_and_left_between_look_and_why),
      cmocka_unit_test(test_peer_left_mid_round),
      cmocka_unit_test(test_own_close),
      cmocka_unit_test(test_deadline_names_the_first_behind),
      cmocka_unit_test(test_areas),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
