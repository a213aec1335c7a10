/* SPDX-License-Identifier: Apache-2.0 */
/* test_algo_fail.c: failures. A rank that never joins: the others return
 * COLL_ERR_TIMEOUT (or PEER_LOST, once a rank that timed out aborted) by
 * their deadline. A rank that aborts its endpoint: the others return
 * promptly, never by timing out, and over the in-process transport with
 * COLL_ERR_ABORTED naming the aborted rank. Ranks that disagree on the count
 * without agreeing first: a length mismatch, and nobody hangs; with the
 * agreement folded into the allreduce, every rank reports it. In every case
 * each request an algorithm posted is waited for (the mailbox counts them). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algo_test.h"
#include "core/comm.h"
#include "test_util.h"

enum { MODE_MISSING, MODE_ABORT, MODE_MISMATCH };

#define AGREE_KIND (-1)
/* The allreduce with the agreement folded in: halving-doubling on a
 * power-of-two world, recursive doubling on another. */
#define CHECKED_KIND (-2)

typedef struct fail_arg {
  at_world_t *w;
  int mode;
  int kind; /* at_kind_t, or AGREE_KIND */
  size_t count;
  int odd; /* the rank that is missing, aborts, or passes another count */
  int64_t timeout_ms;
  int status[AT_MAXW];
  int64_t took_ms[AT_MAXW];
  char text[AT_MAXW][COLL_ERRMSG_MAX];
} fail_arg_t;

static void rank_main(int rank, int n, void *p) {
  fail_arg_t *a = p;
  at_case_t c = {(at_kind_t)(a->kind < 0 ? AT_BARRIER : a->kind),
                 a->count,
                 COLL_F32,
                 COLL_SUM,
                 4096,
                 n - 1,
                 0,
                 0};
  coll_algo_ctx_t ctx;
  size_t bytes;
  char *buf;
  int64_t t0;
  if (rank == a->odd && a->mode == MODE_MISSING) return;
  if (rank == a->odd && a->mode == MODE_ABORT) {
    test_sleep_ms(20);
    coll__t_abort(a->w->t[rank]);
    return;
  }
  if (rank == a->odd && a->mode == MODE_MISMATCH) c.count += 1;
  bytes = c.count * 4 * ((c.kind == AT_RS || c.kind == AT_AG) ? (size_t)n : 1);
  buf = calloc(1, bytes);
  if (buf == NULL) {
    a->status[rank] = COLL_ERR_NO_MEMORY;
    return;
  }
  at_ctx(a->w, rank, 7, c.seg, a->timeout_ms, &ctx);
  t0 = test_now_ms();
  if (a->kind == AGREE_KIND || a->kind == CHECKED_KIND) {
    coll_desc_t d = {.kind = COLL_WORK_ALLREDUCE,
                     .dtype = COLL_F32,
                     .op = COLL_SUM,
                     .count = c.count};
    ctx.check = &d;
    if (a->kind == AGREE_KIND)
      a->status[rank] = coll__agree(&ctx, &d);
    else if ((n & (n - 1)) == 0)
      a->status[rank] =
          coll__allreduce_rh(&ctx, buf, buf, c.count, COLL_F32, COLL_SUM);
    else
      a->status[rank] =
          coll__allreduce_rd(&ctx, buf, buf, c.count, COLL_F32, COLL_SUM);
  } else {
    a->status[rank] = at_call(&c, &ctx, buf);
  }
  a->took_ms[rank] = test_now_ms() - t0;
  snprintf(a->text[rank], COLL_ERRMSG_MAX, "%s", coll_last_error());
  free(buf);
}

/* The algorithms and sizes to break: small and large variants where the
 * algorithm switches by size. */
static const struct {
  int kind;
  size_t count;
} algos[] = {
    {AT_AR_RING, 1000}, {AT_AR_RD, 1000},     {AT_AR_RH, 1000},
    {AT_RS, 300},       {AT_AG, 300},         {AT_BCAST, 100},
    {AT_BCAST, 100003}, {AT_REDUCE, 100},     {AT_REDUCE, 100003},
    {AT_BARRIER, 0},    {CHECKED_KIND, 1000}, {AGREE_KIND, 10},
};
#define NALGOS (sizeof algos / sizeof algos[0])

static const char *algo_name(int kind) {
  if (kind == AGREE_KIND) return "agree";
  if (kind == CHECKED_KIND) return "checked allreduce";
  return at_kind_name((at_kind_t)kind);
}

/* Runs one failure and checks every rank's outcome against `allowed` (a
 * bit per status). Returns the number of problems. */
