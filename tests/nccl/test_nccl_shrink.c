/* SPDX-License-Identifier: Apache-2.0 */
/* test_nccl_shrink.c: coll_comm_shrink and coll_comm_shrink_exclude on NCCL
 * comms, on a stand-in that makes children as NCCL 2.28 does (*newcomm
 * written when the parent's job ends; an empty exclude list refused): a
 * healthy comm shrunk (N2 of the second review) or split (nobody excluded,
 * N3) and its collectives checked against a serial reference, the shrink
 * after a rank was lost (2.28: revoked at the failure, then shrunk; 2.27:
 * kept with COLL_NCCL_SHRINKABLE, NCCL_SHRINK_ABORT), NOT_AVAILABLE without
 * ncclCommShrink or ncclCommSplit, bad arguments, lists that differ, abort
 * or timeout ending a shrink that waits for a survivor that never comes,
 * and the stand-in's own rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include <cmocka.h>

#include "cuda/gpu_table.h"
#include "nccl_test_util.h"
#include "test_util.h"

#define MAXW 4
#define N 64

/* What the rank threads of one scenario share; each writes its own slots. */
struct shrink_arg {
  coll_comm_t *old[MAXW];
  coll_comm_t *nc[MAXW];
  int excl[MAXW][MAXW]; /* per rank: the list it passes */
  int nexcl[MAXW];
  int calls[MAXW]; /* 1: this rank shrinks; 0: it is gone */
  int use_plain;   /* coll_comm_shrink instead of the exclude list */
  int stuck_first; /* survivors run a collective that never ends first */
  coll_status_t warm_s[MAXW], first_s[MAXW];
  coll_status_t shrink_s[MAXW];
  char shrink_err[MAXW][256];
  char plain_err[MAXW][256];
  coll_status_t plain_s[MAXW];
  int new_rank[MAXW], new_size[MAXW];
  coll_status_t ar_s[MAXW], ag_s[MAXW], bc_s[MAXW];
  float *ar[MAXW];   /* allreduce buffer ("device" memory) */
  int32_t *ag[MAXW]; /* allgather: every new rank's old rank; [MAXW] sent */
  int32_t *bc[MAXW]; /* broadcast from the new last rank */
};

static void arg_init(struct shrink_arg *a, int world) {
  int r;
  memset(a, 0, sizeof *a);
  for (r = 0; r < world; r++) {
    a->ar[r] = standin_dev_alloc(r, N * sizeof(float));
    a->ag[r] = standin_dev_alloc(r, (MAXW + 1) * sizeof(int32_t));
    a->bc[r] = standin_dev_alloc(r, N * sizeof(int32_t));
    a->calls[r] = 1;
  }
}

static void arg_free(struct shrink_arg *a, int world) {
  int r;
  for (r = 0; r < world; r++) {
    coll_comm_destroy(a->nc[r]);
    coll_comm_destroy(a->old[r]);
    standin_dev_free(a->ar[r]);
    standin_dev_free(a->ag[r]);
    standin_dev_free(a->bc[r]);
  }
}

/* A survivor: optionally the collective that never completes, then the
 * shrink, then allreduce, allgather and broadcast on the new comm, all on
 * the default stream the old comm's stuck work is on. */
