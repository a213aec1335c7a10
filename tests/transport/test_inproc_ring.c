/* SPDX-License-Identifier: Apache-2.0 */
/* test_inproc_ring.c: the in-process transport under rank threads: a ring
 * exchange of large buffers, the default dissemination barrier, and a
 * many-thread stress of random sizes, tags and posting orders. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "transport_test.h"

typedef struct run {
  coll_transport_t *t[TT_MAX_RANKS];
  tt_result_t res[TT_MAX_RANKS];
  atomic_int arrived;
} run_t;

static void run_ranks(int world, test_rank_fn fn, const char *what) {
  run_t *x = calloc(1, sizeof *x);
  assert_non_null(x);
  atomic_init(&x->arrived, 0);
  assert_int_equal(coll_inproc_create(world, x->t), COLL_OK);
  test_run_ranks(world, fn, x, TT_RUN_MS, what);
  TT_ASSERT_RANKS_OK(x->res, world);
  tt_destroy_all(x->t, world);
  free(x);
}

/* ------------------------------------------------------------------------ */
/* Ring: every rank sends to rank+1 and receives from rank-1, each message  */
/* a different length so a mix-up shows.                                    */

#define RING_ITERS 3
#define RING_BYTES(src) (((size_t)1 << 20) + 24 * (size_t)(src) + 5)

static uint64_t ring_seed(int src, int it) { return (uint64_t)src * 1000 + it; }

static void ring_rank(int rank, int world, void *arg) {
  run_t *x = arg;
  int right = (rank + 1) % world, left = (rank + world - 1) % world, it;
  unsigned char *out = malloc(RING_BYTES(rank));
  unsigned char *in = malloc(RING_BYTES(left));
  if (out == NULL || in == NULL) {
    tt_fail(&x->res[rank], "out of memory");
    goto done;
  }
  for (it = 0; it < RING_ITERS; it++) {
    void *rs, *rr;
    size_t len = 0;
    coll_status_t s;
    tt_fill(out, RING_BYTES(rank), ring_seed(rank, it));
    /* Alternate the posting order so both copy paths run. */
    if ((rank + it) & 1) {
      s = coll__t_irecv(x->t[rank], left, 100 + it, in, RING_BYTES(left), &rr);
      if (s == COLL_OK)
        s = coll__t_isend(x->t[rank], right, 100 + it, out, RING_BYTES(rank),
                          &rs);
    } else {
      s = coll__t_isend(x->t[rank], right, 100 + it, out, RING_BYTES(rank),
                        &rs);
      if (s == COLL_OK)
        s = coll__t_irecv(x->t[rank], left, 100 + it, in, RING_BYTES(left),
                          &rr);
    }
    if (s == COLL_OK) s = tt_wait(x->t[rank], rr, TT_WAIT_MS, &len);
    if (s == COLL_OK) s = tt_wait(x->t[rank], rs, TT_WAIT_MS, NULL);
    if (s != COLL_OK) {
      tt_fail(&x->res[rank], "ring step %d: %s: %s", it, coll_status_name(s),
              coll_last_error());
      goto done;
    }
    if (len != RING_BYTES(left) ||
        !tt_check(in, RING_BYTES(left), ring_seed(left, it))) {
      tt_fail(&x->res[rank], "ring step %d: wrong data from rank %d", it, left);
      goto done;
    }
  }
done:
  free(out);
  free(in);
}

static void test_ring(void **state) {
  int n;
  (void)state;
  for (n = 1; n <= TT_MAX_RANKS; n++) run_ranks(n, ring_rank, "ring");
}

/* ------------------------------------------------------------------------ */
/* The dissemination barrier really synchronizes: nobody leaves barrier k   */
/* before every rank entered it.                                            */

#define BARRIER_ITERS 30

