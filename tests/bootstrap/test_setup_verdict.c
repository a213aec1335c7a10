/* SPDX-License-Identifier: Apache-2.0 */
/* test_setup_verdict.c: the all-or-nothing end of the setup as libcoll's
 * own store runs it (coll__setup_outcome with `gather`): rank 0 reads every
 * outcome and publishes one verdict, the others read that verdict. 16 rank
 * threads over an in-memory store whose gets are counted: the step costs
 * at most 2n gets (every rank reading every outcome cost n squared), and
 * every rank still returns the same status and the same text, naming the
 * failing ranks and their reasons. Where rank 0 gives no verdict (aborted,
 * or never there), the others read every outcome themselves. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bootstrap/rendezvous/setup_check.h"
#include "core/clock.h"
#include "core/error.h"
#include "test_kv.h"
#include "test_util.h"

#define WORLD 16
#define TIMEOUT_MS 20000
/* Where rank 0 never comes: the others wait this long and the grace. */
#define SHORT_MS 300

typedef struct job {
  test_kv_t *kv;
  test_kv_view_t view[WORLD];
  coll_store_ops_t inner[WORLD];
  atomic_long gets;
  int64_t timeout_ms;
  const char *fail[WORLD]; /* this rank's reason, NULL: it succeeds */
  int aborted0;            /* rank 0's caller aborted its setup */
  int absent0;             /* rank 0 never reports */
  coll_status_t s[WORLD];
  char why[WORLD][COLL_ERRMSG_MAX];
} job_t;

static job_t *cur;

static coll_status_t counted_set(void *ctx, const char *key, const void *value,
                                 size_t len) {
  const coll_store_ops_t *in = ctx;
  return in->set(in->ctx, key, value, len);
}

static coll_status_t counted_get(void *ctx, const char *key, void *value,
                                 size_t cap, size_t *len, int64_t timeout_ms) {
  const coll_store_ops_t *in = ctx;
  atomic_fetch_add(&cur->gets, 1);
  return in->get(in->ctx, key, value, cap, len, timeout_ms);
}

static void rank_main(int rank, int world, void *arg) {
  job_t *j = arg;
  coll_store_ops_t ops;
  coll_setup_t su;
  coll_status_t mine = COLL_OK;
  if (rank == 0 && j->absent0) {
    j->s[0] = COLL_OK;
    return;
  }
  test_kv_ops(&j->view[rank], &j->inner[rank]);
  ops = j->inner[rank];
  ops.ctx = &j->inner[rank];
  ops.set = counted_set;
  ops.get = counted_get;
  su = (coll_setup_t){&ops,
                      "coll/",
                      rank,
                      world,
                      coll__deadline(j->timeout_ms),
                      j->timeout_ms,
                      "test",
                      "setup: lost the store",
                      1};
  if (rank == 0 && j->aborted0)
    mine = coll__err(COLL_ERR_ABORTED, "setup aborted by its caller");
  else if (j->fail[rank] != NULL)
    mine = coll__err(COLL_ERR_INVALID_ARG, "%s", j->fail[rank]);
  j->s[rank] = coll__setup_outcome(&su, mine, NULL);
  snprintf(j->why[rank], sizeof j->why[rank], "%s", coll_last_error());
}

static job_t *new_job(int64_t timeout_ms) {
  job_t *j = calloc(1, sizeof *j);
  int r;
  assert_non_null(j);
  j->kv = test_kv_new();
  assert_non_null(j->kv);
  for (r = 0; r < WORLD; r++) j->view[r].kv = j->kv;
  j->timeout_ms = timeout_ms;
  atomic_init(&j->gets, 0);
  return j;
}

static void run(job_t *j, const char *what) {
  cur = j;
  test_run_ranks(WORLD, rank_main, j, 60000, what);
  cur = NULL;
}

static void free_job(job_t *j) {
  test_kv_free(j->kv);
  free(j);
}

/* Every rank from `from` on returned status s and rank from's text. */
static void all_agree(const job_t *j, int from, coll_status_t s) {
  int r;
  for (r = from; r < WORLD; r++) {
    if (j->s[r] != s)
      fail_msg("rank %d: %s (%s), expected %s", r, coll_status_name(j->s[r]),
               j->why[r], coll_status_name(s));
    if (s != COLL_OK && strcmp(j->why[r], j->why[from]) != 0)
      fail_msg("rank %d said '%s', rank %d '%s'", r, j->why[r], from,
               j->why[from]);
  }
}

static void test_all_ok_costs_2n_gets(void **state) {
  job_t *j = new_job(TIMEOUT_MS);
  long gets;
  (void)state;
  run(j, "all ok");
  all_agree(j, 0, COLL_OK);
  gets = atomic_load(&j->gets);
  printf("all ok: %ld gets for %d ranks\n", gets, WORLD);
  if (gets > 2 * WORLD)
    fail_msg("%ld gets for %d ranks: more than 2 per rank", gets, WORLD);
  free_job(j);
}

static void test_failures_named_with_reasons(void **state) {
  job_t *j = new_job(TIMEOUT_MS);
  long gets;
  (void)state;
  j->fail[3] = "rank 3 broke: its mesh timed out";
  j->fail[11] = "rank 11 broke: no route";
  run(j, "two failures");
  all_agree(j, 0, COLL_ERR_INVALID_ARG);
  if (strstr(j->why[5],
             "setup failed on 2 of 16 ranks (ranks 3, 11); rank "
             "3: rank 3 broke: its mesh timed out; rank 11: rank "
             "11 broke: no route") == NULL)
    fail_msg("%s", j->why[5]);
  gets = atomic_load(&j->gets);
  if (gets > 2 * WORLD)
    fail_msg("%ld gets for %d ranks: more than 2 per rank", gets, WORLD);
  free_job(j);
}

/* Rank 0's caller aborted: it returns at once and asks the others to hear
 * everyone; they name rank 0 and its reason. */
static void test_rank0_aborted(void **state) {
  job_t *j = new_job(TIMEOUT_MS);
  (void)state;
  j->aborted0 = 1;
  run(j, "rank 0 aborted");
  assert_int_equal(j->s[0], COLL_ERR_ABORTED);
  all_agree(j, 1, COLL_ERR_ABORTED);
  if (strstr(j->why[1],
             "setup failed on 1 of 16 ranks (rank 0); rank 0: "
             "setup aborted by its caller") == NULL)
    fail_msg("%s", j->why[1]);
  free_job(j);
}

/* Rank 0 never reports: past their deadline and the grace the others read
 * every outcome themselves and name rank 0 as silent, in bounded time. */
static void test_rank0_absent(void **state) {
  job_t *j = new_job(SHORT_MS);
  int64_t t0 = test_now_ms(), took;
  (void)state;
  j->absent0 = 1;
  run(j, "rank 0 absent");
  took = test_now_ms() - t0;
  all_agree(j, 1, COLL_ERR_TIMEOUT);
  if (strstr(j->why[1],
             "setup failed on 1 of 16 ranks (rank 0); rank 0: it "
             "did not report its setup outcome") == NULL)
    fail_msg("%s", j->why[1]);
  /* The timeout, the 1.5 s grace, and a wide margin for a loaded host. */
  if (took > SHORT_MS + 1500 + 20000)
    fail_msg("the ranks took %lld ms", (long long)took);
  free_job(j);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_ok_costs_2n_gets),
      cmocka_unit_test(test_failures_named_with_reasons),
      cmocka_unit_test(test_rank0_aborted),
      cmocka_unit_test(test_rank0_absent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
