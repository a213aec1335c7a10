/* SPDX-License-Identifier: Apache-2.0 */
/* test_sock_v2.c: a third party's transport written from coll_transport.h alone
 * (sock_transport.c: socketpairs between rank threads, every version 2
 * slot filled) gets what libcoll's own transports get, asserted as their
 * tests assert it: a failure named by the rank where it started on every
 * rank ("rank 3 lost, seen by rank 1", also where rank 1 only heard of it
 * from rank 0), an abort named as an abort, a destroyed comm as one that
 * left; the desync report naming the
 * rank that skipped a collective or waits in a recv, on every rank
 * (desync_rank.c, as test_desync.c runs it over the in-process transport);
 * shrink after a lost rank, after an abort, and on a healthy comm, each
 * survivor's new comm with the agreed members reducing correctly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "desync_rank.h"
#include "sock_transport.h"
#include "test_util.h"

#define W 4
#define COMM_TIMEOUT_MS 60000
#define RUN_MS 120000
#define TEXT 512

typedef enum {
  SC_CRASH,       /* rank 3's process dies during allreduce #2 */
  SC_CUT,         /* the link between ranks 0 and 3 breaks; rank 3 idles */
  SC_ABORT,       /* rank 3's owner aborts its comm */
  SC_DESTROY,     /* rank 3's owner destroys its comm */
  SC_SHRINK_LOST, /* rank 2 dies; the others shrink */
  SC_SHRINK_ABORT /* rank 2's owner aborts; everyone shrinks */
} scenario_t;

typedef struct run {
  scenario_t sc;
  sock_world_t *w;
  coll_comm_t *c[W];
  atomic_int arrived, left;
  /* What each rank saw: its failing call's status and text, then (shrink)
   * the shrink's status, its new rank and size, and its allreduce. */
  coll_status_t st[W], shrink_st[W];
  char text[W][TEXT], shrink_text[W][TEXT];
  int new_rank[W], new_size[W];
  float sum[W];
  char bad[W][TEXT]; /* anything else that went wrong */
} run_t;

static int make_comms(sock_world_t *w, int64_t timeout_ms, coll_comm_t **c) {
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  int r;
  cfg.timeout_ms = timeout_ms;
  for (r = 0; r < W; r++) {
    coll_transport_t *t = NULL;
    if (sock_endpoint(w, r, &t) != COLL_OK ||
        coll_comm_create(t, &cfg, &c[r]) != COLL_OK) {
      fprintf(stderr, "rank %d: %s\n", r, coll_last_error());
      return -1;
    }
  }
  return 0;
}

/* Every rank got here (bounded: a rank that never comes is a failure). */
static int meet(atomic_int *n, int want) {
  int64_t end = test_now_ms() + RUN_MS / 2;
  atomic_fetch_add(n, 1);
  while (atomic_load(n) < want)
    if (test_now_ms() > end)
      return -1;
    else
      test_sleep_ms(1);
  return 0;
}

static float allreduce_rank_sum(coll_comm_t *c, float mine, coll_status_t *st) {
  float v[16];
  int i;
  for (i = 0; i < 16; i++) v[i] = mine;
  *st = coll_allreduce(c, v, v, 16, COLL_F32, COLL_SUM, NULL);
  return v[15];
}

static void shrink_part(run_t *x, int rank) {
  coll_comm_t *nc = NULL;
  coll_status_t s;
  x->shrink_st[rank] = coll_comm_shrink(x->c[rank], NULL, &nc);
  snprintf(x->shrink_text[rank], TEXT, "%s", coll_last_error());
  if (x->shrink_st[rank] != COLL_OK) return;
  x->new_rank[rank] = coll_comm_rank(nc);
  x->new_size[rank] = coll_comm_size(nc);
  x->sum[rank] = allreduce_rank_sum(nc, (float)(rank + 1), &s);
  if (s != COLL_OK)
    snprintf(x->bad[rank], TEXT, "allreduce on the new comm: %s",
             coll_last_error());
  coll_comm_destroy(nc);
}