static void survivor(int rank, int world, void *p) {
  struct shrink_arg *a = p;
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_comm_t *c;
  int i, nr;
  (void)world;
  nt_set_device(rank);
  /* Every rank, the one about to be lost too, connects the old comm
   * first, so the stuck allreduce below is on the stream (not waiting for
   * a connect) and holds it until NCCL_SHRINK_ABORT ends it. */
  if (a->stuck_first)
    a->warm_s[rank] = coll_allreduce(a->old[rank], a->ar[rank], a->ar[rank], N,
                                     COLL_F32, COLL_SUM, NULL);
  if (!a->calls[rank]) return;
  cfg.timeout_ms = 10000;
  if (a->stuck_first) {
    a->first_s[rank] = coll_allreduce(a->old[rank], a->ar[rank], a->ar[rank], N,
                                      COLL_F32, COLL_SUM, NULL);
    a->plain_s[rank] = coll_comm_shrink(a->old[rank], &cfg, &a->nc[rank]);
    snprintf(a->plain_err[rank], sizeof a->plain_err[rank], "%s",
             coll_last_error());
  }
  if (a->use_plain)
    a->shrink_s[rank] = coll_comm_shrink(a->old[rank], &cfg, &a->nc[rank]);
  else
    a->shrink_s[rank] = coll_comm_shrink_exclude(
        a->old[rank], a->excl[rank], a->nexcl[rank], &cfg, &a->nc[rank]);
  snprintf(a->shrink_err[rank], sizeof a->shrink_err[rank], "%s",
           coll_last_error());
  c = a->nc[rank];
  if (a->shrink_s[rank] != COLL_OK || c == NULL) return;
  nr = a->new_rank[rank] = coll_comm_rank(c);
  a->new_size[rank] = coll_comm_size(c);
  for (i = 0; i < N; i++) a->ar[rank][i] = (float)((rank + 1) * (i + 1));
  a->ar_s[rank] =
      coll_allreduce(c, a->ar[rank], a->ar[rank], N, COLL_F32, COLL_SUM, NULL);
  a->ag[rank][MAXW] = rank;
  a->ag_s[rank] =
      coll_allgather(c, a->ag[rank] + MAXW, a->ag[rank], 1, COLL_I32, NULL);
  for (i = 0; i < N; i++)
    a->bc[rank][i] = nr == a->new_size[rank] - 1 ? rank * 1000 + i : -1;
  a->bc_s[rank] =
      coll_broadcast(c, a->bc[rank], N, COLL_I32, a->new_size[rank] - 1, NULL);
}

/* Asserts that the survivors (calls[r]) got a comm of their own, ranked in
 * their old order, on which every collective matches the serial result. */
static void check_survivors(const struct shrink_arg *a, int world) {
  int alive[MAXW], n = 0, r, i, k;
  for (r = 0; r < world; r++)
    if (a->calls[r]) alive[n++] = r;
  for (k = 0; k < n; k++) {
    r = alive[k];
    if (a->shrink_s[r] != COLL_OK)
      fail_msg("rank %d: shrink: %s", r, a->shrink_err[r]);
    assert_non_null(a->nc[r]);
    assert_int_equal(a->new_rank[r], k); /* renumbered in order */
    assert_int_equal(a->new_size[r], n);
    assert_int_equal(a->ar_s[r], COLL_OK);
    assert_int_equal(a->ag_s[r], COLL_OK);
    assert_int_equal(a->bc_s[r], COLL_OK);
    for (i = 0; i < N; i++) {
      float want = 0;
      int j;
      for (j = 0; j < n; j++) want += (float)((alive[j] + 1) * (i + 1));
      assert_true(a->ar[r][i] == want);
      assert_int_equal(a->bc[r][i], alive[n - 1] * 1000 + i);
    }
    for (i = 0; i < n; i++) assert_int_equal(a->ag[r][i], alive[i]);
  }
}

/* Rank 1 of 4 leaves a healthy comm: the others pass {1} (unsorted lists
 * in other tests) and get ranks 0..2 in their old order. */
static void test_shrink_healthy_exclude(void **state) {
  struct shrink_arg a;
  standin_stats_t st;
  int r;
  (void)state;
  arg_init(&a, 4);
  assert_int_equal(nt_rank_comms(4, 10000, a.old), 0);
  a.calls[1] = 0;
  for (r = 0; r < 4; r++) {
    a.excl[r][0] = 1;
    a.nexcl[r] = 1;
  }
  test_run_ranks(4, survivor, &a, 20000, "shrink of a healthy comm");
  check_survivors(&a, 4);
  standin_stats(&st);
  assert_int_equal(st.shrinks, 3);
  assert_int_equal(st.shrink_aborts, 0); /* healthy: NCCL_SHRINK_DEFAULT */
  /* The old comm still works for... nobody needs it; it is destroyed. */
  arg_free(&a, 4);
  standin_stats(&st);
  assert_int_equal(st.comms_live, 0);
  assert_true(nt_no_misuse());
}

/* coll_comm_shrink on a healthy NCCL comm excludes nobody: the same ranks
 * in a comm of their own. */
