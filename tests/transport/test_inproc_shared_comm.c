/* SPDX-License-Identifier: Apache-2.0 */
/* test_inproc_shared_comm.c: the collectives designed for shared memory
 * between rank threads, through a comm. COLL_ALGO=auto runs allreduces
 * below 8 MiB in rounds through the slots and larger ones reading the
 * callers' buffers directly, bit-exact either way; reduce-scatter in
 * rounds at any size, broadcast on messages above others_below;
 * COLL_ALGO=shm runs broadcast, allgather and reduce-scatter in rounds
 * too. The direct mode reports a count mismatch on every rank without
 * writing, and an abort returns only once no peer reads its buffers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algo/agree.h"
#include "algo/algo.h"
#include "core/clock.h"
#include "transport/endpoint.h"
#include "transport/inproc/inproc.h"
#include "transport_test.h"

#define WORLD 3
/* f32 elements on each side of allreduce_below (8 MiB). */
static const size_t k_counts[] = {1, 1000, (2u << 20) - 1, 2u << 20,
                                  (2u << 20) + 7};

typedef struct comm_job {
  coll_transport_t *t[WORLD];
  coll_comm_t *c[WORLD];
  uint64_t rounds[WORLD][sizeof k_counts / sizeof k_counts[0]];
  int mode[WORLD][sizeof k_counts / sizeof k_counts[0]]; /* the last note's */
  tt_result_t res[WORLD];
} comm_job_t;

static float comm_val(int rank, size_t e) {
  return (float)((e * 7 + (size_t)rank) % 13);
}

/* Whether x holds the serial sum of every rank's comm_val; tells res. */
static int comm_wrong(tt_result_t *res, const char *how, int world,
                      const float *x, size_t count) {
  for (size_t e = 0; e < count; e++) {
    float want = 0;
    for (int r = 0; r < world; r++) want += comm_val(r, e);
    if (x[e] != want) {
      tt_fail(res, "%s, count %zu: element %zu is %g, not %g", how, count, e,
              (double)x[e], (double)want);
      return 1;
    }
  }
  return 0;
}

/* Small integers: the sum is exact in any order, so each rank's result is
 * checked against the serial one bit for bit. */
static void comm_rank(int rank, int world, void *arg) {
  comm_job_t *j = arg;
  inproc_ep_t *ep = j->t[rank]->ctx;
  size_t n = sizeof k_counts / sizeof k_counts[0];
  for (size_t i = 0; i < n; i++) {
    size_t count = k_counts[i], e;
    float *x = malloc(count * sizeof *x), *y = malloc(count * sizeof *y);
    uint64_t before = ep->rounds.round;
    coll_status_t s;
    int bad = 0;
    if (x == NULL || y == NULL) {
      tt_fail(&j->res[rank], "out of memory");
      free(x);
      free(y);
      return;
    }
    for (e = 0; e < count; e++) x[e] = comm_val(rank, e);
    s = coll_allreduce(j->c[rank], x, x, count, COLL_F32, COLL_SUM, NULL);
    j->rounds[rank][i] = ep->rounds.round - before;
    j->mode[rank][i] =
        ep->round_ctl.note[ep->rounds.round & 1][COLL_AGREE_DESC_BYTES];
    if (s == COLL_OK)
      bad = comm_wrong(&j->res[rank], "in place", world, x, count);
    /* Out of place: the input stays as it was. */
    for (e = 0; s == COLL_OK && !bad && e < count; e++)
      x[e] = comm_val(rank, e);
    if (s == COLL_OK && !bad)
      s = coll_allreduce(j->c[rank], x, y, count, COLL_F32, COLL_SUM, NULL);
    if (s == COLL_OK && !bad)
      bad = comm_wrong(&j->res[rank], "out of place", world, y, count);
    for (e = 0; s == COLL_OK && !bad && e < count; e++)
      if (x[e] != comm_val(rank, e)) {
        tt_fail(&j->res[rank], "count %zu: input %zu changed", count, e);
        bad = 1;
      }
    free(x);
    free(y);
    if (s != COLL_OK) {
      tt_fail(&j->res[rank], "count %zu: %s", count, coll_last_error());
      return;
    }
    if (bad) return;
  }
}

