/* SPDX-License-Identifier: Apache-2.0 */
/* test_algo_checked.c: the allreduces that carry the descriptor check
 * (the context's `check`, algo/agree.h) in their messages: recursive
 * doubling (coll__allreduce_rd) and, on power-of-two worlds,
 * halving-doubling (coll__allreduce_rh). On 1..8 ranks over every test
 * transport, for each scenario of differing descriptors: every rank
 * returns what the check alone (coll__check_alone) returns in the same
 * scenario, the same status and the same text, and leaves its result
 * buffer untouched on a mismatch; with matching descriptors the result is
 * the exact sum. Ranks whose descriptor differs run either path (the check
 * alone stands for a rank whose size took the ring), and the carrying
 * ranks still see the mismatch; under halving-doubling a rank whose size
 * took recursive doubling too. A rank that ran the check alone with the
 * same descriptor is a disagreement too. Over the mailboxes the check
 * rides in the algorithms' messages; over the in-process transport, which
 * maps shared memory, it is a round of notes that they run first, as any
 * other algorithm does there, so that ranks on any path meet. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algo/agree.h"
#include "algo_test.h"
#include "core/comm.h"
#include "test_util.h"

#define COUNT 100
#define SENTINEL (-7.0f)

enum { F_NONE, F_COUNT, F_OP, F_KIND, F_SAME };

/* Rank `pos` differs in `field`; it runs the standalone agreement if
 * `standalone` is 1, the other checked allreduce if 2. F_SAME: same
 * descriptor, standalone path (a tuning variable set differently). */
typedef struct scen {
  int field, pos, standalone;
} scen_t;

#define MAX_SCEN 64

typedef struct arg {
  at_world_t *w;
  const scen_t *sc;
  size_t nsc;
  int reference; /* 1: every rank runs coll__agree (the reference pass) */
  int rh;        /* 1: halving-doubling where the world allows it */
  int *status;   /* [scenario * n + rank] */
  char (*text)[COLL_ERRMSG_MAX];
  int *bad; /* [scenario * n + rank]: the buffer is wrong */
} arg_t;

static int pow2(int n) { return (n & (n - 1)) == 0; }

/* The allreduce of this pass, or (other) the other one, checking d. */
static coll_status_t run_checked(const arg_t *a, int other,
                                 coll_algo_ctx_t *ctx, const coll_desc_t *d,
                                 const float *src, float *dst) {
  int n = ctx->world, rh = a->rh && pow2(n);
  if (other && pow2(n)) rh = !rh;
  ctx->check = d;
  if (rh)
    return coll__allreduce_rh(ctx, src, dst, (size_t)d->count, COLL_F32,
                              (coll_op_t)d->op);
  return coll__allreduce_rd(ctx, src, dst, (size_t)d->count, COLL_F32,
                            (coll_op_t)d->op);
}

/* The check alone, checking d. */
static coll_status_t run_alone(coll_algo_ctx_t *ctx, const coll_desc_t *d) {
  ctx->check = d;
  return coll__check_alone(ctx);
}

static void rank_main(int rank, int n, void *p) {
  arg_t *a = p;
  float *src = malloc((COUNT + 1) * sizeof *src);
  float *dst = malloc((COUNT + 1) * sizeof *dst);
  size_t i;
  int j;
  if (src == NULL || dst == NULL) {
    fprintf(stderr, "out of memory in the test\n");
    abort();
  }
  for (i = 0; i < a->nsc; i++) {
    const scen_t *s = &a->sc[i];
    coll_desc_t d = {.kind = COLL_WORK_ALLREDUCE,
                     .dtype = COLL_F32,
                     .op = COLL_SUM,
                     .root = -1,
                     .count = COUNT};
    size_t k = i * (size_t)n + (size_t)rank;
    int odd = rank == s->pos, standalone = odd && s->standalone == 1;
    coll_algo_ctx_t ctx;
    if (odd && s->field == F_COUNT) d.count = COUNT + 1;
    if (odd && s->field == F_OP) d.op = COLL_MAX;
    if (odd && s->field == F_KIND) d.kind = COLL_WORK_BROADCAST;
    for (j = 0; j <= COUNT; j++) {
      src[j] = (float)(rank * 1000 + j);
      dst[j] = SENTINEL;
    }
    at_ctx(a->w, rank, (uint32_t)i, 64, 30000, &ctx);
    if (a->reference || standalone || (s->field == F_KIND && odd))
      a->status[k] = run_alone(&ctx, &d);
    else
      a->status[k] =
          run_checked(a, odd && s->standalone == 2, &ctx, &d, src, dst);
    snprintf(a->text[k], COLL_ERRMSG_MAX, "%s", coll_last_error());
    a->bad[k] = 0;
    if (a->reference || standalone || (s->field == F_KIND && odd)) continue;
    for (j = 0; j <= COUNT && !a->bad[k]; j++) {
      /* The sum of rank*1000 + j over the ranks, exact in f32. */
      float want = (float)(1000 * n * (n - 1) / 2 + n * j);
      if (a->status[k] != COLL_OK || j == COUNT) want = SENTINEL;
      if (dst[j] != want) a->bad[k] = 1 + j;
    }
  }
  free(src);
  free(dst);
}

static size_t scenarios(scen_t *sc, int n) {
  size_t k = 0;
  int pos;
  sc[k++] = (scen_t){F_NONE, -1, 0};
  if (n > 1)
    for (pos = 0; pos < n; pos++) {
      sc[k++] = (scen_t){F_COUNT, pos, 0};
      sc[k++] = (scen_t){F_COUNT, pos, 1};
      sc[k++] = (scen_t){F_COUNT, pos, 2};
      sc[k++] = (scen_t){F_OP, pos, 0};
      sc[k++] = (scen_t){F_KIND, pos, 1};
    }
  sc[k++] = (scen_t){F_NONE, -1, 0};
  return k;
}