static void rank_main(int rank, int world, void *arg) {
  run_t *x = arg;
  coll_abort_handle_t *h = NULL;
  coll_status_t s;
  int odd = x->sc >= SC_SHRINK_LOST ? 2 : 3;
  float got = allreduce_rank_sum(x->c[rank], (float)(rank + 1), &s);
  if (s != COLL_OK || got != 10.0f) {
    snprintf(x->bad[rank], TEXT, "allreduce #1: %s", coll_last_error());
    return;
  }
  if (meet(&x->arrived, world) != 0) {
    snprintf(x->bad[rank], TEXT, "the others never came");
    return;
  }
  if (rank == odd || (x->sc == SC_CUT && rank == 0)) {
    if (x->sc == SC_CRASH || x->sc == SC_SHRINK_LOST) sock_crash(x->w, rank);
    if (x->sc == SC_CUT) sock_crash_link(x->w, 0, 3);
    if (x->sc == SC_DESTROY) {
      coll_comm_destroy(x->c[rank]);
      x->c[rank] = NULL;
    }
    if (x->sc == SC_ABORT || x->sc == SC_SHRINK_ABORT) {
      (void)coll_comm_abort_handle(x->c[rank], &h);
      (void)coll_abort(h);
      coll_abort_handle_release(h);
    }
  }
  if (rank != odd || x->sc == SC_ABORT) {
    (void)allreduce_rank_sum(x->c[rank], (float)(rank + 1), &s);
    x->st[rank] = s;
    snprintf(x->text[rank], TEXT, "%s", coll_last_error());
  }
  if (x->sc == SC_SHRINK_LOST && rank != odd) shrink_part(x, rank);
  if (x->sc == SC_SHRINK_ABORT) shrink_part(x, rank);
  /* The comms go only once every rank is done with its own. */
  (void)meet(&x->left, world);
}

static run_t *run(scenario_t sc) {
  run_t *x = calloc(1, sizeof *x);
  assert_non_null(x);
  x->sc = sc;
  x->w = sock_world_new(W);
  assert_non_null(x->w);
  assert_int_equal(make_comms(x->w, COMM_TIMEOUT_MS, x->c), 0);
  test_run_ranks(W, rank_main, x, RUN_MS, "sock transport");
  test_destroy_comms(W, x->c);
  sock_world_release(x->w);
  for (int r = 0; r < W; r++)
    if (x->bad[r][0] != '\0') fail_msg("rank %d: %s", r, x->bad[r]);
  return x;
}

/* Rank r's text names `who` as the origin, seen by r itself. */
static void expect_named(const run_t *x, int r, coll_status_t st,
                         const char *who) {
  char seen[32];
  snprintf(seen, sizeof seen, "seen by rank %d", r);
  if (x->st[r] != st || strstr(x->text[r], who) == NULL ||
      strstr(x->text[r], seen) == NULL)
    fail_msg("rank %d: %s: %s (want %s, '%s', '%s')", r,
             coll_status_name(x->st[r]), x->text[r], coll_status_name(st), who,
             seen);
}

/* ---- failure origins ------------------------------------------------------
 */

static void test_lost_rank_named_everywhere(void **state) {
  run_t *x;
  (void)state;
  x = run(SC_CRASH);
  for (int r = 0; r < 3; r++)
    expect_named(x, r, COLL_ERR_PEER_LOST,
                 "rank 3 lost (connection closed without goodbye)");
  free(x);
}

/* Only rank 0 sees rank 3 go; ranks 1 and 2 hear of it from rank 0's
 * failure and must still name rank 3, the origin, not rank 0. */
static void test_origin_forwarded(void **state) {
  run_t *x;
  (void)state;
  x = run(SC_CUT);
  for (int r = 0; r < 3; r++)
    expect_named(x, r, COLL_ERR_PEER_LOST, "rank 3 lost");
  free(x);
}

static void test_abort_named_as_abort(void **state) {
  run_t *x;
  (void)state;
  x = run(SC_ABORT);
  for (int r = 0; r < 3; r++)
    expect_named(x, r, COLL_ERR_ABORTED, "rank 3 aborted");
  assert_int_equal(x->st[3], COLL_ERR_ABORTED);
  free(x);
}

static void test_destroyed_rank_named(void **state) {
  run_t *x;
  (void)state;
  x = run(SC_DESTROY);
  for (int r = 0; r < 3; r++)
    expect_named(x, r, COLL_ERR_PEER_LOST,
                 "rank 3 left (its comm was destroyed)");
  free(x);
}

/* ---- the desync report ----------------------------------------------------
 */

typedef struct ds_run {
  coll_comm_t *c[DS_WORLD];
  ds_scenario_t sc;
  ds_shared_t sh;
} ds_run_t;

static void ds_main(int rank, int world, void *arg) {
  ds_run_t *run = arg;
  (void)world;
  (void)ds_rank(run->c[rank], rank, run->sc, &run->sh);
}