/* n rank threads' transports and comms, every wait bounded. */
static void make_comms(int n, coll_transport_t **t, coll_comm_t **c) {
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  cfg.timeout_ms = TT_WAIT_MS;
  assert_int_equal(coll_inproc_create(n, t), COLL_OK);
  for (int r = 0; r < n; r++)
    assert_int_equal(coll_comm_create(t[r], &cfg, &c[r]), COLL_OK);
}

/* Below 8 MiB the allreduce runs in rounds through the slots (several for
 * more than a slot per rank); from 8 MiB on in one round that reads the
 * callers' buffers directly (the direct mode in its note); bit-exact in
 * place and out of place, the input untouched. */
static void test_comm_allreduce_picks_by_size(void **state) {
  comm_job_t j;
  size_t n = sizeof k_counts / sizeof k_counts[0];
  (void)state;
  memset(&j, 0, sizeof j);
  make_comms(WORLD, j.t, j.c);
  test_run_ranks(WORLD, comm_rank, &j, TT_RUN_MS, "allreduce");
  TT_ASSERT_RANKS_OK(j.res, WORLD);
  for (int r = 0; r < WORLD; r++)
    for (size_t i = 0; i < n; i++) {
      int big = k_counts[i] * sizeof(float) >= (8u << 20);
      if (big ? j.rounds[r][i] != 1 : j.rounds[r][i] < 1)
        fail_msg("rank %d, %zu elements: %llu rounds (%s)", r, k_counts[i],
                 (unsigned long long)j.rounds[r][i],
                 big ? "one direct round expected" : "rounds expected");
      if (j.mode[r][i] != (big ? 2 : 1))
        fail_msg("rank %d, %zu elements: mode %d in the note, not %d", r,
                 k_counts[i], j.mode[r][i], big ? 2 : 1);
      if (i == 2 && j.rounds[r][i] < 4)
        fail_msg(
            "rank %d: an 8 MiB - 4 B allreduce took %llu rounds; it "
            "spans several slots",
            r, (unsigned long long)j.rounds[r][i]);
    }
  for (int r = 0; r < WORLD; r++) coll_comm_destroy(j.c[r]);
}

/* With COLL_ALGO=shm, broadcast, allgather and reduce-scatter run in the
 * rounds between threads too (several rounds each: 300 KB per rank is
 * more than a slot), with the right results. */
#define FORCED_COUNT 75001

typedef struct forced_job {
  coll_transport_t *t[WORLD];
  coll_comm_t *c[WORLD];
  tt_result_t res[WORLD];
} forced_job_t;

static float val(int rank, size_t e) {
  return (float)((e * 5 + (size_t)rank) % 11);
}

/* Whether mine, this rank's block of a reduce-scatter (SUM) of every
 * rank's val(r, 0..world*n), is wrong; tells res which element. */
static int rs_wrong(tt_result_t *res, int rank, int world, const float *mine,
                    size_t n) {
  for (size_t e = 0; e < n; e++) {
    float want = 0;
    for (int r = 0; r < world; r++) want += val(r, (size_t)rank * n + e);
    if (mine[e] != want) {
      tt_fail(res, "reduce-scatter: element %zu is %g, not %g", e,
              (double)mine[e], (double)want);
      return 1;
    }
  }
  return 0;
}