static void run_pass(at_tp_t tp, int n, test_rank_fn fn, arg_t *a) {
  at_world_t w;
  a->w = &w;
  assert_int_equal(at_open(&w, n, tp), 0);
  test_run_ranks(n, fn, a, 120000, "checked allreduce");
  assert_int_equal(at_close(&w), 0);
}

static void check_all(int rh) {
  scen_t sc[MAX_SCEN];
  size_t failed = 0;
  int n, tp;
  for (tp = 0; tp < AT_NTP; tp++)
    for (n = 1; n <= AT_MAXW; n++) {
      size_t nsc = scenarios(sc, n), i, cells = nsc * (size_t)n;
      arg_t ref = {NULL, sc, nsc, 1, rh, NULL, NULL, NULL}, got = ref;
      int r;
      if (!at_world_wanted((at_tp_t)tp, n)) continue;
      got.reference = 0;
      ref.status = calloc(cells, sizeof *ref.status);
      ref.text = calloc(cells, sizeof *ref.text);
      ref.bad = calloc(cells, sizeof *ref.bad);
      got.status = calloc(cells, sizeof *got.status);
      got.text = calloc(cells, sizeof *got.text);
      got.bad = calloc(cells, sizeof *got.bad);
      assert_true(ref.status && ref.text && ref.bad && got.status && got.text &&
                  got.bad);
      run_pass((at_tp_t)tp, n, rank_main, &ref);
      run_pass((at_tp_t)tp, n, rank_main, &got);
      for (i = 0; i < nsc; i++)
        for (r = 0; r < n; r++) {
          size_t k = i * (size_t)n + (size_t)r;
          int want = sc[i].field == F_NONE ? COLL_OK : COLL_ERR_LENGTH_MISMATCH;
          if (ref.status[k] == want && got.status[k] == want &&
              strcmp(ref.text[k], got.text[k]) == 0 && !got.bad[k])
            continue;
          if (failed++ < 8)
            fprintf(stderr,
                    "FAIL %s%s world %d scenario %zu (field %d at rank %d%s) "
                    "rank %d: %s: \"%s\"; standalone: %s: \"%s\"; buffer "
                    "%s\n",
                    rh ? "halving-doubling, " : "", at_tp_name((at_tp_t)tp), n,
                    i, sc[i].field, sc[i].pos,
                    sc[i].standalone == 1   ? ", standalone"
                    : sc[i].standalone == 2 ? ", the other algorithm"
                                            : "",
                    r, coll_status_name((coll_status_t)got.status[k]),
                    got.text[k], coll_status_name((coll_status_t)ref.status[k]),
                    ref.text[k], got.bad[k] ? "wrong" : "right");
        }
      free(ref.status);
      free(ref.text);
      free(ref.bad);
      free(got.status);
      free(got.text);
      free(got.bad);
    }
  assert_int_equal(failed, 0);
}

static void test_checked(void **state) {
  (void)state;
  check_all(0);
}

static void test_checked_halving_doubling(void **state) {
  (void)state;
  check_all(1);
}

/* Same descriptor everywhere, but one rank ran the check alone: the ranks
 * it exchanged with see a message without a result, and it sees results
 * it did not expect; on 2 ranks both report the disagreement. Over the
 * mailboxes only: where the transport maps shared memory these algorithms
 * carry nothing (the check is a round of notes there, before any
 * algorithm), and a shared-memory allreduce against the check alone is
 * test_shm_check's. */
static void same_rank(int rank, int n, void *p) {
  arg_t *a = p;
  float buf[COUNT];
  coll_desc_t d = {.kind = COLL_WORK_ALLREDUCE,
                   .dtype = COLL_F32,
                   .op = COLL_SUM,
                   .root = -1,
                   .count = COUNT};
  coll_algo_ctx_t ctx;
  int j;
  (void)n;
  for (j = 0; j < COUNT; j++) buf[j] = (float)j;
  at_ctx(a->w, rank, 7, 64, 30000, &ctx);
  if (rank == 1)
    a->status[rank] = run_alone(&ctx, &d);
  else
    a->status[rank] = run_checked(a, 0, &ctx, &d, buf, buf);
  snprintf(a->text[rank], COLL_ERRMSG_MAX, "%s", coll_last_error());
  a->bad[rank] = 0;
  for (j = 0; j < COUNT && rank == 0; j++)
    if (buf[j] != (float)j) a->bad[rank] = 1;
}

static void test_same_descriptor_other_path(void **state) {
  int tp, r, rh;
  (void)state;
  for (rh = 0; rh < 2; rh++)
    for (tp = AT_MBOX_RDV; tp < AT_NTP; tp++) {
      int status[2];
      char text[2][COLL_ERRMSG_MAX];
      int bad[2];
      arg_t a = {NULL, NULL, 0, 0, rh, status, text, bad};
      run_pass((at_tp_t)tp, 2, same_rank, &a);
      for (r = 0; r < 2; r++) {
        if (status[r] != COLL_ERR_LENGTH_MISMATCH ||
            strstr(text[r], "COLL_ALGO or COLL_RING_THRESHOLD") == NULL)
          fail_msg("%s rank %d: %s: %s", at_tp_name((at_tp_t)tp), r,
                   coll_status_name((coll_status_t)status[r]), text[r]);
        if (bad[r]) fail_msg("rank %d: the buffer was written", r);
      }
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_checked),
      cmocka_unit_test(test_checked_halving_doubling),
      cmocka_unit_test(test_same_descriptor_other_path),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