static void test_shrink_healthy_plain(void **state) {
  struct shrink_arg a;
  (void)state;
  arg_init(&a, 3);
  assert_int_equal(nt_rank_comms(3, 10000, a.old), 0);
  a.use_plain = 1;
  test_run_ranks(3, survivor, &a, 20000, "plain shrink");
  check_survivors(&a, 3);
  arg_free(&a, 3);
  assert_true(nt_no_misuse());
}

/* Rank 2 of 4 is gone after a first allreduce (it never reaches the
 * second): the survivors time out, coll_comm_shrink refuses (no way to
 * agree on who is gone), and coll_comm_shrink_exclude({2}) shrinks. On NCCL
 * 2.28 the failure revoked the comm (its stuck allreduce ended, the stream
 * runs again) and the shrink waits for that, then uses the default shrink;
 * the new comm's work runs on the same stream. */
static void test_shrink_after_loss(void **state) {
  struct shrink_arg a;
  standin_stats_t st;
  int r;
  (void)state;
  arg_init(&a, 4);
  assert_int_equal(nt_rank_comms(4, 200, a.old), 0);
  a.calls[2] = 0;
  a.stuck_first = 1;
  for (r = 0; r < 4; r++) {
    a.excl[r][0] = 2;
    a.nexcl[r] = 1;
  }
  test_run_ranks(4, survivor, &a, 20000, "shrink after a loss");
  for (r = 0; r < 4; r++) {
    assert_int_equal(a.warm_s[r], COLL_OK);
    if (r == 2) continue;
    assert_int_equal(a.first_s[r], COLL_ERR_TIMEOUT);
    assert_int_equal(a.plain_s[r], COLL_ERR_UNSUPPORTED);
    assert_non_null(strstr(a.plain_err[r], "coll_comm_shrink_exclude"));
  }
  check_survivors(&a, 4);
  standin_stats(&st);
  assert_int_equal(st.revokes, 3);
  assert_int_equal(st.shrinks, 3);
  assert_int_equal(st.shrink_aborts, 0);
  /* The failed comms were kept, not aborted, until their destroy. */
  assert_int_equal(st.comm_aborts, 0);
  arg_free(&a, 4);
  standin_stats(&st);
  assert_int_equal(st.destroy_blocked, 0);
  assert_int_equal(st.destroy_refused, 0);
  assert_int_equal(st.comms_live, 0);
  assert_true(nt_no_misuse());
}

/* The same on NCCL 2.27.3, which can shrink but not revoke: the comms are
 * kept at their failure only with COLL_NCCL_SHRINKABLE=1, and the shrink
 * ends the stuck work with NCCL_SHRINK_ABORT. */
static void test_shrink_after_loss_227(void **state) {
  struct shrink_arg a;
  standin_stats_t st;
  int r;
  (void)state;
  standin_uninstall();
  nt_install(4, 0, 22703);
  setenv("COLL_NCCL_SHRINKABLE", "1", 1);
  arg_init(&a, 4);
  assert_int_equal(nt_rank_comms(4, 200, a.old), 0);
  unsetenv("COLL_NCCL_SHRINKABLE");
  a.calls[2] = 0;
  a.stuck_first = 1;
  for (r = 0; r < 4; r++) {
    a.excl[r][0] = 2;
    a.nexcl[r] = 1;
  }
  test_run_ranks(4, survivor, &a, 20000, "shrink after a loss (2.27)");
  for (r = 0; r < 4; r++)
    if (r != 2) assert_int_equal(a.first_s[r], COLL_ERR_TIMEOUT);
  check_survivors(&a, 4);
  standin_stats(&st);
  assert_int_equal(st.revokes, 0);
  assert_int_equal(st.shrinks, 3);
  assert_int_equal(st.shrink_aborts, 3);
  assert_int_equal(st.comm_aborts, 0);
  arg_free(&a, 4);
  standin_stats(&st);
  assert_int_equal(st.comm_aborts, 3);
  assert_int_equal(st.destroy_blocked, 0);
  assert_int_equal(st.comms_live, 0);
  assert_true(nt_no_misuse());
}

/* A world-1 comm made by coll_comm_init_rank (keep: COLL_NCCL_SHRINKABLE). */
static coll_comm_t *one_comm(int keep) {
  coll_comm_t *c = NULL;
  if (keep) setenv("COLL_NCCL_SHRINKABLE", "1", 1);
  if (nt_rank_comms(1, 10000, &c) != 0) c = NULL;
  unsetenv("COLL_NCCL_SHRINKABLE");
  return c;
}