static void forced_rank(int rank, int world, void *arg) {
  forced_job_t *j = arg;
  inproc_ep_t *ep = j->t[rank]->ctx;
  size_t n = FORCED_COUNT, e;
  float *b = malloc(n * sizeof *b), *all = malloc(world * n * sizeof *all);
  float *mine = malloc(n * sizeof *mine);
  uint64_t before;
  if (b == NULL || all == NULL || mine == NULL) {
    tt_fail(&j->res[rank], "out of memory");
    goto done;
  }
  for (e = 0; e < n; e++) b[e] = rank == 1 ? val(1, e) : -1.0f;
  before = ep->rounds.round;
  if (coll_broadcast(j->c[rank], b, n, COLL_F32, 1, NULL) != COLL_OK) {
    tt_fail(&j->res[rank], "broadcast: %s", coll_last_error());
    goto done;
  }
  for (e = 0; e < n; e++)
    if (b[e] != val(1, e)) {
      tt_fail(&j->res[rank], "broadcast: element %zu is %g", e, (double)b[e]);
      goto done;
    }
  for (e = 0; e < n; e++) mine[e] = val(rank, e);
  if (coll_allgather(j->c[rank], mine, all, n, COLL_F32, NULL) != COLL_OK) {
    tt_fail(&j->res[rank], "allgather: %s", coll_last_error());
    goto done;
  }
  for (int r = 0; r < world; r++)
    for (e = 0; e < n; e++)
      if (all[(size_t)r * n + e] != val(r, e)) {
        tt_fail(&j->res[rank], "allgather: rank %d's element %zu is %g", r, e,
                (double)all[(size_t)r * n + e]);
        goto done;
      }
  for (e = 0; e < world * n; e++) all[e] = val(rank, e);
  if (coll_reduce_scatter(j->c[rank], all, mine, n, COLL_F32, COLL_SUM, NULL) !=
      COLL_OK) {
    tt_fail(&j->res[rank], "reduce-scatter: %s", coll_last_error());
    goto done;
  }
  if (rs_wrong(&j->res[rank], rank, world, mine, n)) goto done;
  /* Each of the three spans several slots; on messages only the three
   * checks would count. */
  if (ep->rounds.round - before < 9)
    tt_fail(&j->res[rank], "%llu rounds for three collectives",
            (unsigned long long)(ep->rounds.round - before));
done:
  free(b);
  free(all);
  free(mine);
}

static void test_comm_forced_rounds(void **state) {
  forced_job_t j;
  (void)state;
  memset(&j, 0, sizeof j);
  setenv("COLL_ALGO", "shm", 1);
  make_comms(WORLD, j.t, j.c);
  unsetenv("COLL_ALGO");
  test_run_ranks(WORLD, forced_rank, &j, TT_RUN_MS, "forced");
  TT_ASSERT_RANKS_OK(j.res, WORLD);
  for (int r = 0; r < WORLD; r++) coll_comm_destroy(j.c[r]);
}

/* Under auto, reduce-scatter takes the rounds at any size, broadcast
 * keeps messages above others_below: 4 MiB of each between 2 threads. */
#define AUTO_COUNT ((size_t)1 << 20)

typedef struct auto_job {
  coll_transport_t *t[2];
  coll_comm_t *c[2];
  uint64_t rs_rounds[2], bcast_rounds[2];
  tt_result_t res[2];
} auto_job_t;

static void auto_rank(int rank, int world, void *arg) {
  auto_job_t *j = arg;
  inproc_ep_t *ep = j->t[rank]->ctx;
  size_t n = AUTO_COUNT / (size_t)world, e;
  float *all = malloc(AUTO_COUNT * sizeof *all), *mine = malloc(n * 4);
  uint64_t before;
  if (all == NULL || mine == NULL) {
    tt_fail(&j->res[rank], "out of memory");
    goto done;
  }
  for (e = 0; e < AUTO_COUNT; e++) all[e] = val(rank, e);
  before = ep->rounds.round;
  if (coll_reduce_scatter(j->c[rank], all, mine, n, COLL_F32, COLL_SUM, NULL) !=
      COLL_OK) {
    tt_fail(&j->res[rank], "reduce-scatter: %s", coll_last_error());
    goto done;
  }
  j->rs_rounds[rank] = ep->rounds.round - before;
  if (rs_wrong(&j->res[rank], rank, world, mine, n)) goto done;
  for (e = 0; e < AUTO_COUNT; e++) all[e] = rank == 0 ? val(0, e) : -1.0f;
  before = ep->rounds.round;
  if (coll_broadcast(j->c[rank], all, AUTO_COUNT, COLL_F32, 0, NULL) !=
      COLL_OK) {
    tt_fail(&j->res[rank], "broadcast: %s", coll_last_error());
    goto done;
  }
  j->bcast_rounds[rank] = ep->rounds.round - before;
  for (e = 0; e < AUTO_COUNT; e++)
    if (all[e] != val(0, e)) {
      tt_fail(&j->res[rank], "broadcast: element %zu is %g", e, (double)all[e]);
      goto done;
    }
done:
  free(all);
  free(mine);
}