static void barrier_rank(int rank, int world, void *arg) {
  run_t *x = arg;
  int it, seen;
  for (it = 0; it < BARRIER_ITERS; it++) {
    coll_status_t s;
    /* Uneven arrival, so a barrier that lets a rank through early shows. */
    if ((rank * 7 + it) % 5 == 0) test_sleep_ms(1);
    atomic_fetch_add(&x->arrived, 1);
    s = coll__t_barrier(x->t[rank], COLL_TAG_RESERVED + (uint32_t)it,
                        coll__now_ms() + TT_WAIT_MS);
    if (s != COLL_OK) {
      tt_fail(&x->res[rank], "barrier %d: %s: %s", it, coll_status_name(s),
              coll_last_error());
      return;
    }
    seen = atomic_load(&x->arrived);
    if (seen < world * (it + 1)) {
      tt_fail(&x->res[rank], "left barrier %d after %d of %d arrivals", it,
              seen, world * (it + 1));
      return;
    }
  }
}

static void test_barrier(void **state) {
  int n;
  (void)state;
  for (n = 1; n <= TT_MAX_RANKS; n++) run_ranks(n, barrier_rank, "barrier");
}

/* ------------------------------------------------------------------------ */
/* Stress: 1000 rounds; in each, every rank sends two messages (two tags,   */
/* random sizes around the inline-copy threshold, zero included) to a       */
/* partner chosen by the round, posts in its own random order and waits in  */
/* its own random order.                                                    */

#define STRESS_ROUNDS 1000
#define STRESS_MAX 12000

/* What every rank can compute for round i: the shift and the sizes. */
static int stress_shift(int round, int world) {
  uint64_t st = (uint64_t)round * 77 + 1;
  return world == 1 ? 0 : 1 + (int)(test_rand(&st) % (uint64_t)(world - 1));
}

static size_t stress_len(int round, int src, int k) {
  uint64_t st = ((uint64_t)round << 20) ^ ((uint64_t)src << 4) ^ (uint64_t)k;
  uint64_t v = test_rand(&st);
  return v % 16 == 0 ? 0 : (size_t)(v >> 8) % STRESS_MAX;
}

static uint64_t stress_seed(int round, int src, int k) {
  return ((uint64_t)round << 16) | ((uint64_t)src << 2) | (uint64_t)k;
}

static coll_status_t stress_round(run_t *x, int rank, int world, int round,
                                  uint64_t *rng, unsigned char *out[2],
                                  unsigned char *in[2]) {
  int sh = stress_shift(round, world);
  int to = (rank + sh) % world, from = (rank - sh + world) % world;
  void *req[4];
  size_t got[2] = {0, 0};
  coll_status_t s = COLL_OK;
  int order = (int)(test_rand(rng) % 24), posted = 0, i, k;
  /* The four posts (send 0, send 1, recv 0, recv 1) in a random order that
   * keeps each kind in order: the tags differ, so any interleaving of the
   * two kinds is legal. */
  int seq[4];
  seq[0] = order & 1 ? 2 : 0;
  seq[1] = order & 2 ? 3 : 1;
  seq[2] = seq[0] == 0 ? 2 : 0;
  seq[3] = seq[1] == 1 ? 3 : 1;
  for (k = 0; k < 2; k++)
    tt_fill(out[k], stress_len(round, rank, k), stress_seed(round, rank, k));
  for (i = 0; i < 4 && s == COLL_OK; i++, posted++) {
    k = seq[i] & 1;
    if (seq[i] < 2)
      s = coll__t_isend(x->t[rank], to, (uint32_t)k, out[k],
                        stress_len(round, rank, k), &req[seq[i]]);
    else
      s = coll__t_irecv(x->t[rank], from, (uint32_t)k, in[k], STRESS_MAX,
                        &req[seq[i]]);
  }
  if (s != COLL_OK) return s; /* a post failed: the test fails; no reaping */
  for (i = 0; i < 4; i++) {
    int j = (i + order) % 4;
    coll_status_t w =
        tt_wait(x->t[rank], req[j], TT_WAIT_MS, j >= 2 ? &got[j - 2] : NULL);
    if (w != COLL_OK && s == COLL_OK) s = w;
  }
  for (k = 0; k < 2 && s == COLL_OK; k++)
    if (got[k] != stress_len(round, from, k) ||
        !tt_check(in[k], got[k], stress_seed(round, from, k)))
      s = coll_set_last_error(COLL_ERR_INTERNAL, "wrong data from rank %d",
                              from);
  return s;
}