static size_t run_one(int mode, int tp, int n, size_t ai, int odd,
                      int64_t timeout_ms, unsigned allowed,
                      coll_status_t must_see) {
  fail_arg_t *a = calloc(1, sizeof *a);
  at_world_t w;
  size_t bad = 0, leaked;
  int r, seen = 0;
  char named[32];
  assert_non_null(a);
  assert_int_equal(at_open(&w, n, (at_tp_t)tp), 0);
  a->w = &w;
  a->mode = mode;
  a->kind = algos[ai].kind;
  a->count = algos[ai].count;
  a->odd = odd;
  a->timeout_ms = timeout_ms;
  test_run_ranks(n, rank_main, a, 60000, "failure case");
  snprintf(named, sizeof named, "rank %d aborted", odd);
  for (r = 0; r < n; r++) {
    if (r == odd && mode != MODE_MISMATCH) continue;
    seen |= a->status[r] == (int)must_see;
    /* Over the library's own transport, an abort is reported as the
     * aborted rank's by every rank it ends, never as a rank lost. */
    if (mode == MODE_ABORT && tp == AT_INPROC && a->status[r] != COLL_OK &&
        (a->status[r] != COLL_ERR_ABORTED ||
         strstr(a->text[r], named) == NULL)) {
      if (bad++ == 0)
        fprintf(stderr, "FAIL abort %s odd rank %d: rank %d: %s: %s\n",
                algo_name(a->kind), odd, r,
                coll_status_name((coll_status_t)a->status[r]), a->text[r]);
      continue;
    }
    /* A failure's text names a peer ("receive from rank 3: ..."). */
    if (a->status[r] >= 0 && a->status[r] < 32 &&
        (allowed >> a->status[r] & 1u) &&
        (a->status[r] == COLL_OK || strstr(a->text[r], "rank ") != NULL))
      continue;
    if (bad++ == 0)
      fprintf(stderr,
              "FAIL mode %d %s world %d %s odd rank %d: rank %d: %s: %s\n",
              mode, at_tp_name((at_tp_t)tp), n, algo_name(a->kind), odd, r,
              coll_status_name((coll_status_t)a->status[r]), a->text[r]);
  }
  if (!seen && must_see != COLL_OK) {
    fprintf(stderr, "FAIL mode %d %s world %d %s odd rank %d: no rank saw %s\n",
            mode, at_tp_name((at_tp_t)tp), n, algo_name(a->kind), odd,
            coll_status_name(must_see));
    bad++;
  }
  if (getenv("ALGO_TEST_VERBOSE") != NULL)
    for (r = 0; r < n; r++)
      fprintf(stderr, "  mode %d %s n %d %s rank %d: %s in %lld ms: %s\n", mode,
              at_tp_name((at_tp_t)tp), n, algo_name(a->kind), r,
              coll_status_name((coll_status_t)a->status[r]),
              (long long)a->took_ms[r], a->text[r]);
  leaked = at_close(&w);
  if (leaked) fprintf(stderr, "FAIL: %zu requests never waited\n", leaked);
  free(a);
  return bad + leaked;
}

#define BIT(s) (1u << (s))

/* A rank that never joins. With rendezvous sends somebody must wait on it
 * and time out; with eager sends a rank that only sends to it finishes. */
static void test_missing_rank(void **state) {
  static const int worlds[] = {2, 5, 8};
  size_t bad = 0, ai, wi;
  int tp;
  (void)state;
  for (tp = 0; tp < AT_NTP; tp++)
    for (wi = 0; wi < 3; wi++)
      for (ai = 0; ai < NALGOS; ai++) {
        int n = worlds[wi], odd = (int)(ai + wi) % n;
        unsigned allowed =
            BIT(COLL_OK) | BIT(COLL_ERR_TIMEOUT) | BIT(COLL_ERR_PEER_LOST);
        if (n == 8 && ai % 2) continue; /* half the algorithms at 8 */
        bad += run_one(MODE_MISSING, tp, n, ai, odd, 100, allowed,
                       tp == AT_MBOX_EAGER ? COLL_OK : COLL_ERR_TIMEOUT);
      }
  assert_int_equal(bad, 0);
}

/* A rank that aborts: the others learn of it long before their deadline. */
static void test_peer_abort(void **state) {
  size_t bad = 0, ai;
  int tp, n;
  (void)state;
  for (tp = 0; tp < AT_NTP; tp++)
    for (n = 2; n <= AT_MAXW; n += 3)
      for (ai = 0; ai < NALGOS; ai++)
        bad += run_one(
            MODE_ABORT, tp, n, ai, (int)ai % n, 30000,
            BIT(COLL_OK) | BIT(COLL_ERR_PEER_LOST) | BIT(COLL_ERR_ABORTED),
            COLL_OK);
  assert_int_equal(bad, 0);
}

/* Ranks that disagree on the count and skip the agreement: the message
 * lengths expose it, and every rank returns. */
static void test_count_mismatch(void **state) {
  size_t bad = 0;
  int tp, n;
  (void)state;
  for (tp = 0; tp < AT_NTP; tp++)
    for (n = 2; n <= AT_MAXW; n += 2) {
      unsigned allowed = BIT(COLL_OK) | BIT(COLL_ERR_TIMEOUT) |
                         BIT(COLL_ERR_PEER_LOST) |
                         BIT(COLL_ERR_LENGTH_MISMATCH);
      bad += run_one(MODE_MISMATCH, tp, n, 0, n - 1, 2000, allowed,
                     COLL_ERR_LENGTH_MISMATCH);
      bad += run_one(MODE_MISMATCH, tp, n, 1, 0, 2000, allowed,
                     COLL_ERR_LENGTH_MISMATCH);
      bad += run_one(MODE_MISMATCH, tp, n, 5, 1, 2000, allowed,
                     COLL_ERR_LENGTH_MISMATCH);
      /* The agreement folded in: every rank knows, nobody waits. */
      bad += run_one(MODE_MISMATCH, tp, n, 10, n / 2, 2000,
                     BIT(COLL_ERR_LENGTH_MISMATCH), COLL_ERR_LENGTH_MISMATCH);
    }
  assert_int_equal(bad, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_missing_rank),
      cmocka_unit_test(test_peer_abort),
      cmocka_unit_test(test_count_mismatch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