static void test_comm_auto_reduce_scatter_rounds(void **state) {
  auto_job_t j;
  (void)state;
  memset(&j, 0, sizeof j);
  make_comms(2, j.t, j.c);
  test_run_ranks(2, auto_rank, &j, TT_RUN_MS, "auto");
  TT_ASSERT_RANKS_OK(j.res, 2);
  for (int r = 0; r < 2; r++) {
    /* 4 MiB over 256 KiB slots: many rounds; messages: the check alone. */
    if (j.rs_rounds[r] < 8)
      fail_msg("rank %d: reduce-scatter took %llu rounds", r,
               (unsigned long long)j.rs_rounds[r]);
    if (j.bcast_rounds[r] != 1)
      fail_msg("rank %d: broadcast took %llu rounds, not the check's one", r,
               (unsigned long long)j.bcast_rounds[r]);
    coll_comm_destroy(j.c[r]);
  }
}

/* Ranks that disagree on the count where one or both would read directly
 * (8 MiB and 8 MiB + 64 B; 8 MiB and 4 KiB): LENGTH_MISMATCH on both,
 * nothing read or written, and the comm works on. */
typedef struct mismatch_job {
  coll_transport_t *t[2];
  coll_comm_t *c[2];
  size_t count[2];
  coll_status_t s[2];
  tt_result_t res[2];
} mismatch_job_t;

static void mismatch_rank(int rank, int world, void *arg) {
  mismatch_job_t *j = arg;
  size_t count = j->count[rank], big = (size_t)(2u << 20) + 16, e;
  float *x = malloc(big * sizeof *x);
  if (x == NULL) {
    tt_fail(&j->res[rank], "out of memory");
    return;
  }
  for (e = 0; e < big; e++) x[e] = comm_val(rank, e);
  j->s[rank] =
      coll_allreduce(j->c[rank], x, x, count, COLL_F32, COLL_SUM, NULL);
  for (e = 0; e < big; e++)
    if (x[e] != comm_val(rank, e)) {
      tt_fail(&j->res[rank], "element %zu written after a mismatch", e);
      break;
    }
  /* The same count on both: the comm still works. */
  if (e == big && coll_allreduce(j->c[rank], x, x, 1u << 21, COLL_F32, COLL_SUM,
                                 NULL) == COLL_OK)
    (void)comm_wrong(&j->res[rank], "after a mismatch", world, x, 1u << 21);
  else if (e == big)
    tt_fail(&j->res[rank], "after a mismatch: %s", coll_last_error());
  free(x);
}

static void test_direct_mismatch(void **state) {
  static const size_t other[] = {(2u << 20) + 16, 1024};
  (void)state;
  for (int k = 0; k < 2; k++) {
    mismatch_job_t j;
    memset(&j, 0, sizeof j);
    j.count[0] = 2u << 20;
    j.count[1] = other[k];
    make_comms(2, j.t, j.c);
    test_run_ranks(2, mismatch_rank, &j, TT_RUN_MS, "direct mismatch");
    TT_ASSERT_RANKS_OK(j.res, 2);
    for (int r = 0; r < 2; r++) {
      if (j.s[r] != COLL_ERR_LENGTH_MISMATCH)
        fail_msg("counts %zu and %zu: rank %d got %s", j.count[0], j.count[1],
                 r, coll_status_name(j.s[r]));
      coll_comm_destroy(j.c[r]);
    }
  }
}