static void abort_comm(coll_comm_t *c) {
  coll_abort_handle_t *h = NULL;
  coll_comm_abort_handle(c, &h);
  coll_abort(h);
  coll_abort_handle_release(h);
}

/* coll_abort, then a shrink that excludes nobody: on NCCL 2.28 the abort
 * revoked NCCL's comm, and the shrink splits it into a working one. */
static void test_shrink_after_abort(void **state) {
  coll_comm_t *c = one_comm(0), *n = NULL;
  float *buf = standin_dev_alloc(0, sizeof(float));
  standin_stats_t st;
  (void)state;
  assert_non_null(c);
  abort_comm(c);
  standin_stats(&st);
  assert_int_equal(st.revokes, 1);
  assert_int_equal(st.comm_aborts, 0);
  assert_int_equal(coll_comm_shrink_exclude(c, NULL, 0, NULL, &n), COLL_OK);
  assert_non_null(n);
  assert_int_equal(coll_comm_size(n), 1);
  *buf = 3.0f;
  assert_int_equal(coll_allreduce(n, buf, buf, 1, COLL_F32, COLL_SUM, NULL),
                   COLL_OK);
  assert_true(*buf == 3.0f);
  standin_stats(&st);
  assert_int_equal(st.splits, 1);
  assert_int_equal(coll_comm_destroy(n), COLL_OK);
  assert_int_equal(coll_comm_destroy(c), COLL_OK);
  standin_stats(&st);
  assert_int_equal(st.comms_live, 0);
  assert_int_equal(st.destroy_refused, 0);
  standin_dev_free(buf);
  assert_true(nt_no_misuse());
}

/* NCCL 2.27.3: an abort frees NCCL's comm (on the reaper thread), and the
 * shrink says how to keep it; kept, a world-1 comm still cannot shrink
 * (nobody to exclude, no revoke to split after). */
static void test_shrink_after_abort_227(void **state) {
  coll_comm_t *c, *n = NULL;
  standin_stats_t st;
  (void)state;
  standin_uninstall();
  nt_install(1, 0, 22703);
  c = one_comm(0);
  assert_non_null(c);
  abort_comm(c);
  assert_int_equal(coll_comm_shrink_exclude(c, NULL, 0, NULL, &n),
                   COLL_ERR_UNSUPPORTED);
  assert_null(n);
  assert_non_null(strstr(coll_last_error(), "COLL_NCCL_SHRINKABLE=1"));
  coll_comm_destroy(c);
  standin_stats(&st);
  assert_int_equal(st.comm_aborts, 1);
  c = one_comm(1);
  assert_non_null(c);
  abort_comm(c);
  standin_stats(&st);
  assert_int_equal(st.comm_aborts, 1); /* kept */
  assert_int_equal(coll_comm_shrink_exclude(c, NULL, 0, NULL, &n),
                   COLL_ERR_UNSUPPORTED);
  assert_non_null(strstr(coll_last_error(), "name the ranks"));
  assert_int_equal(coll_comm_destroy(c), COLL_OK);
  standin_stats(&st);
  assert_int_equal(st.comm_aborts, 2); /* the kept comm, at its destroy */
  assert_int_equal(st.comms_live, 0);
  assert_true(nt_no_misuse());
}

struct na_arg {
  coll_comm_t *c[2];
  coll_status_t s[2];
  char err[2][256];
};

static void na_rank(int rank, int world, void *p) {
  struct na_arg *a = p;
  coll_comm_t *n = (coll_comm_t *)&n;
  int other = 1 - rank;
  (void)world;
  nt_set_device(rank);
  a->s[rank] = coll_comm_shrink_exclude(a->c[rank], &other, 1, NULL, &n);
  snprintf(a->err[rank], sizeof a->err[rank], "%s", coll_last_error());
  if (n != NULL) a->s[rank] = COLL_ERR_INTERNAL;
}

/* An NCCL older than 2.27.3 has no ncclCommShrink: NOT_AVAILABLE with the
 * version for a list; excluding nobody splits (2.18+). Older than 2.18: no
 * split either. */