static void stress_rank(int rank, int world, void *arg) {
  run_t *x = arg;
  unsigned char *out[2], *in[2];
  uint64_t rng = (uint64_t)rank * 31 + 7;
  int round, k;
  for (k = 0; k < 2; k++) {
    out[k] = malloc(STRESS_MAX);
    in[k] = malloc(STRESS_MAX);
  }
  for (round = 0; round < STRESS_ROUNDS; round++) {
    coll_status_t s;
    if (out[0] == NULL || out[1] == NULL || in[0] == NULL || in[1] == NULL) {
      tt_fail(&x->res[rank], "out of memory");
      break;
    }
    s = stress_round(x, rank, world, round, &rng, out, in);
    if (s != COLL_OK) {
      tt_fail(&x->res[rank], "round %d: %s: %s", round, coll_status_name(s),
              coll_last_error());
      break;
    }
  }
  for (k = 0; k < 2; k++) {
    free(out[k]);
    free(in[k]);
  }
}

static void test_stress(void **state) {
  (void)state;
  run_ranks(TT_MAX_RANKS, stress_rank, "stress");
  run_ranks(3, stress_rank, "stress");
}

/* ------------------------------------------------------------------------ */
/* Two threads on each of two endpoints at once, one pair per tag: what a   */
/* comm does when it posts point-to-point messages from its caller's thread */
/* while its worker runs a collective.                                      */

#define SHARED_ROUNDS 300

static void shared_rank(int thread, int nthreads, void *arg) {
  run_t *x = arg;
  int ep = thread % 2, peer = 1 - ep, round;
  uint32_t tag = 1 + (uint32_t)(thread / 2);
  unsigned char *out = malloc(STRESS_MAX), *in = malloc(STRESS_MAX);
  (void)nthreads;
  for (round = 0; round < SHARED_ROUNDS && out && in; round++) {
    size_t n = stress_len(round, thread, 0),
           m = stress_len(round, thread ^ 1, 0);
    size_t len = 0;
    void *rr;
    coll_status_t s;
    tt_fill(out, n, stress_seed(round, thread, 0));
    s = coll__t_irecv(x->t[ep], peer, tag, in, STRESS_MAX, &rr);
    if (s == COLL_OK) s = tt_send(x->t[ep], peer, tag, out, n);
    if (s == COLL_OK) s = tt_wait(x->t[ep], rr, TT_WAIT_MS, &len);
    if (s != COLL_OK) {
      tt_fail(&x->res[thread], "round %d: %s: %s", round, coll_status_name(s),
              coll_last_error());
      break;
    }
    if (len != m || !tt_check(in, m, stress_seed(round, thread ^ 1, 0))) {
      tt_fail(&x->res[thread], "round %d: wrong data", round);
      break;
    }
  }
  if (out == NULL || in == NULL) tt_fail(&x->res[thread], "out of memory");
  free(out);
  free(in);
}

static void test_shared_endpoint(void **state) {
  run_t *x = calloc(1, sizeof *x);
  (void)state;
  assert_non_null(x);
  assert_int_equal(coll_inproc_create(2, x->t), COLL_OK);
  test_run_ranks(4, shared_rank, x, TT_RUN_MS, "shared endpoints");
  TT_ASSERT_RANKS_OK(x->res, 4);
  tt_destroy_all(x->t, 2);
  free(x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ring),
      cmocka_unit_test(test_barrier),
      cmocka_unit_test(test_stress),
      cmocka_unit_test(test_shared_endpoint),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