/* An abort of one rank while a peer reads its buffers in the direct mode
 * returns only once that read is over, so its caller may free them at
 * once: rank 1 stalls at the start of its first read, a third thread
 * aborts rank 0 meanwhile. Both calls fail with the abort. */
typedef struct abort_job {
  coll_transport_t *t[2];
  coll_comm_t *c[2];
  coll_abort_handle_t *h0;
  atomic_int in_read, read_over;
  int reading_at_return, over_at_return;
  coll_status_t s[2];
  tt_result_t res[3];
} abort_job_t;

static abort_job_t *g_abort_job;

static void stall_first_read(int rank) {
  abort_job_t *j = g_abort_job;
  if (rank != 1 || atomic_exchange(&j->in_read, 1) != 0) return;
  test_sleep_ms(300);
  atomic_store(&j->read_over, 1);
}

static void abort_rank(int rank, int world, void *arg) {
  abort_job_t *j = arg;
  int64_t until = coll__now_ms() + 10000;
  (void)world;
  if (rank == 2) {
    inproc_ep_t *ep1 = j->t[1]->ctx;
    while (!atomic_load(&j->in_read) && coll__now_ms() < until)
      test_sleep_ms(1);
    if (!atomic_load(&j->in_read)) {
      tt_fail(&j->res[2], "rank 1 never read its peers' buffers");
      coll_abort(j->h0);
      return;
    }
    if (coll_abort(j->h0) != COLL_OK) tt_fail(&j->res[2], "coll_abort failed");
    j->over_at_return = atomic_load(&j->read_over);
    j->reading_at_return = atomic_load(&ep1->coll_reading);
    return;
  }
  {
    size_t count = (size_t)(8u << 20) / sizeof(float);
    float *x = malloc(count * sizeof *x);
    if (x == NULL) {
      tt_fail(&j->res[rank], "out of memory");
      return;
    }
    for (size_t e = 0; e < count; e++) x[e] = comm_val(rank, e);
    j->s[rank] =
        coll_allreduce(j->c[rank], x, x, count, COLL_F32, COLL_SUM, NULL);
    free(x);
  }
}

static void test_abort_waits_for_direct_readers(void **state) {
  abort_job_t j;
  (void)state;
  memset(&j, 0, sizeof j);
  atomic_init(&j.in_read, 0);
  atomic_init(&j.read_over, 0);
  make_comms(2, j.t, j.c);
  assert_int_equal(coll_comm_abort_handle(j.c[0], &j.h0), COLL_OK);
  g_abort_job = &j;
  coll__shm_direct_read_hook = stall_first_read;
  test_run_ranks(3, abort_rank, &j, TT_RUN_MS, "abort during a direct read");
  coll__shm_direct_read_hook = NULL;
  TT_ASSERT_RANKS_OK(j.res, 3);
  if (!j.over_at_return || j.reading_at_return)
    fail_msg(
        "coll_abort on rank 0 returned while rank 1 still read its "
        "buffer (stall over: %d, reading: %d)",
        j.over_at_return, j.reading_at_return);
  assert_int_equal(j.s[0], COLL_ERR_ABORTED);
  assert_int_equal(j.s[1], COLL_ERR_ABORTED);
  coll_abort_handle_release(j.h0);
  for (int r = 0; r < 2; r++) coll_comm_destroy(j.c[r]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_comm_allreduce_picks_by_size),
      cmocka_unit_test(test_comm_forced_rounds),
      cmocka_unit_test(test_comm_auto_reduce_scatter_rounds),
      cmocka_unit_test(test_direct_mismatch),
      cmocka_unit_test(test_abort_waits_for_direct_readers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