static void test_shrink_not_available(void **state) {
  coll_comm_t *c, *n = (coll_comm_t *)&n;
  struct na_arg a;
  int r;
  (void)state;
  standin_uninstall();
  nt_install(2, 0, 22605);
  memset(&a, 0, sizeof a);
  assert_int_equal(nt_rank_comms(2, 10000, a.c), 0);
  test_run_ranks(2, na_rank, &a, 10000, "shrink without ncclCommShrink");
  for (r = 0; r < 2; r++) {
    assert_int_equal(a.s[r], COLL_ERR_NOT_AVAILABLE);
    assert_string_equal(a.err[r],
                        "comm_shrink: the loaded NCCL 2.26.5 has no "
                        "ncclCommShrink (2.27+)");
  }
  test_destroy_comms(2, a.c);
  c = one_comm(1);
  assert_non_null(c);
  assert_int_equal(coll_comm_shrink(c, NULL, &n), COLL_OK);
  assert_int_equal(coll_comm_size(n), 1);
  assert_int_equal(coll_comm_destroy(n), COLL_OK);
  assert_int_equal(coll_comm_destroy(c), COLL_OK);
  standin_uninstall();
  nt_install(1, 0, 21705);
  c = one_comm(0);
  assert_non_null(c);
  assert_int_equal(coll_comm_shrink(c, NULL, &n), COLL_ERR_NOT_AVAILABLE);
  assert_null(n);
  assert_non_null(strstr(coll_last_error(), "2.17.5 has no ncclCommSplit"));
  assert_int_equal(coll_comm_destroy(c), COLL_OK);
  assert_true(nt_no_misuse());
}

/* Every refused argument: a status, text naming it, *newcomm NULL, and
 * nothing reaching NCCL. */
static void test_shrink_bad_args(void **state) {
  coll_comm_t *comms[3] = {0}, *cpu = NULL, *n = NULL;
  coll_comm_config_t bad = COLL_COMM_CONFIG_INIT;
  int self[1] = {1}, out_of_range[1] = {3}, negative[1] = {-1};
  int twice[3] = {2, 0, 2};
  coll_abort_handle_t *used = NULL;
  standin_stats_t st;
  (void)state;
  assert_int_equal(nt_rank_comms(3, 10000, comms), 0);
#define REFUSED(call, text)                                   \
  do {                                                        \
    n = (coll_comm_t *)&n;                                    \
    assert_int_equal((call), COLL_ERR_INVALID_ARG);           \
    assert_null(n);                                           \
    if (strstr(coll_last_error(), (text)) == NULL)            \
      fail_msg("'%s' lacks '%s'", coll_last_error(), (text)); \
  } while (0)
  assert_int_equal(coll_comm_shrink(comms[1], NULL, NULL),
                   COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "newcomm is NULL"));
  assert_int_equal(coll_comm_shrink_exclude(comms[1], NULL, 0, NULL, NULL),
                   COLL_ERR_INVALID_ARG);
  REFUSED(coll_comm_shrink(NULL, NULL, &n), "comm is NULL");
  REFUSED(coll_comm_shrink_exclude(NULL, NULL, 0, NULL, &n), "comm is NULL");
  REFUSED(coll_comm_shrink_exclude(comms[1], self, -1, NULL, &n),
          "nexclude -1 is negative");
  REFUSED(coll_comm_shrink_exclude(comms[1], NULL, 1, NULL, &n),
          "exclude is NULL but nexclude is 1");
  REFUSED(coll_comm_shrink_exclude(comms[1], self, 1, NULL, &n),
          "rank 1 excludes itself");
  REFUSED(coll_comm_shrink_exclude(comms[1], out_of_range, 1, NULL, &n),
          "exclude[0] = 3 is not a rank of a 3-rank comm");
  REFUSED(coll_comm_shrink_exclude(comms[1], negative, 1, NULL, &n),
          "exclude[0] = -1");
  REFUSED(coll_comm_shrink_exclude(comms[1], twice, 3, NULL, &n),
          "rank 2 is listed twice");
  bad.magic = 0;
  REFUSED(coll_comm_shrink(comms[1], &bad, &n), "COLL_COMM_CONFIG_INIT");
  REFUSED(coll_comm_shrink_exclude(comms[1], NULL, 0, &bad, &n),
          "COLL_COMM_CONFIG_INIT");
  /* An abort handle that already belongs to a comm (the old one's). */
  bad = (coll_comm_config_t)COLL_COMM_CONFIG_INIT;
  assert_int_equal(coll_comm_abort_handle(comms[1], &used), COLL_OK);
  bad.abort_handle = used;
  REFUSED(coll_comm_shrink(comms[1], &bad, &n), "abort handle is the old");
  coll_abort_handle_release(used);
  /* One that already belongs to another comm. */
  assert_int_equal(coll_comm_abort_handle(comms[0], &used), COLL_OK);
  bad.abort_handle = used;
  REFUSED(coll_comm_shrink_exclude(comms[1], NULL, 0, &bad, &n),
          "already belongs to another comm");
  coll_abort_handle_release(used);
  setenv("COLL_TIMEOUT_MS", "soon", 1);
  REFUSED(coll_comm_shrink(comms[1], NULL, &n), "COLL_TIMEOUT_MS");
  unsetenv("COLL_TIMEOUT_MS");