static void run_desync(ds_scenario_t sc) {
  ds_run_t *x = calloc(1, sizeof *x);
  sock_world_t *w = sock_world_new(DS_WORLD);
  char msg[DS_TEXT + 128];
  int rc;
  assert_non_null(x);
  assert_non_null(w);
  x->sc = sc;
  ds_shared_init(&x->sh);
  /* The receiving thread hears of the failure while rank 3 is in user
   * code, as TCP's loop thread does. */
  x->sh.heard_first = 1;
  assert_int_equal(make_comms(w, DS_TIMEOUT_MS, x->c), 0);
  test_run_ranks(DS_WORLD, ds_main, x, RUN_MS, "desync over sock");
  test_destroy_comms(DS_WORLD, x->c);
  sock_world_release(w);
  rc = ds_check(&x->sh, sc, msg, sizeof msg);
  free(x);
  if (rc != 0) fail_msg("sock: %s", msg);
}

static void test_desync_skip(void **state) {
  (void)state;
  run_desync(DS_SKIP);
}

static void test_desync_recv(void **state) {
  (void)state;
  run_desync(DS_RECV);
}

/* ---- shrink ---------------------------------------------------------------
 */

/* Survivors old ranks 0, 1, 3: new ranks 0, 1, 2 of 3, sum 1 + 2 + 4. */
static void expect_survivors_013(const run_t *x) {
  static const int old[3] = {0, 1, 3};
  for (int i = 0; i < 3; i++) {
    int r = old[i];
    if (x->shrink_st[r] != COLL_OK)
      fail_msg("rank %d: shrink: %s", r, x->shrink_text[r]);
    assert_int_equal(x->new_size[r], 3);
    assert_int_equal(x->new_rank[r], i);
    assert_true(x->sum[r] == 7.0f);
  }
}

static void test_shrink_after_lost_rank(void **state) {
  run_t *x;
  (void)state;
  x = run(SC_SHRINK_LOST);
  expect_named(x, 0, COLL_ERR_PEER_LOST, "rank 2 lost");
  expect_survivors_013(x);
  free(x);
}

static void test_shrink_after_abort(void **state) {
  run_t *x;
  (void)state;
  x = run(SC_SHRINK_ABORT);
  expect_survivors_013(x);
  /* The rank whose owner aborted left: its shrink says so. */
  assert_int_equal(x->shrink_st[2], COLL_ERR_ABORTED);
  assert_non_null(strstr(x->shrink_text[2], "aborted"));
  free(x);
}

typedef struct healthy {
  coll_comm_t *c[W];
  int new_rank[W], new_size[W];
  float sum[W];
  char bad[W][TEXT];
} healthy_t;

static void healthy_main(int rank, int world, void *arg) {
  healthy_t *x = arg;
  coll_comm_t *nc = NULL;
  coll_status_t s;
  (void)world;
  if (coll_comm_shrink(x->c[rank], NULL, &nc) != COLL_OK) {
    snprintf(x->bad[rank], TEXT, "shrink: %s", coll_last_error());
    return;
  }
  x->new_rank[rank] = coll_comm_rank(nc);
  x->new_size[rank] = coll_comm_size(nc);
  x->sum[rank] = allreduce_rank_sum(nc, (float)(rank + 1), &s);
  if (s != COLL_OK)
    snprintf(x->bad[rank], TEXT, "allreduce: %s", coll_last_error());
  coll_comm_destroy(nc);
}

static void test_shrink_healthy(void **state) {
  healthy_t *x = calloc(1, sizeof *x);
  sock_world_t *w = sock_world_new(W);
  (void)state;
  assert_non_null(x);
  assert_non_null(w);
  assert_int_equal(make_comms(w, COMM_TIMEOUT_MS, x->c), 0);
  test_run_ranks(W, healthy_main, x, RUN_MS, "healthy shrink over sock");
  test_destroy_comms(W, x->c);
  sock_world_release(w);
  for (int r = 0; r < W; r++) {
    if (x->bad[r][0] != '\0') fail_msg("rank %d: %s", r, x->bad[r]);
    assert_int_equal(x->new_size[r], W);
    assert_int_equal(x->new_rank[r], r);
    assert_true(x->sum[r] == 10.0f);
  }
  free(x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lost_rank_named_everywhere),
      cmocka_unit_test(test_origin_forwarded),
      cmocka_unit_test(test_abort_named_as_abort),
      cmocka_unit_test(test_destroyed_rank_named),
      cmocka_unit_test(test_desync_skip),
      cmocka_unit_test(test_desync_recv),
      cmocka_unit_test(test_shrink_after_lost_rank),
      cmocka_unit_test(test_shrink_after_abort),
      cmocka_unit_test(test_shrink_healthy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