#undef REFUSED
  standin_stats(&st);
  assert_int_equal(st.shrinks, 0);
  /* A CPU comm takes no list: its ranks agree by themselves. */
  assert_int_equal(test_inproc_comms(1, 10000, &cpu), 0);
  n = (coll_comm_t *)&n;
  assert_int_equal(coll_comm_shrink_exclude(cpu, NULL, 0, NULL, &n),
                   COLL_ERR_NOT_AVAILABLE);
  assert_null(n);
  assert_non_null(strstr(coll_last_error(), "cpu backend"));
  test_destroy_comms(1, &cpu);
  test_destroy_comms(3, comms);
  assert_true(nt_no_misuse());
}

/* Survivors that pass different lists all get NCCL's error, not a comm and
 * not a hang. */
static void test_shrink_lists_differ(void **state) {
  struct shrink_arg a;
  int r;
  (void)state;
  arg_init(&a, 4);
  assert_int_equal(nt_rank_comms(4, 10000, a.old), 0);
  a.calls[3] = 0;
  for (r = 0; r < 4; r++) a.nexcl[r] = 1;
  a.excl[0][0] = a.excl[1][0] = 3;
  a.excl[2][0] = 1; /* rank 2 thinks rank 1 is gone */
  test_run_ranks(4, survivor, &a, 20000, "lists that differ");
  for (r = 0; r < 3; r++) {
    assert_int_equal(a.shrink_s[r], COLL_ERR_BACKEND);
    assert_null(a.nc[r]);
    if (strstr(a.shrink_err[r], "different exclude lists") == NULL)
      fail_msg("rank %d: %s", r, a.shrink_err[r]);
  }
  arg_free(&a, 4);
  assert_true(nt_no_misuse());
}

static void aborter(void *p) {
  test_sleep_ms(50);
  coll_abort(p);
}

/* Rank 0 shrinks, rank 1 never does: the new comm's abort handle ends the
 * wait with ABORTED, and its timeout with TIMEOUT naming what to check.
 * NCCL's job on the parent is ended by aborting the parent (the old comm
 * is broken from then on) and the half-made child with it. */
static void test_shrink_stuck_abort_and_timeout(void **state) {
  coll_comm_t *comms[2] = {0}, *n = NULL;
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_abort_handle_t *h = NULL;
  standin_stats_t st;
  uv_thread_t th;
  int64_t t0;
  (void)state;
  assert_int_equal(nt_rank_comms(2, 10000, comms), 0);
  assert_int_equal(coll_abort_handle_create(&h), COLL_OK);
  cfg.timeout_ms = 10000; /* far beyond the abort: a hang fails below */
  cfg.abort_handle = h;
  assert_int_equal(uv_thread_create(&th, aborter, h), 0);
  t0 = test_now_ms();
  assert_int_equal(coll_comm_shrink(comms[0], &cfg, &n), COLL_ERR_ABORTED);
  uv_thread_join(&th);
  if (test_now_ms() - t0 >= 10000) fail_msg("the abort did not end it");
  assert_null(n);
  coll_abort_handle_release(h);
  standin_stats(&st);
  assert_int_equal(st.comms_live, 1); /* the other rank's old comm */
  /* The old comm is broken now. */
  assert_int_equal(
      coll_allreduce(comms[0], &t0, &t0, 1, COLL_I64, COLL_SUM, NULL),
      COLL_ERR_ABORTED);

  nt_set_device(1);
  cfg.abort_handle = NULL;
  cfg.timeout_ms = 100;
  assert_int_equal(coll_comm_shrink(comms[1], &cfg, &n), COLL_ERR_TIMEOUT);
  assert_null(n);
  assert_non_null(strstr(coll_last_error(), "did not finish within 100 ms"));
  standin_stats(&st);
  assert_int_equal(st.comms_live, 0);
  test_destroy_comms(2, comms);
  assert_true(nt_no_misuse());
}

/* The stand-in itself, through the table, as NCCL 2.28 is called: an
 * empty exclude list, an excluded rank calling, an unknown flag are
 * refused; *newcomm is NULL when the call returns and written when the
 * parent's job ends, the parent reporting the progress; a parent's error is
 * returned by a shrink with NCCL_SHRINK_ABORT. */
static void test_standin_shrink_rules(void **state) {
  const coll_nccl_table_t *t = coll__nccl_table();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclUniqueId id;
  ncclComm_t nc[2] = {NULL, NULL}, child = (ncclComm_t)&child;
  ncclResult_t async = ncclSuccess;
  int self = 0, other = 1, i, n;
  (void)state;
  config.blocking = 0;
  assert_int_equal(t->nccl_get_unique_id(&id), ncclSuccess);
  assert_int_equal(t->nccl_group_start(), ncclSuccess);
  for (i = 0; i < 2; i++) {
    nt_set_device(i);
    t->nccl_comm_init_rank_config(&nc[i], 2, id, i, &config);
  }
  assert_int_equal(t->nccl_group_end(), ncclSuccess);
  nt_set_device(0);
  assert_int_equal(
      t->nccl_comm_shrink(nc[0], NULL, 0, &child, &config, NCCL_SHRINK_DEFAULT),
      ncclInvalidArgument);
  assert_int_equal(t->nccl_comm_shrink(nc[0], &self, 1, &child, &config,
                                       NCCL_SHRINK_DEFAULT),
                   ncclInvalidArgument);
  assert_int_equal(t->nccl_comm_shrink(nc[0], &other, 1, &child, &config, 7),
                   ncclInvalidArgument);
  standin_set_launch_delay_us(100000);
  assert_int_equal(t->nccl_comm_shrink(nc[0], &other, 1, &child, &config,
                                       NCCL_SHRINK_DEFAULT),
                   ncclInProgress);
  assert_null(child);
  assert_int_equal(t->nccl_comm_get_async_error(nc[0], &async), ncclSuccess);
  assert_int_equal(async, ncclInProgress);
  for (n = 0; async == ncclInProgress; n++) {
    assert_true(n < 5000);
    test_sleep_ms(1);
    t->nccl_comm_get_async_error(nc[0], &async);
  }
  standin_set_launch_delay_us(0);
  assert_int_equal(async, ncclSuccess);
  assert_non_null(child);
  assert_int_equal(t->nccl_comm_get_async_error(child, &async), ncclSuccess);
  assert_int_equal(async, ncclSuccess);
  assert_int_equal(t->nccl_comm_destroy(child), ncclSuccess);
  /* The parent's error, after NCCL_SHRINK_ABORT stopped its work. */
  standin_inject_async_error(ncclRemoteError);
  assert_int_equal(
      t->nccl_comm_shrink(nc[0], &other, 1, &child, &config, NCCL_SHRINK_ABORT),
      ncclRemoteError);
  for (i = 0; i < 2; i++)
    assert_int_equal(t->nccl_comm_abort(nc[i]), ncclSuccess);
  assert_true(nt_no_misuse());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_shrink_healthy_exclude, nt_setup4,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_shrink_healthy_plain, nt_setup3,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_shrink_after_loss, nt_setup4,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_shrink_after_loss_227, nt_setup4,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_shrink_after_abort, nt_setup1,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_shrink_after_abort_227, nt_setup1,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_shrink_not_available, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_shrink_bad_args, nt_setup3,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_shrink_lists_differ, nt_setup4,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_shrink_stuck_abort_and_timeout,
                                      nt_setup2, nt_teardown),
      cmocka_unit_test_setup_teardown(test_standin_shrink_rules, nt_setup2,
                                      nt_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
